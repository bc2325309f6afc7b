"""A fuzzing campaign: draw cases, run both modes, classify, bucket, verify, report.

NOTE [driving Hypothesis]
Cases come from :func:`strategies.cases` through Hypothesis's public fuzzing entry point,
``test.hypothesis.fuzz_one_input(buffer)``: each case is decoded from a buffer of bytes drawn from
``random.Random(seed)``. So ``--seed`` makes a run repeat exactly (the same cases in the same order),
strategies keep their simplest-first ordering for later shrinking, and nothing here depends on Hypothesis
internals. The test body never raises (internal errors are logged and counted), so Hypothesis's example
database is never written during a campaign.

NOTE [background shrinking]
Shrinking a new finding costs tens to hundreds of case runs (NOTE [shrinking]); on a torch with many
bugs it would take most of a campaign's time. With ``shrink_workers=1`` (``affuzz run`` does this)
new findings are queued for a worker process that shrinks them while the fuzz loop goes on;
value_mismatch findings (silently wrong results) are shrunk first. A finding is bucketed and published
when its shrink comes back; its repeats meanwhile count as hits of the queued job (NOTE [signature
memo]). When the loop ends, the queue gets ``shrink_grace`` seconds; what is left is published
unshrunk, still verified, with ``"skipped"`` in its ``shrink`` record. The cases drawn and their
verdicts do not depend on this; which repeats are merged by ``_same_as_bucket`` can (it only consults
buckets already shrunk), so tests that compare whole campaigns shrink in process.
"""

from __future__ import annotations

import multiprocessing
import random
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .case import TRANSFORMS, Case, case_from_json, case_to_json
from .compare import ALL_VERDICTS, FINDING_VERDICTS, Limitation, classify, load_registry
from .execute import Outcome, run_case, triage_source
from .features import ALL_FEATURES, features
from .findings import Finding, repro_lines, stage, verify_and_publish
from .forkserver import ForkServer
from .oracles import MAIN, applicable
from .reduce import is_subsequence, size, to_skeleton
from .render import render
from .shrink import DEFAULT_BUDGET, Goal, Shrinker, ShrinkResult, case_runner, fingerprint
from .signature import Signature, signature, skeleton

BUFFER_BYTES = 2048


@dataclass
class Bucket:
    """Findings with one (shrunk) signature. ``first`` is the finding that opened it, ``finding`` the
    one whose repro is published: the smallest shrunk case seen so far."""

    signature: Signature
    first: Finding
    hits: int = 1
    status: str = "pending"  # pending -> verified | unverified
    path: Path | None = None
    finding: Finding | None = None
    goal: Goal | None = None  # what shrinking kept (NOTE [shrinking])
    raw_signatures: int = 1  # distinct pre-shrink signatures that shrank into this bucket
    shrink_seconds: list[float] = field(default_factory=list)

    @property
    def published(self) -> Finding:
        return self.finding or self.first


@dataclass
class ShrinkJob:
    """A new finding waiting for (or in) the shrink worker; ``hits`` counts its occurrences so far."""

    raw: Signature
    goal: Goal
    case: Case
    outcome: Outcome
    buffer: bytes | None
    seconds_to_find: float
    cases_to_find: int
    hits: int = 1


def shrink_info(result: ShrinkResult, lines_before: int, raw_signature: str, oracle: str) -> dict[str, Any]:
    return {
        "runs": result.runs,
        "seconds": round(result.seconds, 3),
        "steps": result.steps,
        "exhausted": result.exhausted,
        "lines_before": lines_before,
        "lines_after": repro_lines(result.case, oracle),
        "raw_signature": raw_signature,
    }


_PROGRESS: Any = None  # the shrink worker's progress queue (set by _init_shrink_worker)


def _init_shrink_worker(progress: Any) -> None:
    global _PROGRESS
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when to stop
    _PROGRESS = progress


