"""A fuzzing campaign: the driver. Workers draw and run cases (:mod:`fuzzer.campaign.worker`); the driver counts,
buckets, hands out shrink jobs, verifies, and is the only writer of OUT.

NOTE [driving Hypothesis]
Cases come from :func:`strategies.cases` through Hypothesis's public fuzzing entry point,
``test.hypothesis.fuzz_one_input(buffer)``: each case is decoded from a buffer of bytes named by the
campaign seed, the worker slot and a position (NOTE [worker streams] in :mod:`fuzzer.campaign.worker`). So
``--seed`` makes a worker's run repeat exactly, strategies keep their simplest-first ordering for later
shrinking, and nothing here depends on Hypothesis internals. The test body never raises (internal
errors are logged and counted), so Hypothesis's example database is never written during fuzzing.

NOTE [campaign driver]
The driver keeps every worker busy with one command at a time (NOTE [worker protocol]): a shrink job
when one is queued (silent wrong results, value_mismatch, first; at most half the workers at once,
never twice in a row on one worker, and only while shrink jobs have taken less than ``shrink_share``,
default 1/4, of the worker time so far), else a slice of about ``slice_seconds`` of cases from the
worker's stream. Shrinking thus runs on the same cores as fuzzing and under the same isolation, and on
a torch with many bugs it cannot starve the search: the first minutes of a campaign on torch 2.0.1
find a new bug every few seconds, each a shrink of seconds. The queue is bounded by what can be new:
repeats are hits (NOTE [signature memo]), a family queues at most ``family_limit`` stacks (NOTE [bucket
families]); ``queue_history`` in stats.json records its length over the run. A new finding becomes a
job; its repeats meanwhile count as hits of the queued job (NOTE [signature memo]); the job's answer is
either "an existing bucket already shows this bug" or a shrunk case, which is bucketed and published
(staged, then verified in a fresh process on the verification thread). When a worker dies, the driver records a ``crash`` (or, when it went silent past
the hang limit and was killed, a ``hang``) finding with the case it was running, starts a new worker
in its slot and re-runs the lost command's positions without that case. Workers are recycled after
``recycle_cases`` cases or above ``max_rss_mb``. When the campaign ends (duration, case limit, SIGINT
or SIGTERM; a second signal cuts the grace short), queued jobs get ``shrink_grace`` seconds; the rest
are published unshrunk, still verified, with ``"skipped"`` in their ``shrink`` record.

With ``workers=0`` everything runs in this process, one case per command, each job right after the case
that found it: the cases, verdicts and buckets of a seed repeat exactly (tests rely on it).

NOTE [bucket families]
On a torch with many disagreements, one mechanism (the same verdict, oracle, error fingerprint and
essential features) shows up under hundreds of transform stacks, and shrinking rarely brings two stacks
down to the same skeleton: each would become a bucket of its own, each costing a shrink (seconds) and a
verification, so the shrink queue would grow without end and the report would bury distinct bugs under
variants of one. The driver therefore shrinks at most ``family_limit`` stacks (default 3) of a family;
later ones are counted as hits of the family's first bucket (its ``raw_signatures`` counts them).
``--family-limit 0`` shrinks and publishes every stack.

NOTE [campaign files]
Under OUT the driver writes ``findings/<bucket>/`` (and ``unverified/``), ``stats.json`` (rewritten
atomically every ``stats_interval`` seconds: the numbers the live view shows), ``events.jsonl``
(append-only, one JSON object a line: ``start``, ``stop``, ``new_bucket``, ``crash``, ``hang``,
``worker_restart``), ``state.json`` (NOTE [resume] in :mod:`fuzzer.campaign.state`), ``internal-errors.log``,
``hypothesis/`` (NOTE [hypothesis settings]) and, at the end, ``summary.json`` and ``report.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..gen.coverage import Coverage
from ..gen.streams import Decoder, database_dir, stream_buffer
from ..ir.case import TRANSFORMS, Case
from ..ir.errors import AffuzzError
from ..ir.features import ALL_FEATURES, features
from ..ir.files import atomic_write_json
from ..ir.oracles import MAIN
from ..ir.serde import case_from_json, case_to_json
from ..ir.verdicts import ALL_VERDICTS
from ..judge.compare import Limitation, load_registry
from ..judge.execute import Outcome, Side
from ..publish.findings import Finding, repro_lines, stage, verify_and_publish
from ..publish.forkserver import ForkServer
from ..triage.reduce import size
from ..triage.shrink import DEFAULT_BUDGET, Goal
from ..triage.signature import Signature, skeleton
from .protocol import BucketList, CaseReport, Fuzz, FuzzResult, Job, JobResult, RawFinding, WorkerInit
from .state import (
    STATE_SCHEMA_VERSION,
    finding_from_dir,
    finding_from_json,
    finding_to_json,
    goal_from_json,
    goal_to_json,
    outcome_from_json,
    outcome_to_json,
    signature_from_json,
    signature_to_json,
)
from .transport import Handle, InProcess, LocalProcess, RayActor, wait
from .worker import rss_mb

#: Stream positions one command to a worker without beats (a Ray actor) may look at.
RAY_SPAN = 64


class CampaignBusy(AffuzzError, RuntimeError):
    """Another driver holds OUT's lock."""


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
    announced: bool = False  # its new_bucket event is written

    @property
    def published(self) -> Finding:
        return self.finding or self.first


@dataclass
class ShrinkJob:
    """A new finding waiting for (or in) a shrink job; ``hits`` counts its occurrences so far."""

    raw: Signature
    goal: Goal
    case: Case
    outcome: Outcome
    buffer: bytes | None
    seconds_to_find: float
    cases_to_find: int
    hits: int = 1
    position: int = 0  # the case's stream position (NOTE [worker streams])


