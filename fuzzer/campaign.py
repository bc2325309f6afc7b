"""A fuzzing campaign: draw cases, run both modes, classify, bucket, verify, report.

NOTE [driving Hypothesis]
Cases come from :func:`strategies.cases` through Hypothesis's public fuzzing entry point,
``test.hypothesis.fuzz_one_input(buffer)``: each case is decoded from a buffer of bytes drawn from
``random.Random(seed)``. So ``--seed`` makes a run repeat exactly (the same cases in the same order),
strategies keep their simplest-first ordering for later shrinking, and nothing here depends on Hypothesis
internals. The test body never raises (internal errors are logged and counted), so Hypothesis's example
database is never written during a campaign.
"""

from __future__ import annotations

import random
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .case import TRANSFORMS, Case
from .compare import ALL_VERDICTS, FINDING_VERDICTS, Limitation, classify, load_registry
from .execute import Outcome, run_case, triage_source
from .features import ALL_FEATURES, features
from .findings import Finding, repro_lines, stage, verify_and_publish
from .forkserver import ForkServer
from .oracles import MAIN, applicable
from .reduce import is_subsequence, size, to_skeleton
from .render import render
from .shrink import DEFAULT_BUDGET, Goal, Shrinker, fingerprint
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
class CampaignConfig:
    out: Path
    seed: int
    duration: float | None = 60.0
    max_cases: int | None = None
    strategy: st.SearchStrategy[Case] | None = None
    verify_python: str = sys.executable
    case_timeout: float | None = 60.0  # seconds per case and oracle; over it the case is a hang finding
    shrink_budget: int = DEFAULT_BUDGET  # case runs one shrink may spend (NOTE [shrinking]); 0: no shrinking
    command: str = "affuzz run"


@dataclass
class Stats:
    cases: int = 0
    invalid: int = 0
    internal_errors: int = 0
    float32_noise: int = 0  # float32 disagreements that vanished in float64 (not findings)
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

            config.strategy = cases()

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
        # fingerprint as one already bucketed is a hit of that bucket without ablating it again; one with
        # the same pre-shrink signature is a hit without shrinking it again; and one whose bug still shows
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
            self.buckets[known].hits += 1
            return
        shrunk, shrink_info = self._shrink(case, goal, raw)
        sig = Signature(verdict, oracle, skeleton(shrunk), raw.features)
        self._raw[raw.id] = self._quick[quick] = sig.id
        if shrunk is not case:
            outcome = run_case(shrunk, oracle, timeout=self.config.case_timeout)
        finding = Finding(
            case=shrunk,
            signature=sig,
            features=features(shrunk),
            outcome=outcome,
            seconds_to_find=self.stats.elapsed,
            cases_to_find=self.stats.cases,
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
            bucket.hits += 1
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
            bucket = self.buckets[sig.id] = Bucket(sig, finding, goal=goal, shrink_seconds=[shrink_info["seconds"]])
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
        """NOTE [shrinking]: shrink ``case`` keeping ``goal``; returns the case and what it took."""
        before = repro_lines(case, goal.oracle)
        if self.config.shrink_budget <= 0:
            return case, {"runs": 0, "seconds": 0.0, "steps": [], "exhausted": False, "lines_before": before}
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
        info = {
            "runs": result.runs,
            "seconds": round(result.seconds, 3),
            "steps": result.steps,
            "exhausted": result.exhausted,
            "lines_before": before,
            "lines_after": repro_lines(result.case, goal.oracle),
            "raw_signature": raw.text,
        }
        return result.case, info

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
                if on_tick is not None and time.monotonic() - last_tick >= tick_seconds:
                    last_tick = time.monotonic()
                    on_tick(self)
            self.finish(on_tick)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def finish(self, on_tick: Callable[[Campaign], None] | None = None) -> None:
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