def shrink_job(
    case_json: dict[str, Any],
    goal: Goal,
    buffer: bytes | None,
    budget: int,
    strategy_kwargs: dict[str, Any] | None,
    timeout: float | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Runs in the shrink worker process (NOTE [background shrinking]): the same shrink as in process."""
    from strategies import cases

    case = case_from_json(case_json)
    last = [0.0]

    def progress(stage: str, runs: int, best: Case) -> None:
        if _PROGRESS is not None and time.monotonic() - last[0] >= 0.25:
            last[0] = time.monotonic()
            try:
                _PROGRESS.put_nowait((runs, stage))
            except Exception:  # noqa: BLE001 (progress is best effort)
                pass

    shrinker = Shrinker(goal, case_runner(goal.oracle, timeout=timeout), budget=budget, progress=progress)
    result = shrinker.shrink(case, strategy=cases(**(strategy_kwargs or {})), buffer=buffer)
    info = shrink_info(result, repro_lines(case, goal.oracle), "", goal.oracle)
    return case_to_json(result.case), info


@dataclass
class CampaignConfig:
    out: Path
    seed: int
    duration: float | None = 60.0
    max_cases: int | None = None
    strategy: st.SearchStrategy[Case] | None = None
    verify_python: str = sys.executable
    case_timeout: float | None = 60.0  # seconds per case and oracle; over it the case is a hang finding
    shrink_budget: int = DEFAULT_BUDGET  # case runs one shrink may spend (NOTE [shrinking]); 0: no shrinking
    shrink_workers: int = 0  # 1: shrink in a worker process while the fuzz loop goes on (NOTE [background shrinking])
    shrink_grace: float | None = None  # seconds to wait for queued shrinks at the end (None: all of them)
    strategy_kwargs: dict[str, Any] | None = None  # strategies.cases(**strategy_kwargs), unless ``strategy``
    command: str = "affuzz run"


@dataclass
class Stats:
    cases: int = 0
    invalid: int = 0
    internal_errors: int = 0
    float32_noise: int = 0  # float32 disagreements that vanished in float64 (not findings)
    shrink_worker_crashes: int = 0  # NOTE [background shrinking]
    metamorphic: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    feature_counts: Counter[str] = field(default_factory=Counter)  # cases exercising each feature tag
    transform_counts: Counter[str] = field(default_factory=Counter)  # cases with each transform in the stack
    verdicts: Counter[str] = field(default_factory=Counter)
    limitations: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        return self.cases / self.elapsed if self.elapsed > 0 else 0.0


class Campaign:
    def __init__(self, config: CampaignConfig, *, registry: tuple[Limitation, ...] | None = None) -> None:
        import torch  # the campaign is the only layer above the case IR that needs torch itself

        self.config = config
        self.registry = registry if registry is not None else load_registry()
        self.torch_version = torch.__version__
        self.stats = Stats()
        self.buckets: dict[str, Bucket] = {}
        self._raw: dict[str, str] = {}  # pre-shrink signature id -> bucket id (each is shrunk once)
        self._quick: dict[tuple[Any, ...], str] = {}  # NOTE [signature memo]
        self._buffer: bytes | None = None  # the bytes the current case was drawn from
        self._on_tick: Callable[[Campaign], None] | None = None
        self.shrinking: str | None = None  # what the shrinker is doing now, for the live view
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="affuzz-verify")
        self._futures: list[Future[None]] = []
        self._stop = False
        self._server = ForkServer(config.verify_python)  # used by the verification thread only
        if config.strategy is None:
            from strategies import cases

            config.strategy = cases(**(config.strategy_kwargs or {}))
        elif config.strategy_kwargs is None and config.shrink_workers:
            raise ValueError("background shrinking needs strategy_kwargs (a strategy object stays in this process)")
        self._jobs: dict[str, ShrinkJob] = {}  # raw signature id -> job not yet bucketed
        self._queue: list[ShrinkJob] = []
        self._inflight: tuple[ShrinkJob, Future[Any]] | None = None
        self._shrink_pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        if config.shrink_workers and config.shrink_budget > 0:
            self._new_shrink_pool()

    def _new_shrink_pool(self) -> None:
        if self._shrink_pool is not None:
            self._shrink_pool.shutdown(wait=False, cancel_futures=True)
        ctx = multiprocessing.get_context("spawn")
        self._progress = ctx.Queue()
        self._shrink_pool = ProcessPoolExecutor(
            max_workers=1, mp_context=ctx, initializer=_init_shrink_worker, initargs=(self._progress,)
        )

    # ------------------------------------------------------------------------------------ running

    def judge(self, case: Case, oracle: str = MAIN) -> str:
        return self.evaluate(case, oracle)[0]

    def evaluate(self, case: Case, oracle: str = MAIN) -> tuple[str, str]:
        """(classified verdict, error fingerprint) of ``case`` under ``oracle``: what the shrinker keeps."""
        try:
            outcome = run_case(case, oracle, timeout=self.config.case_timeout)
            verdict = classify(outcome, self.registry)[0]
        except Exception:  # noqa: BLE001
            return "internal_error", ""
        return verdict, fingerprint(verdict, outcome.functorch.error, outcome.reference.error)

    def one(self, case: Case) -> None:
        """Run one case under every oracle that applies (NOTE [oracles]). Never raises (see NOTE
        [driving Hypothesis])."""
        self.stats.cases += 1
        self.stats.feature_counts.update(features(case))
        self.stats.transform_counts.update({t.name for t in case.transforms})
        for oracle in applicable(case):
            try:
                self._check(case, oracle)
            except Exception:  # noqa: BLE001
                self.stats.internal_errors += 1
                log = self.config.out / "internal-errors.log"
                with log.open("a", encoding="utf-8") as fh:
                    fh.write(f"--- case {self.stats.cases} ({oracle})\n{traceback.format_exc()}\n")

    def _check(self, case: Case, oracle: str) -> None:
        outcome = run_case(case, oracle, timeout=self.config.case_timeout)
        verdict, limitation = classify(outcome, self.registry)
        if verdict in FINDING_VERDICTS and case.inputs.dtype != "float64":
            # NOTE [float32 findings]: a float32 disagreement counts only if it persists in float64;
            # otherwise it is rounding noise, counted but never reported.
            if self.judge(replace(case, inputs=replace(case.inputs, dtype="float64")), oracle) == "consistent":
                self.stats.float32_noise += 1
                verdict = "consistent"
        if oracle == MAIN:
            self.stats.verdicts[verdict] += 1
            if limitation:
                self.stats.limitations[limitation] += 1
        else:
            self.stats.metamorphic[oracle][verdict] += 1
        if verdict in FINDING_VERDICTS:
            self._finding(case, verdict, outcome, oracle)

    def _finding(self, case: Case, verdict: str, outcome: Outcome, oracle: str) -> None:
        fp = fingerprint(verdict, outcome.functorch.error, outcome.reference.error)
        # NOTE [signature memo]: a finding with the same verdict, oracle, skeleton, feature set and error
        # fingerprint as one already seen is a hit of its bucket without ablating it again; one with the
        # same pre-shrink signature is a hit without shrinking it again; and one whose bug still shows
        # (same goal, NOTE [shrinking]) once its stack is cut down to an existing bucket's skeleton is a
        # hit of that bucket. Ablation (a run per feature) and shrinking are what a campaign spends its
        # time on, so each is done once per new bug, not once per occurrence.
        quick = (verdict, oracle, skeleton(case), features(case), fp)
        known = self._quick.get(quick)
        if known is None:
            raw = signature(case, verdict, lambda variant: self.judge(variant, oracle), oracle=oracle)
            goal = Goal(verdict, oracle, raw.features, fp)
            known = self._raw.get(raw.id) or self._same_as_bucket(case, goal)
        if known is not None:
            self._quick[quick] = known
            job = self._jobs.get(known)
            if job is not None:
                job.hits += 1  # its bucket is not known until it is shrunk
            else:
                self.buckets[known].hits += 1
            return
        job = ShrinkJob(
            raw=raw,
            goal=goal,
            case=case,
            outcome=outcome,
            buffer=self._buffer,
            seconds_to_find=self.stats.elapsed,
            cases_to_find=self.stats.cases,
        )
        self._quick[quick] = self._raw[raw.id] = raw.id
        if self._shrink_pool is None:
            shrunk, info = self._shrink(case, goal, raw)
            self._complete(job, shrunk, info)
        else:
            self._jobs[raw.id] = job
            self._queue.append(job)
            self._pump()

    # ------------------------------------------------------------------------- background shrinking

    def _pump(self) -> None:
        """NOTE [background shrinking]: collect a finished shrink, start the next queued one. Silent
        wrong results (value_mismatch) go first; within a verdict, first come first served."""
        inflight = self._inflight
        if inflight is not None and inflight[1].done():
            job, fut = inflight
            self._inflight = None
            try:
                case_json, info = fut.result()
                shrunk = case_from_json(case_json)
            except BrokenProcessPool:
                # a candidate crashed torch in the worker (a segfault or abort is a finding of its own,
                # but which candidate did it is not known here): start a fresh worker and go on
                self.stats.shrink_worker_crashes += 1
                self._new_shrink_pool()
                shrunk, info = job.case, self._unshrunk_info(job, "the shrink worker died (a candidate crashed it)")
            except Exception:  # noqa: BLE001 (a failed shrink publishes the finding unshrunk)
                with (self.config.out / "internal-errors.log").open("a", encoding="utf-8") as fh:
                    fh.write(f"--- shrinking {job.raw.id}\n{traceback.format_exc()}\n")
                shrunk, info = job.case, self._unshrunk_info(job, "the shrink worker failed")
            self._complete(job, shrunk, info)
        while self._progress is not None:
            try:
                runs, stage = self._progress.get_nowait()
            except Exception:  # noqa: BLE001 (queue.Empty)
                break
            if self._inflight is not None:
                raw = self._inflight[0].raw
                self.shrinking = (
                    f"shrinking {raw.verdict} ({raw.oracle}): {stage}, run {runs}/{self.config.shrink_budget}"
                    f" ({len(self._queue)} queued)"
                )
        if self._inflight is None:
            self.shrinking = None
            if self._queue and self._shrink_pool is not None:
                job = min(self._queue, key=lambda j: j.raw.verdict != "value_mismatch")
                self._queue.remove(job)
                fut = self._shrink_pool.submit(
                    shrink_job,
                    case_to_json(job.case),
                    job.goal,
                    job.buffer,
                    self.config.shrink_budget,
                    self.config.strategy_kwargs,
                    self.config.case_timeout,
                )
                self._inflight = (job, fut)
                self.shrinking = f"shrinking {job.raw.verdict} ({job.raw.oracle}) ({len(self._queue)} queued)"

    def _drain(self, on_tick: Callable[[Campaign], None] | None) -> None:
        """After the fuzz loop: wait for queued shrinks up to ``shrink_grace`` seconds, then publish the
        rest unshrunk (still verified)."""
        deadline = None if self.config.shrink_grace is None else time.monotonic() + self.config.shrink_grace
        while self._inflight is not None or self._queue:
            if deadline is not None and time.monotonic() >= deadline:
                break
            self._pump()
            if on_tick is not None:
                on_tick(self)
            time.sleep(0.05)
        if self._inflight is not None:
            self._queue.insert(0, self._inflight[0])
            self._inflight[1].cancel()
            self._inflight = None
        for job in self._queue:
            self._complete(job, job.case, self._unshrunk_info(job, "the campaign ended before it was shrunk"))
        self._queue.clear()
        self.shrinking = None

    def _unshrunk_info(self, job: ShrinkJob, why: str) -> dict[str, Any]:
        lines = repro_lines(job.case, job.goal.oracle)
        return {
            "runs": 0,
            "seconds": 0.0,
            "steps": [],
            "exhausted": False,
            "lines_before": lines,
            "lines_after": lines,
            "raw_signature": job.raw.text,
            "skipped": why,
        }

    def _complete(self, job: ShrinkJob, shrunk: Case, shrink_info: dict[str, Any]) -> None:
        """Bucket a shrunk finding (NOTE [shrinking]) and publish it (or count it as a hit)."""
        self._jobs.pop(job.raw.id, None)
        raw, goal, case, outcome = job.raw, job.goal, job.case, job.outcome
        shrink_info["raw_signature"] = raw.text
        verdict, oracle = goal.verdict, goal.oracle
        sig = Signature(verdict, oracle, skeleton(shrunk), raw.features)
        for key, value in list(self._quick.items()):
            if value == raw.id:
                self._quick[key] = sig.id
        self._raw[raw.id] = sig.id
        if shrunk != case:
            outcome = run_case(shrunk, oracle, timeout=self.config.case_timeout)
        finding = Finding(
            case=shrunk,
            signature=sig,
            features=features(shrunk),
            outcome=outcome,
            seconds_to_find=job.seconds_to_find,
            cases_to_find=job.cases_to_find,
            torch_version=self.torch_version,
            found_by=f"{self.config.command} --seed {self.config.seed}",
            original=case,
            shrink=shrink_info,
        )
        if verdict == "value_mismatch":
            label, detail = triage_source(render(shrunk, oracle=oracle))
            finding.extra.update(triage=label, triage_detail=detail[:500])
        bucket = self.buckets.get(sig.id)
        if bucket is not None:
            bucket.hits += job.hits
            bucket.raw_signatures += 1
            bucket.shrink_seconds.append(shrink_info["seconds"])
            if bucket.status == "pending" or (
                bucket.status == "verified" and size(shrunk) >= size(bucket.published.case)
            ):
                return
            # NOTE [smallest repro]: a bucket publishes its smallest shrunk case; a smaller one found later
            # replaces the published repro once it, too, has been verified.
            finding.cases_to_find, finding.seconds_to_find = bucket.first.cases_to_find, bucket.first.seconds_to_find
        else:
            bucket = self.buckets[sig.id] = Bucket(
                sig, finding, hits=job.hits, goal=goal, shrink_seconds=[shrink_info["seconds"]]
            )
        self._publish(bucket, finding)

    def _same_as_bucket(self, case: Case, goal: Goal) -> str | None:
        """The id of a bucket whose bug ``case`` shows once its stack is cut to the bucket's skeleton."""
        for bucket_id, bucket in self.buckets.items():
            if bucket.goal != goal or not is_subsequence(bucket.signature.skeleton, skeleton(case)):
                continue
            cut = to_skeleton(case, bucket.signature.skeleton)
            shrinker = Shrinker(goal, lambda c: self.evaluate(c, goal.oracle), budget=2 + len(features(case)))
            if cut is not None and shrinker.same_bug(cut):
                return bucket_id
        return None

    def _shrink(self, case: Case, goal: Goal, raw: Signature) -> tuple[Case, dict[str, Any]]:
        """NOTE [shrinking]: shrink ``case`` keeping ``goal`` in this process; returns the case and what
        it took."""
        before = repro_lines(case, goal.oracle)
        if self.config.shrink_budget <= 0:
            return case, {
                "runs": 0,
                "seconds": 0.0,
                "steps": [],
                "exhausted": False,
                "lines_before": before,
                "lines_after": before,
                "raw_signature": raw.text,
            }
        budget = self.config.shrink_budget
        last = [0.0]

        def progress(stage: str, runs: int, best: Case) -> None:
            self.shrinking = f"shrinking {raw.verdict} ({raw.oracle}): {stage}, run {runs}/{budget}"
            if self._on_tick is not None and time.monotonic() - last[0] >= 0.25:
                last[0] = time.monotonic()
                self._on_tick(self)

        shrinker = Shrinker(goal, lambda c: self.evaluate(c, goal.oracle), budget=budget, progress=progress)
        try:
            result = shrinker.shrink(case, strategy=self.config.strategy, buffer=self._buffer)
        finally:
            self.shrinking = None
        return result.case, shrink_info(result, before, raw.text, goal.oracle)

    def _publish(self, bucket: Bucket, finding: Finding) -> None:
        """Stage ``finding`` and verify it in a fresh process on the verification thread; on success it
        becomes the bucket's published repro."""
        staged = stage(self.config.out, finding)
        sig = bucket.signature

        def verify() -> None:
            try:
                ok, path = verify_and_publish(
                    self.config.out,
                    staged,
                    finding,
                    python=self.config.verify_python,
                    case_timeout=self.config.case_timeout,
                    server=self._server,
                )
            except Exception:  # noqa: BLE001 (a verification failure must not end the campaign)
                ok, path = False, None
                with (self.config.out / "internal-errors.log").open("a", encoding="utf-8") as fh:
                    fh.write(f"--- verifying {sig.id}\n{traceback.format_exc()}\n")
            if ok:
                bucket.status, bucket.path, bucket.finding = "verified", path, finding
            elif bucket.status == "pending":
                bucket.status, bucket.path = "unverified", path

        self._futures.append(self._pool.submit(verify))

    def _should_stop(self) -> bool:
        c = self.config
        if self._stop:
            return True
        if c.max_cases is not None and self.stats.cases >= c.max_cases:
            return True
        return c.duration is not None and self.stats.elapsed >= c.duration

    def run(self, on_tick: Callable[[Campaign], None] | None = None, tick_seconds: float = 0.25) -> None:
        """Run until ``duration``/``max_cases`` or SIGINT/SIGTERM, then wait for pending verifications."""
        self.config.out.mkdir(parents=True, exist_ok=True)

        @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(self.config.strategy)
        def target(case: Case) -> None:
            self.one(case)

        fuzz = target.hypothesis.fuzz_one_input
        rng = random.Random(self.config.seed)
        self._on_tick = on_tick
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def request_stop(signum: int, frame: Any) -> None:
            self._stop = True

        for s in previous:
            signal.signal(s, request_stop)
        self.stats = Stats()
        last_tick = 0.0
        try:
            while not self._should_stop():
                self._buffer = rng.randbytes(BUFFER_BYTES)
                if fuzz(self._buffer) is None:
                    self.stats.invalid += 1
                if self._shrink_pool is not None:
                    self._pump()
                if on_tick is not None and time.monotonic() - last_tick >= tick_seconds:
                    last_tick = time.monotonic()
                    on_tick(self)
            self.finish(on_tick)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def finish(self, on_tick: Callable[[Campaign], None] | None = None) -> None:
        self._drain(on_tick)
        if self._shrink_pool is not None:
            self._shrink_pool.shutdown(wait=True, cancel_futures=True)
        self.elapsed = self.stats.elapsed
        for fut in self._futures:
            while not fut.done():
                if on_tick is not None:
                    on_tick(self)
                time.sleep(0.1)
            fut.result()
        self._pool.shutdown(wait=True)
        self._server.close()

    # ------------------------------------------------------------------------------------ results

    def _shrink_stats(self) -> dict[str, Any]:
        seconds = sorted(t for b in self.buckets.values() for t in b.shrink_seconds)
        return {
            "budget": self.config.shrink_budget,
            "shrinks": len(seconds),
            "seconds_total": round(sum(seconds), 3),
            "seconds_median": seconds[len(seconds) // 2] if seconds else None,
            "seconds_max": seconds[-1] if seconds else None,
            "unshrunk": sum(1 for b in self.buckets.values() if "skipped" in b.published.shrink),
            "worker_crashes": self.stats.shrink_worker_crashes,
        }

    def summary(self) -> dict[str, Any]:
        s = self.stats
        elapsed = getattr(self, "elapsed", s.elapsed)
        return {
            "schema_version": 1,
            "seed": self.config.seed,
            "torch_version": self.torch_version,
            "python_version": sys.version.split()[0],
            "cases": s.cases,
            "invalid_inputs": s.invalid,
            "elapsed_seconds": round(elapsed, 3),
            "cases_per_second": round(s.cases / elapsed, 2) if elapsed else 0.0,
            "verdicts": {v: s.verdicts.get(v, 0) for v in ALL_VERDICTS},
            "expected_by_limitation": dict(s.limitations),
            "internal_errors": s.internal_errors,
            "float32_noise": s.float32_noise,
            "metamorphic_verdicts": {o: dict(c) for o, c in s.metamorphic.items()},
            "shrink": self._shrink_stats(),
            "feature_counts": {t: s.feature_counts.get(t, 0) for t in ALL_FEATURES},
            "transform_counts": {t: s.transform_counts.get(t, 0) for t in TRANSFORMS},
            "buckets": [
                {
                    "id": b.signature.id,
                    "signature": b.signature.text,
                    "verdict": b.signature.verdict,
                    "oracle": b.signature.oracle,
                    "transforms": list(b.signature.skeleton),
                    "features": list(b.published.features),
                    "signature_features": list(b.signature.features),
                    "hits": b.hits,
                    "raw_signatures": b.raw_signatures,
                    "status": b.status,
                    "triage": b.published.extra.get("triage"),
                    "shrink_seconds": b.shrink_seconds,
                    "repro_lines": b.published.shrink.get("lines_after"),
                    "seconds_to_find": round(b.first.seconds_to_find, 3),
                    "cases_to_find": b.first.cases_to_find,
                    "path": str(b.path.relative_to(self.config.out)) if b.path else None,
                }
                for b in self.buckets.values()
            ],
        }