@dataclass
class CampaignConfig:
    out: Path
    seed: int
    duration: float | None = 60.0  # total seconds (a resumed campaign counts the time before, too)
    max_cases: int | None = None
    verify_python: str = sys.executable
    case_timeout: float | None = 60.0  # seconds per case and oracle; over it the case is a hang finding
    shrink_budget: int = DEFAULT_BUDGET  # case runs one shrink may spend (NOTE [shrinking]); 0: no shrinking
    shrink_grace: float | None = None  # seconds to wait for queued shrinks at the end (None: all of them)
    strategy_kwargs: dict[str, Any] = field(default_factory=dict)  # strategies.cases(**strategy_kwargs)
    workers: int = 0  # 0: everything in this process; N: N worker processes (or Ray actors)
    ray: str | None = None  # a Ray cluster address ("auto", "HOST:PORT"): workers are Ray actors
    steer: bool = True  # NOTE [steering]
    recycle_cases: int | None = 20_000  # a worker is replaced after this many cases ...
    max_rss_mb: float | None = 4096.0  # ... or once it is larger than this
    slice_seconds: float = 1.0  # the length of one fuzz command (NOTE [campaign driver])
    stats_interval: float = 5.0  # seconds between stats.json rewrites (and plain status lines)
    rss_interval: float = 60.0  # seconds between samples of the memory history (stats.json, summary)
    command: str = "affuzz run"

    hang_limit: float | None = None  # silence before a worker is killed as hung (default 2 x timeout + 30 s)
    family_limit: int = 3  # NOTE [bucket families]: stacks shrunk per family; 0: every one
    shrink_share: float = 0.25  # NOTE [campaign driver]: most of the worker time shrink jobs may take

    @property
    def silence_limit(self) -> float:
        """Seconds a worker may stay silent before it is killed and its case recorded as a hang."""
        if self.hang_limit is not None:
            return self.hang_limit
        return 2 * (self.case_timeout or 60.0) + 30.0

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "duration": self.duration,
            "max_cases": self.max_cases,
            "case_timeout": self.case_timeout,
            "shrink_budget": self.shrink_budget,
            "shrink_grace": self.shrink_grace,
            "strategy_kwargs": self.strategy_kwargs,
            "workers": self.workers,
            "ray": self.ray,
            "steer": self.steer,
            "recycle_cases": self.recycle_cases,
            "max_rss_mb": self.max_rss_mb,
            "hang_limit": self.hang_limit,
            "family_limit": self.family_limit,
            "shrink_share": self.shrink_share,
            "command": self.command,
        }

    @classmethod
    def from_json(cls, out: Path, d: dict[str, Any]) -> CampaignConfig:
        return cls(out=out, **{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "out"})


@dataclass
class Stats:
    cases: int = 0
    invalid: int = 0
    skipped: int = 0  # draws steering did not run (NOTE [steering])
    internal_errors: int = 0
    float32_noise: int = 0  # float32 disagreements that vanished in float64 (not findings)
    worker_restarts: int = 0  # workers that died or hung and were replaced
    worker_recycles: int = 0  # workers replaced after recycle_cases or max_rss_mb
    shrink_worker_crashes: int = 0  # workers that died in a shrink job
    metamorphic: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    feature_counts: Counter[str] = field(default_factory=Counter)  # cases exercising each feature tag
    transform_counts: Counter[str] = field(default_factory=Counter)  # cases with each transform in the stack
    verdicts: Counter[str] = field(default_factory=Counter)
    limitations: Counter[str] = field(default_factory=Counter)
    not_applicable: Counter[str] = field(default_factory=Counter)  # NOTE [valid comparisons]: reason -> count
    seconds: Counter[str] = field(default_factory=Counter)  # worker time: generate, torch, case, shrink
    elapsed_before: float = 0.0  # seconds run before a resume
    last_bucket_elapsed: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    @property
    def rate(self) -> float:
        return self.cases / self.elapsed if self.elapsed > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "invalid": self.invalid,
            "skipped": self.skipped,
            "internal_errors": self.internal_errors,
            "float32_noise": self.float32_noise,
            "worker_restarts": self.worker_restarts,
            "worker_recycles": self.worker_recycles,
            "shrink_worker_crashes": self.shrink_worker_crashes,
            "metamorphic": {o: dict(c) for o, c in self.metamorphic.items()},
            "feature_counts": dict(self.feature_counts),
            "transform_counts": dict(self.transform_counts),
            "verdicts": dict(self.verdicts),
            "limitations": dict(self.limitations),
            "not_applicable": dict(self.not_applicable),
            "seconds": dict(self.seconds),
            "elapsed": self.elapsed,
            "last_bucket_elapsed": self.last_bucket_elapsed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stats:
        s = cls()
        for name in (
            "cases",
            "invalid",
            "skipped",
            "internal_errors",
            "float32_noise",
            "worker_restarts",
            "worker_recycles",
            "shrink_worker_crashes",
        ):
            setattr(s, name, int(d.get(name, 0)))
        for o, c in d.get("metamorphic", {}).items():
            s.metamorphic[o].update(c)
        for name in ("feature_counts", "transform_counts", "verdicts", "limitations", "not_applicable", "seconds"):
            getattr(s, name).update(d.get(name, {}))
        s.elapsed_before = float(d.get("elapsed", 0.0))
        s.last_bucket_elapsed = float(d.get("last_bucket_elapsed", 0.0))
        return s


@dataclass
class Slot:
    """A worker slot: its stream position and the worker serving it (NOTE [worker streams])."""

    index: int
    next: int = 0  # the first stream position with no report yet
    skip: set[int] = field(default_factory=set)  # positions that killed a worker
    careful_until: int = 0  # positions before this run one command each (NOTE [transports])
    restarts: int = 0
    recycles: int = 0
    cases: int = 0
    handle: Handle | None = None
    job: ShrinkJob | None = None
    rss_mb: float = 0.0
    just_shrunk: bool = False  # its last command was a job (NOTE [campaign driver])
    job_started: float = 0.0  # when its job was sent
    buckets_sent: int = -1  # how many buckets its worker knows of (-1: a new worker, none)
    started: float = field(default_factory=time.monotonic)
    cases_since_start: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "next": self.next,
            "skip": sorted(self.skip),
            "restarts": self.restarts,
            "recycles": self.recycles,
            "cases": self.cases,
        }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Campaign:
    def __init__(
        self,
        config: CampaignConfig,
        *,
        registry: tuple[Limitation, ...] | None = None,
        resume: dict[str, Any] | None = None,
    ) -> None:
        import torch  # the campaign is the only layer above the case IR that needs torch itself

        self.config = config
        self.registry = registry if registry is not None else load_registry()
        self.torch_version = torch.__version__
        self.stats = Stats()
        self.coverage = Coverage()
        self.buckets: dict[str, Bucket] = {}
        self._raw: dict[str, str] = {}  # pre-shrink signature id -> bucket id (each is shrunk once)
        self._quick: dict[str, str] = {}  # NOTE [signature memo]: quick key -> raw signature / bucket id
        self._jobs: dict[str, ShrinkJob] = {}  # raw signature id -> job not yet bucketed
        self._families: dict[str, list[str]] = {}  # NOTE [bucket families]: family -> its raw signature ids
        # "oracle: stack" -> hits, per raw signature or bucket id (merged on remapping): where a bucket was hit
        self._stacks: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._known_version = 0  # bumped when a bucket or a full family is added (workers are sent the list)
        self._queue: list[ShrinkJob] = []
        self._on_tick: Callable[[Campaign], None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="affuzz-verify")
        self._futures: list[tuple[Bucket, Future[None]]] = []
        self._stop = 0  # signals received
        self._server: ForkServer | None = None  # started by run(), used by the verification thread only
        self._decoder = Decoder(config.seed, config.strategy_kwargs)
        n = max(1, config.workers)
        self.slots = [Slot(i) for i in range(n)]
        self.transport = "ray" if config.ray else ("process" if config.workers else "in-process")
        self._events_fd: int | None = None
        self._lock_fd: int | None = None
        self._dirty = False
        self._resumed = resume is not None
        self.startup_seconds: float | None = None  # until the first worker answered (spawn, imports)
        self.rss_history: list[list[float]] = []  # [elapsed, driver MiB, workers MiB], every rss_interval s
        # [elapsed, jobs queued, jobs running, shrink core-seconds so far], every stats_interval s
        self.queue_history: list[list[float]] = []
        if resume is not None:
            self._restore(resume)

    def has_work_left(self) -> bool:
        c = self.config
        if c.max_cases is not None:
            return self.stats.cases < c.max_cases
        return c.duration is None or self.stats.elapsed < c.duration

    @property
    def shrinking(self) -> str | None:
        """What the shrink jobs are doing now, for the live view."""
        running = [s.job for s in self.slots if s.job is not None]
        if not running and not self._queue:
            return None
        names = ", ".join(f"{j.raw.verdict} ({j.raw.oracle})" for j in running) or "-"
        return f"shrinking {names}; {len(self._queue)} queued"

    # ------------------------------------------------------------------------------------ events

    def event(self, name: str, **fields: Any) -> None:
        """Append one line to ``events.jsonl`` (one write per line: a kill leaves no torn line)."""
        record = {"time": _now(), "elapsed": round(self.stats.elapsed, 3), "event": name, **fields}
        line = (json.dumps(record, sort_keys=False) + "\n").encode()
        if self._events_fd is None:
            path = self.config.out / "events.jsonl"
            self._events_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._events_fd, line)

    def _log_internal(self, text: str) -> None:
        with (self.config.out / "internal-errors.log").open("a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")

    # ------------------------------------------------------------------------------------ workers

    def _init(self, slot: Slot) -> WorkerInit:
        c = self.config
        return WorkerInit(
            slot=slot.index,
            seed=c.seed,
            strategy_kwargs=c.strategy_kwargs,
            case_timeout=c.case_timeout,
            coverage=self.coverage.to_json() if c.steer else None,
            steer=c.steer,
            recycle_cases=c.recycle_cases,
            max_rss_mb=c.max_rss_mb,
            database=None if c.ray else database_dir(c.out),
        )

    def _start(self, slot: Slot) -> None:
        init = self._init(slot)
        if self.config.ray:
            slot.handle = RayActor(init)
        elif self.config.workers:
            slot.handle = LocalProcess(init)
        else:
            slot.handle = InProcess(init)
        slot.started, slot.cases_since_start = time.monotonic(), 0

    def _restart(self, slot: Slot, reason: str, *, recycle: bool = False) -> None:
        if slot.handle is not None:
            slot.handle.close() if recycle else slot.handle.kill()
        if recycle:
            slot.recycles += 1
            self.stats.worker_recycles += 1
        else:
            slot.restarts += 1
            self.stats.worker_restarts += 1
        old = slot.handle.pid if slot.handle is not None else None
        self._start(slot)
        slot.buckets_sent = -1
        self.event(
            "worker_restart", slot=slot.index, reason=reason, old_pid=old, restarts=slot.restarts, recycled=recycle
        )
        self._dirty = True

    def _shrink_time_left(self) -> bool:
        """NOTE [campaign driver]: whether shrink jobs have used less than ``shrink_share`` of the worker
        time so far (jobs running count from their start). In-process campaigns shrink right away."""
        if not self.config.workers:
            return True
        now = time.monotonic()
        used = self.stats.seconds["shrink"] + sum(now - s.job_started for s in self.slots if s.job is not None)
        return used <= self.config.shrink_share * self.stats.elapsed * len(self.slots)

    def _dispatch(self, slot: Slot, stopping: bool, grace_over: bool) -> None:
        h = slot.handle
        if h is None or h.command is not None:
            return
        # NOTE [campaign driver]: while fuzzing, at most half the workers shrink, and a worker that just
        # finished a job fuzzes next, so a burst of new findings never stops the search; once the
        # campaign is stopping, every worker shrinks.
        shrinking = sum(1 for s in self.slots if s.job is not None)
        may_shrink = stopping or (
            shrinking < (len(self.slots) + 1) // 2 and not slot.just_shrunk and self._shrink_time_left()
        )
        if self._queue and not grace_over and may_shrink:
            slot.just_shrunk = True
            job = min(self._queue, key=lambda j: j.raw.verdict != "value_mismatch")
            self._queue.remove(job)
            slot.job, slot.job_started = job, time.monotonic()
            h.send(
                Job(
                    id=job.raw.id,
                    goal=job.goal,
                    case=job.case,
                    buffer=job.buffer,
                    position=job.position,
                    budget=self.config.shrink_budget,
                    buckets=self._bucket_list(),
                )
            )
            return
        if stopping:
            return
        c = self.config
        left = None if c.max_cases is None else c.max_cases - self.stats.cases - self._cases_in_flight()
        if left is not None and left <= 0:
            return
        slot.just_shrunk = False
        if slot.next < slot.careful_until:
            h.send(Fuzz(start=slot.next, max_cases=1, seconds=0.0, skip=frozenset(slot.skip), careful=True, span=1))
            return
        span = None
        if isinstance(h, InProcess):
            cap = 1  # NOTE [campaign driver]: one case per command, jobs right after it
        else:
            cap = 10_000 if left is None else max(1, left // max(1, len(self.slots)))
            if not h.knows_current_case:
                span = RAY_SPAN  # what a careful re-run has to cover after a death (NOTE [transports])
        buckets = None
        if slot.buckets_sent != self._known_version:
            slot.buckets_sent = self._known_version
            buckets = self._bucket_list()
        h.send(
            Fuzz(
                start=slot.next,
                max_cases=cap,
                seconds=c.slice_seconds,
                skip=frozenset(slot.skip),
                span=span,
                buckets=buckets,
            )
        )

    def _bucket_list(self) -> BucketList:
        known: list[tuple[str, Goal, tuple[str, ...] | None]] = [
            (bid, b.goal, b.signature.skeleton) for bid, b in self.buckets.items() if b.goal is not None
        ]
        limit = self.config.family_limit
        for family, members in self._families.items():
            if limit and len(members) >= limit:
                verdict, oracle, fp, tags = json.loads(family)
                goal = Goal(verdict, oracle, tuple(tags), fp)
                known.append((self._raw.get(members[0], members[0]), goal, None))
        return tuple(known)

    def _cases_in_flight(self) -> int:
        return sum(
            s.handle.command.max_cases
            for s in self.slots
            if s.handle is not None and isinstance(s.handle.command, Fuzz)
        )

    def _receive(self, slot: Slot) -> None:
        h = slot.handle
        assert h is not None
        for kind, payload in h.poll():
            if kind == "beat":
                h.last_beat, h.current = time.monotonic(), payload
            elif kind == "result":
                h.command = None
                if isinstance(payload, FuzzResult):
                    self._on_fuzz(slot, payload)
                else:
                    job, slot.job = slot.job, None
                    if job is not None:
                        self._on_job(job, payload)
            elif kind == "died":
                self._on_death(slot, payload, hang=False)
                return

    def _watchdog(self) -> None:
        limit = self.config.silence_limit
        if self.transport == "ray":
            limit = max(limit * 10, 600.0)  # no beats from Ray actors (NOTE [transports])
        now = time.monotonic()
        for slot in self.slots:
            h = slot.handle
            if h is not None and h.command is not None and now - h.last_beat > limit:
                h.kill()
                self._on_death(slot, f"no sign of life for {now - h.last_beat:.0f} s (killed)", hang=True)

    def _on_death(self, slot: Slot, why: str, *, hang: bool) -> None:
        h = slot.handle
        assert h is not None
        command, current, pid = h.command, h.current, h.pid
        reason = why
        if isinstance(command, Job) and slot.job is not None:
            job, slot.job = slot.job, None
            self.stats.shrink_worker_crashes += 1
            reason = f"{why} while shrinking {job.raw.id}"
            self._complete(job, job.case, self._unshrunk_info(job, f"the worker died while shrinking it ({why})"))
        elif isinstance(command, Fuzz):
            position = None
            if h.knows_current_case and current is not None and current[0] == "case":
                position = int(current[1])
            elif command.span == 1:
                position = command.start
            else:  # a Ray actor: re-run the lost positions one case per command to find the culprit
                slot.careful_until = max(slot.careful_until, command.start + (command.span or command.max_cases))
            if position is not None:
                slot.skip.add(position)
                self._crash(slot, position, why, pid, hang=hang)
            reason = f"{why} at position {position}" if position is not None else why
        self._restart(slot, reason)

    def _crash(self, slot: Slot, position: int, why: str, pid: int | None, *, hang: bool) -> None:
        """A worker died (or hung past the limit) on case ``position`` of ``slot``: a crash/hang finding,
        published only if its repro crashes (hangs) again in a fresh process."""
        case = self._decoder.draw(slot.index, position)
        verdict = "hang" if hang else "crash"
        self.event(verdict, slot=slot.index, pid=pid, position=position, why=why, case=case is not None)
        if case is None:
            return
        self.stats.cases += 1
        slot.cases += 1
        self.stats.verdicts[verdict] += 1
        sig = Signature(verdict, MAIN, skeleton(case), ())
        side = Side(None, "WorkerDied" if not hang else "Timeout", why)
        finding = Finding(
            case=case,
            signature=sig,
            features=features(case),
            outcome=Outcome(verdict, side, side, 0.0),
            seconds_to_find=self.stats.elapsed,
            cases_to_find=self.stats.cases,
            torch_version=self.torch_version,
            found_by=f"{self.config.command} --seed {self.config.seed}",
            shrink={"runs": 0, "seconds": 0.0, "steps": [], "skipped": f"the worker {why}"},
            extra={"worker": {"slot": slot.index, "position": position, "pid": pid, "why": why}},
        )
        bucket = self.buckets.get(sig.id)
        if bucket is not None:
            bucket.hits += 1
            return
        bucket = self.buckets[sig.id] = Bucket(sig, finding)
        self._publish(bucket, finding)

    # ------------------------------------------------------------------------------------ results

    def _on_fuzz(self, slot: Slot, result: FuzzResult) -> None:
        if self.startup_seconds is None:
            self.startup_seconds = self.stats.elapsed - self.stats.elapsed_before
        slot.next = max(slot.next, result.next)
        slot.rss_mb = result.rss_mb
        self.stats.skipped += result.skipped
        self.stats.invalid += result.invalid
        for report in result.reports:
            self._on_report(slot, report)
        self._dirty = True
        if result.recycle:
            self._restart(slot, result.recycle, recycle=True)

    def _on_report(self, slot: Slot, r: CaseReport) -> None:
        s = self.stats
        s.cases += 1
        slot.cases += 1
        slot.cases_since_start += 1
        s.feature_counts.update(r.features)
        s.transform_counts.update(set(r.transforms))
        self.coverage.add(r.features, r.transforms)
        s.seconds["generate"] += r.generate_seconds
        s.seconds["torch"] += r.torch_seconds
        s.seconds["case"] += r.seconds
        s.seconds["triage"] += r.triage_seconds
        s.float32_noise += r.float32_noise
        for oracle, verdict, limitation in r.verdicts:
            if verdict == "not_applicable":
                s.not_applicable[limitation or "-"] += 1
            if oracle == MAIN:
                s.verdicts[verdict] += 1
                if limitation and verdict == "expected":
                    s.limitations[limitation] += 1
            else:
                s.metamorphic[oracle][verdict] += 1
        if r.internal_errors:
            s.internal_errors += len(r.internal_errors)
            self._log_internal("".join(r.internal_errors))
        for finding in r.findings:
            self._on_finding(slot, r.k, finding)

    def _on_finding(self, slot: Slot, k: int, rf: RawFinding) -> None:
        # NOTE [signature memo]: a finding with the same verdict, oracle, skeleton, feature set and error
        # fingerprint as one already seen is a hit of its bucket without ablating it again (the worker
        # that saw it before sends only this key); one whose bug still shows (same goal, NOTE [shrinking])
        # once its stack is cut down to an existing bucket's skeleton, or that shows a full family's
        # essential features (NOTE [bucket families]), is a hit of that bucket, checked by the worker with
        # a run per essential feature instead of one per feature (``same_as``); one with the same
        # pre-shrink signature is a hit without shrinking it again; and a job checks the cut to every
        # bucket known by then before it shrinks. Ablation (a run per feature) and shrinking are what a
        # campaign spends its time on, so each is done once per new bug, not once per occurrence.
        known = self._quick.get(rf.quick) or (self._raw.get(rf.same_as, rf.same_as) if rf.same_as else None)
        if known is None and rf.raw is not None:
            known = self._raw.get(rf.raw.id)
        stack = f"{rf.oracle}: {'>'.join(rf.stack)}"
        self._stacks[known or (rf.raw.id if rf.raw is not None else rf.quick)][stack] += 1
        if known is not None:
            self._quick[rf.quick] = known
            job = self._jobs.get(known)
            if job is not None:
                job.hits += 1
            elif known in self.buckets:
                self.buckets[known].hits += 1
            return
        if rf.raw is None or rf.case is None or rf.outcome is None:
            self._log_internal(f"--- a repeat of {rf.quick} arrived before its first report; not counted\n")
            return
        # NOTE [bucket families]: the same verdict, oracle, error fingerprint and essential features under
        # yet another transform stack is, past ``family_limit`` stacks, a hit of the family's first one.
        family = json.dumps([rf.verdict, rf.oracle, rf.fingerprint, list(rf.raw.features)])
        members = self._families.setdefault(family, [])
        if self.config.family_limit and len(members) >= self.config.family_limit:
            target = self._raw.get(members[0], members[0])
            self._quick[rf.quick] = self._raw[rf.raw.id] = target
            self._stacks[target].update(self._stacks.pop(rf.raw.id, Counter()))
            if target in self._jobs:
                self._jobs[target].hits += 1
            elif target in self.buckets:
                self.buckets[target].hits += 1
                self.buckets[target].raw_signatures += 1
            return
        members.append(rf.raw.id)
        if len(members) == self.config.family_limit:
            self._known_version += 1  # workers learn of the full family (NOTE [signature memo])
        goal = Goal(rf.verdict, rf.oracle, rf.raw.features, rf.fingerprint)
        job = ShrinkJob(
            raw=rf.raw,
            goal=goal,
            case=rf.case,
            outcome=rf.outcome,
            buffer=stream_buffer(self.config.seed, slot.index, k),
            position=k,
            seconds_to_find=self.stats.elapsed,
            cases_to_find=self.stats.cases,
        )
        self._quick[rf.quick] = self._raw[rf.raw.id] = rf.raw.id
        self._jobs[rf.raw.id] = job
        self._queue.append(job)

    def _on_job(self, job: ShrinkJob, result: JobResult) -> None:
        self.stats.seconds["shrink"] += result.seconds
        if result.error is not None:
            self._log_internal(f"--- shrinking {job.raw.id}\n{result.error}")
            self._complete(job, job.case, self._unshrunk_info(job, "the shrink job failed"))
        elif result.same_as is not None and result.same_as in self.buckets:
            self._jobs.pop(job.raw.id, None)
            self._remap(job.raw.id, result.same_as)
            bucket = self.buckets[result.same_as]
            bucket.hits += job.hits
            bucket.raw_signatures += 1
        else:
            assert result.case is not None
            info = dict(result.info)
            info["lines_before"] = repro_lines(job.case, job.goal.oracle)
            info["lines_after"] = repro_lines(result.case, job.goal.oracle)
            self._complete(job, result.case, info, outcome=result.outcome, triage=result.triage)
        self._dirty = True

    def _remap(self, raw_id: str, bucket_id: str) -> None:
        if raw_id != bucket_id and raw_id in self._stacks:
            self._stacks[bucket_id].update(self._stacks.pop(raw_id))
        for memo in (self._quick, self._raw):
            for key, value in list(memo.items()):
                if value == raw_id:
                    memo[key] = bucket_id
        self._raw[raw_id] = bucket_id

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

    def _complete(
        self,
        job: ShrinkJob,
        shrunk: Case,
        shrink_info: dict[str, Any],
        *,
        outcome: Outcome | None = None,
        triage: tuple[str, str] | None = None,
    ) -> None:
        """Bucket a shrunk finding (NOTE [shrinking]) and publish it (or count it as a hit)."""
        self._jobs.pop(job.raw.id, None)
        raw, goal, case = job.raw, job.goal, job.case
        shrink_info["raw_signature"] = raw.text
        sig = Signature(goal.verdict, goal.oracle, skeleton(shrunk), raw.features, raw.error)
        self._remap(raw.id, sig.id)
        finding = Finding(
            case=shrunk,
            signature=sig,
            features=features(shrunk),
            outcome=outcome if outcome is not None and shrunk != case else job.outcome,
            seconds_to_find=job.seconds_to_find,
            cases_to_find=job.cases_to_find,
            torch_version=self.torch_version,
            found_by=f"{self.config.command} --seed {self.config.seed}",
            original=case,
            shrink=shrink_info,
        )
        if triage is not None:
            finding.extra.update(triage=triage[0], triage_detail=triage[1])
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
            self._known_version += 1
        self._publish(bucket, finding)

    def _publish(self, bucket: Bucket, finding: Finding) -> None:
        """Stage ``finding`` and verify it in a fresh process on the verification thread; on success it
        becomes the bucket's published repro."""
        staged = stage(self.config.out, finding)
        sig = bucket.signature
        server = self._server

        def verify() -> None:
            try:
                ok, path = verify_and_publish(
                    self.config.out,
                    staged,
                    finding,
                    python=self.config.verify_python,
                    case_timeout=self.config.case_timeout,
                    server=server,
                )
            except Exception:  # noqa: BLE001 (a verification failure must not end the campaign)
                ok, path = False, None
                self._log_internal(f"--- verifying {sig.id}\n{traceback.format_exc()}")
            if ok:
                bucket.status, bucket.path, bucket.finding = "verified", path, finding
            elif bucket.status == "pending":
                bucket.status, bucket.path = "unverified", path

        self._futures.append((bucket, self._pool.submit(verify)))

    def _collect_verifications(self) -> None:
        done = [(b, f) for b, f in self._futures if f.done()]
        if not done:
            return
        self._futures = [(b, f) for b, f in self._futures if not f.done()]
        for bucket, fut in done:
            fut.result()
            self._dirty = True
            if bucket.status == "verified" and not bucket.announced:
                bucket.announced = True
                self.stats.last_bucket_elapsed = self.stats.elapsed
                sig = bucket.signature
                self.event(
                    "new_bucket",
                    id=sig.id,
                    signature=sig.text,
                    verdict=sig.verdict,
                    oracle=sig.oracle,
                    path=str(bucket.path.relative_to(self.config.out)) if bucket.path else None,
                    hits=bucket.hits,
                )

    # ------------------------------------------------------------------------------------ running

    def _should_stop(self) -> bool:
        c = self.config
        if self._stop:
            return True
        if c.max_cases is not None and self.stats.cases >= c.max_cases:
            return True
        return c.duration is not None and self.stats.elapsed >= c.duration

    def run(self, on_tick: Callable[[Campaign], None] | None = None, tick_seconds: float = 0.25) -> None:
        """Run until ``duration``/``max_cases`` or SIGINT/SIGTERM, then wait for pending verifications."""
        c = self.config
        c.out.mkdir(parents=True, exist_ok=True)
        self._on_tick = on_tick
        self._lock()
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def request_stop(signum: int, frame: Any) -> None:
            self._stop += 1

        for s in previous:
            signal.signal(s, request_stop)
        self.stats.started = time.monotonic()
        self._server = ForkServer(c.verify_python)
        self.event(
            "start",
            resumed=self._resumed,
            seed=c.seed,
            workers=len(self.slots),
            transport=self.transport,
            torch=self.torch_version,
            pid=os.getpid(),
            cases=self.stats.cases,
        )
        for bucket in self.buckets.values():
            if bucket.status == "pending":  # NOTE [resume]: its verification did not finish
                self._publish(bucket, bucket.published)
        try:
            for slot in self.slots:
                self._start(slot)
            self._loop(tick_seconds)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for slot in self.slots:
                if slot.handle is not None:
                    slot.handle.close()
        self.finish(on_tick)

    def _loop(self, tick_seconds: float) -> None:
        c = self.config
        last_tick = last_stats = last_state = last_rss = 0.0
        grace_deadline: float | None = None
        while True:
            stopping = self._should_stop()
            if stopping and grace_deadline is None:
                grace_deadline = time.monotonic() + (c.shrink_grace if c.shrink_grace is not None else 1e12)
            if self._stop >= 2 and grace_deadline is not None:
                grace_deadline = min(grace_deadline, time.monotonic())
            grace_over = grace_deadline is not None and time.monotonic() >= grace_deadline
            for slot in self.slots:
                self._dispatch(slot, stopping, grace_over)
            busy = [s for s in self.slots if s.handle is not None and s.handle.command is not None]
            if stopping and (not busy or grace_over) and (not self._queue or grace_over):
                if not any(isinstance(s.handle.command, Fuzz) for s in busy if s.handle is not None):
                    break
            wait([s.handle for s in busy if s.handle is not None], timeout=0.2)
            for slot in busy:
                self._receive(slot)
            self._watchdog()
            self._collect_verifications()
            now = time.monotonic()
            if self._on_tick is not None and now - last_tick >= tick_seconds:
                last_tick = now
                self._on_tick(self)
            if now - last_stats >= c.stats_interval:
                last_stats = now
                running = sum(1 for x in self.slots if x.job is not None)
                self.queue_history.append(
                    [round(self.stats.elapsed, 1), len(self._queue), running, round(self.stats.seconds["shrink"], 1)]
                )
                self.write_stats("running")
            if now - last_rss >= c.rss_interval and all(s.rss_mb for s in self.slots):
                last_rss = now
                self.rss_history.append(
                    [round(self.stats.elapsed, 1), round(rss_mb(), 1), round(sum(s.rss_mb for s in self.slots), 1)]
                )
            if self._dirty and now - last_state >= 2.0:
                last_state = now
                self.save_state()
        # the grace is over: jobs still running or queued are published unshrunk
        for slot in self.slots:
            if slot.job is not None:
                job, slot.job = slot.job, None
                self._complete(job, job.case, self._unshrunk_info(job, "the campaign ended before it was shrunk"))
                if slot.handle is not None:
                    slot.handle.kill()
        for job in self._queue:
            self._complete(job, job.case, self._unshrunk_info(job, "the campaign ended before it was shrunk"))
        self._queue.clear()

    def finish(self, on_tick: Callable[[Campaign], None] | None = None) -> None:
        self.elapsed = self.stats.elapsed
        for _, fut in self._futures:
            while not fut.done():
                if on_tick is not None:
                    on_tick(self)
                time.sleep(0.1)
        self._collect_verifications()
        self._pool.shutdown(wait=True)
        if self._server is not None:
            self._server.close()
        self.save_state()
        self.write_stats("stopped")
        self.event("stop", cases=self.stats.cases, buckets=len(self.buckets), reason=self._stop_reason())
        if self._events_fd is not None:
            os.close(self._events_fd)
            self._events_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock on OUT
            self._lock_fd = None

    def _lock(self) -> None:
        """One driver per OUT: a second one (say, ``--resume`` while the first still runs) is refused."""
        import fcntl

        path = self.config.out / ".lock"
        self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._lock_fd)
            self._lock_fd = None
            raise CampaignBusy(
                f"{self.config.out}: another affuzz driver (pid {holder}) is running this campaign; "
                "wait for it to stop or stop it (Ctrl-C, kill -TERM)"
            ) from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, str(os.getpid()).encode(), 0)

    def _stop_reason(self) -> str:
        if self._stop:
            return "signal"
        if self.config.max_cases is not None and self.stats.cases >= self.config.max_cases:
            return "max_cases"
        return "duration"

    # ------------------------------------------------------------------------------------ state

    def save_state(self) -> None:
        """NOTE [resume]: everything ``--resume`` needs, replaced atomically."""
        self._dirty = False
        state = {
            "schema_version": STATE_SCHEMA_VERSION,
            "saved": _now(),
            "torch_version": self.torch_version,
            "config": self.config.to_json(),
            "stats": self.stats.to_json(),
            "coverage": self.coverage.to_json(),
            "slots": [s.to_json() for s in self.slots],
            "rss_history": self.rss_history,
            "queue_history": self.queue_history,
            "buckets": [
                {
                    "signature": signature_to_json(b.signature),
                    "first": finding_to_json(b.first),
                    "finding": finding_to_json(b.finding) if b.finding is not None else None,
                    "hits": b.hits,
                    "status": b.status,
                    "path": str(b.path.relative_to(self.config.out)) if b.path else None,
                    "goal": goal_to_json(b.goal) if b.goal is not None else None,
                    "raw_signatures": b.raw_signatures,
                    "shrink_seconds": b.shrink_seconds,
                    "announced": b.announced,
                }
                for b in self.buckets.values()
            ],
            "raw": self._raw,
            "quick": self._quick,
            "families": self._families,
            "jobs": [
                {
                    "raw": signature_to_json(j.raw),
                    "goal": goal_to_json(j.goal),
                    "case": case_to_json(j.case),
                    "outcome": outcome_to_json(j.outcome),
                    "buffer": j.buffer.hex() if j.buffer is not None else None,
                    "seconds_to_find": j.seconds_to_find,
                    "cases_to_find": j.cases_to_find,
                    "hits": j.hits,
                    "position": j.position,
                }
                for j in [*self._queue, *(s.job for s in self.slots if s.job is not None)]
            ],
        }
        atomic_write_json(self.config.out / "state.json", state)

    def _restore(self, state: dict[str, Any]) -> None:
        out = self.config.out
        self.stats = Stats.from_json(state["stats"])
        self.coverage = Coverage.from_json(state["coverage"])
        self.rss_history = list(state.get("rss_history", []))
        self.queue_history = list(state.get("queue_history", []))
        for d in state["slots"]:
            if d["index"] < len(self.slots):
                slot = self.slots[d["index"]]
                slot.next, slot.skip = int(d["next"]), set(d.get("skip", ()))
                slot.restarts, slot.recycles, slot.cases = d["restarts"], d["recycles"], d["cases"]
        for d in state["buckets"]:
            sig = signature_from_json(d["signature"])
            bucket = Bucket(
                sig,
                finding_from_json(d["first"]),
                hits=int(d["hits"]),
                status=d["status"],
                path=out / d["path"] if d.get("path") else None,
                finding=finding_from_json(d["finding"]) if d.get("finding") else None,
                goal=goal_from_json(d["goal"]) if d.get("goal") else None,
                raw_signatures=int(d.get("raw_signatures", 1)),
                shrink_seconds=list(d.get("shrink_seconds", [])),
                announced=bool(d.get("announced")),
            )
            self.buckets[sig.id] = bucket
        self._raw = dict(state.get("raw", {}))
        self._quick = dict(state.get("quick", {}))
        self._families = {k: list(v) for k, v in state.get("families", {}).items()}
        for d in state.get("jobs", []):
            job = ShrinkJob(
                raw=signature_from_json(d["raw"]),
                goal=goal_from_json(d["goal"]),
                case=case_from_json(d["case"]),
                outcome=outcome_from_json(d["outcome"]),
                buffer=bytes.fromhex(d["buffer"]) if d.get("buffer") else None,
                seconds_to_find=float(d["seconds_to_find"]),
                cases_to_find=int(d["cases_to_find"]),
                hits=int(d["hits"]),
                position=int(d.get("position", 0)),
            )
            self._jobs[job.raw.id] = job
            self._queue.append(job)
        # findings published after the last save (NOTE [resume])
        for d in sorted((out / "findings").glob("*/finding.json")) if (out / "findings").exists() else []:
            bucket = self.buckets.get(d.parent.name)
            if bucket is not None and bucket.status == "verified":
                continue
            try:
                finding = finding_from_dir(d.parent)
            except (OSError, ValueError, KeyError) as e:
                self._log_internal(f"--- resume: {d.parent}: cannot be read back ({e}); left as it is\n")
                continue
            if bucket is None:
                goal = Goal(finding.signature.verdict, finding.signature.oracle, finding.signature.features)
                bucket = self.buckets[finding.signature.id] = Bucket(finding.signature, finding, goal=goal)
            bucket.status, bucket.path, bucket.finding = "verified", d.parent, finding
            self._remap(bucket.signature.id, bucket.signature.id)
            self._jobs.pop(bucket.signature.id, None)
        self._queue = [j for j in self._queue if j.raw.id in self._jobs]
        pending = out / ".pending"
        if pending.exists():
            shutil.rmtree(pending)  # staged but never verified: those buckets are verified again

    # ------------------------------------------------------------------------------------ results

    def live(self) -> dict[str, Any]:
        """The numbers of ``stats.json`` and the live view."""
        s = self.stats
        c = self.config
        elapsed = s.elapsed
        now = time.monotonic()
        workers = []
        for slot in self.slots:
            h = slot.handle
            up = now - slot.started
            workers.append(
                {
                    "slot": slot.index,
                    "pid": h.pid if h is not None else None,
                    "cases": slot.cases,
                    "cases_per_second": round(slot.cases_since_start / up, 2) if up > 0 else 0.0,
                    "restarts": slot.restarts,
                    "recycles": slot.recycles,
                    "rss_mb": round(slot.rss_mb, 1),
                    "doing": "shrinking" if slot.job is not None else ("fuzzing" if h and h.command else "idle"),
                    "next_position": slot.next,
                }
            )
        verified = sum(b.status == "verified" for b in self.buckets.values())
        return {
            "schema_version": 1,
            "updated": _now(),
            "seed": c.seed,
            "torch_version": self.torch_version,
            "transport": self.transport,
            "elapsed_seconds": round(elapsed, 3),
            "remaining_seconds": round(max(0.0, c.duration - elapsed), 3) if c.duration is not None else None,
            "cases": s.cases,
            "cases_per_second": round(s.cases / elapsed, 3) if elapsed > 0 else 0.0,
            "workers": len(self.slots),
            "worker_stats": workers,
            "buckets": len(self.buckets),
            "verified_buckets": verified,
            "seconds_since_new_bucket": round(elapsed - s.last_bucket_elapsed, 3),
            "shrinks_queued": len(self._queue),
            "shrinks_queued_max": max((q[1] for q in self.queue_history), default=len(self._queue)),
            "worker_restarts": s.worker_restarts,
            "worker_recycles": s.worker_recycles,
            "crashes": s.verdicts.get("crash", 0),
            "hangs": s.verdicts.get("hang", 0),
            "verdicts": {v: s.verdicts.get(v, 0) for v in ALL_VERDICTS},
            "skipped_by_steering": s.skipped,
            "invalid_inputs": s.invalid,
            "internal_errors": s.internal_errors,
            "coverage": {
                **self.coverage.saturation(ALL_FEATURES, TRANSFORMS),
                "cells": self.coverage.to_json()["cells"],
            },
            "shrinking": self.shrinking,
            "max_cases": c.max_cases,
            "recent_buckets": [
                {
                    "id": b.signature.id,
                    "transforms": list(b.signature.skeleton),
                    "signature_features": list(b.signature.features),
                    "hits": b.hits,
                    "lines_before": b.published.shrink.get("lines_before"),
                    "lines_after": b.published.shrink.get("lines_after"),
                    "status": b.status,
                }
                for b in list(self.buckets.values())[-6:]
            ],
            "rss_mb": {
                "driver": round(rss_mb(), 1),
                "workers": round(sum(w["rss_mb"] for w in workers), 1),
            },
            "worker_seconds": {k: round(v, 3) for k, v in s.seconds.items()},
            "startup_seconds": round(self.startup_seconds, 3) if self.startup_seconds is not None else None,
            "rss_history": self.rss_history,
            "queue_history": self.queue_history,
        }

    def write_stats(self, status: str) -> None:
        atomic_write_json(self.config.out / "stats.json", {"status": status, **self.live()})

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
            "skipped_by_steering": s.skipped,
            "workers": len(self.slots),
            "transport": self.transport,
            "worker_restarts": s.worker_restarts,
            "worker_recycles": s.worker_recycles,
            "worker_seconds": {k: round(v, 3) for k, v in s.seconds.items()},
            "startup_seconds": round(self.startup_seconds, 3) if self.startup_seconds is not None else None,
            "rss_history": self.rss_history,
            "queue_history": self.queue_history,
            "coverage": {
                **self.coverage.saturation(ALL_FEATURES, TRANSFORMS),
                "cells": self.coverage.to_json()["cells"],
            },
            "elapsed_seconds": round(elapsed, 3),
            "cases_per_second": round(s.cases / elapsed, 2) if elapsed else 0.0,
            "verdicts": {v: s.verdicts.get(v, 0) for v in ALL_VERDICTS},
            "expected_by_limitation": dict(s.limitations),
            "not_applicable_by_reason": dict(s.not_applicable),  # every oracle (NOTE [valid comparisons])
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
                    "stacks": dict(self._stacks.get(b.signature.id, {})),  # "oracle: stack" -> hits
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
