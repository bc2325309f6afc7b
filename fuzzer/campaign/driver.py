"""A fuzzing campaign: the driver. Workers draw and run cases (:mod:`fuzzer.campaign.worker`); the driver
counts, keeps the bucket book (:mod:`fuzzer.triage.buckets`), hands out commands (:mod:`fuzzer.campaign.schedule`),
has findings verified (:mod:`fuzzer.publish.verify`), and is the only writer of OUT. Scheduling and I/O
only: what is the same bug is the book's to say, which command comes next the scheduler's.

NOTE [campaign driver]
The driver keeps every worker busy with one command at a time (NOTE [worker protocol]): a shrink job
when one is queued (silent wrong results, value_mismatch, first, then the cheapest: a compiled
finding's shrink, tens of seconds of compiles, waits behind torch.func ones of its kind, seconds each,
for up to 5 minutes; at most half the workers at once, never twice in a row on one worker, and only
while shrink jobs, the new one counted at its expected length, take at most ``shrink_share``, default
1/4, of the worker time so far: NOTE [shrink share]), else a slice of about ``slice_seconds`` of cases
from the worker's stream. Shrinking thus runs on the same cores as fuzzing and under the same isolation, and on
a torch with many bugs it cannot starve the search: the first minutes of a campaign on torch 2.0.1
find a new bug every few seconds, each a shrink of seconds. The queue is bounded by what can be new:
repeats are hits (NOTE [signature memo]), a family queues at most ``family_limit`` stacks (NOTE [bucket
families]); ``queue_history`` in stats.json records its length over the run. A new finding becomes a
job; its repeats meanwhile count as hits of the queued job (NOTE [signature memo]); the job's answer is
either "an existing bucket already shows this bug" or a shrunk case, which is bucketed and published
(staged, then verified in a fresh process on the verification thread). The choice of command is the
:class:`~fuzzer.campaign.schedule.Scheduler`'s; what is new and what is a hit, the bucket book's. When a
worker dies, the driver records a ``crash`` (or, when it went silent past the hang limit and was
killed, a ``hang``) finding with the case it was running, starts a new worker in its slot and re-runs
the lost command's positions without that case. Workers are recycled after
``recycle_cases`` cases or above ``max_rss_mb``. When the campaign ends (duration, case limit, SIGINT
or SIGTERM; a second signal cuts the grace short), queued jobs get ``shrink_grace`` seconds, in the
same order but the cheapest first whatever their wait, so that it shrinks as many as it can; the rest
are published unshrunk, still verified, with ``"skipped"`` in their ``shrink`` record, verification
then widened to a thread per core.

With ``workers=0`` everything runs in this process, one case per command, each job right after the case
that found it: the cases, verdicts and buckets of a seed repeat exactly (tests rely on it).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from ..gen.coverage import Coverage
from ..gen.streams import Decoder, database_dir
from ..ir.features import features
from ..ir.files import atomic_write_json
from ..judge.compare import Limitation, load_registry
from ..publish.findings import Finding
from ..publish.upstream import one_bucket_key
from ..publish.verify import Verifier
from ..triage.buckets import Bucket, BucketBook, RawFinding
from . import numbers, state
from .config import CampaignConfig, Stats
from .deaths import WorkerDeaths
from .intake import FindingIntake
from .outdir import OutDir, now_iso
from .protocol import CaseReport, Fuzz, FuzzResult, WorkerInit
from .schedule import Scheduler, Slot
from .transport import InProcess, LocalProcess, RayActor, wait
from .worker import rss_mb


def refusal_key(rf: RawFinding) -> str | None:
    """NOTE [known refusals]: the one bucket a new finding belongs to, where a known bug says so."""
    return one_bucket_key(
        fingerprint=rf.fingerprint,
        verdict=rf.verdict,
        oracle=rf.oracle,
        stack=rf.stack,
        case_features=features(rf.case) if rf.case is not None else (),
    )


class Campaign(WorkerDeaths, FindingIntake):
    """One campaign writing to ``config.out`` (NOTE [campaign driver]); ``resume``: a loaded ``state.json``."""

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
        self.book: BucketBook[Finding] = BucketBook(config.family_limit, one_bucket=refusal_key)
        n = max(1, config.workers)
        self.slots = [Slot(i) for i in range(n)]
        self.scheduler = Scheduler(
            self.slots,
            shrink_share=config.shrink_share,
            shrink_budget=config.shrink_budget,
            slice_seconds=config.slice_seconds,
            max_cases=config.max_cases,
            in_process=not config.workers,
            triage_share=config.triage_share,
        )
        self.verifier = Verifier(
            config.out, python=config.verify_python, case_timeout=config.case_timeout, log=self.log_internal
        )
        self._on_tick: Callable[[Campaign], None] | None = None
        self._stop = 0  # signals received
        self._decoder = Decoder(config.seed, config.strategy_kwargs, swarm=config.swarm)
        self.transport = "ray" if config.ray else ("process" if config.workers else "in-process")
        self.outdir = OutDir(config.out)
        self._dirty = False
        self._resumed = resume is not None
        self.elapsed: float | None = None  # the campaign's length, once it has stopped
        self.startup_seconds: float | None = None  # until the first worker answered (spawn, imports)
        # [elapsed, driver MiB, workers MiB (sum), [each worker's MiB, by slot]], every rss_interval s
        self.rss_history: list[list] = []
        # [elapsed, jobs queued, jobs running, shrink core-seconds so far], every stats_interval s
        self.queue_history: list[list[float]] = []
        # [elapsed, cases, buckets, verified buckets], every stats_interval s (the report's plots)
        self.progress_history: list[list[float]] = []
        if resume is not None:
            state.restore(self, resume)

    @property
    def buckets(self) -> dict[str, Bucket[Finding]]:
        return self.book.buckets

    def has_work_left(self) -> bool:
        c = self.config
        if c.max_cases is not None:
            return self.stats.cases < c.max_cases
        return c.duration is None or self.stats.elapsed < c.duration

    @property
    def shrinking(self) -> str | None:
        """What the shrink jobs are doing now, for the live view."""
        running, queue = self.scheduler.running, self.scheduler.queue
        if not running and not queue:
            return None
        names = ", ".join(f"{j.raw.verdict} ({j.raw.oracle})" for j in running) or "-"
        return f"shrinking {names}; {len(queue)} queued"

    # ------------------------------------------------------------------------------------ OUT

    def event(self, name: str, **fields: Any) -> None:
        self.outdir.event(self.stats.elapsed, name, **fields)

    def log_internal(self, text: str) -> None:
        self.outdir.log_internal(text)

    def save_state(self) -> None:
        """NOTE [resume]: everything ``--resume`` needs, replaced atomically."""
        self._dirty = False
        atomic_write_json(self.config.out / "state.json", state.campaign_state(self, now_iso()))

    def write_stats(self, status: str) -> None:
        atomic_write_json(self.config.out / "stats.json", {"status": status, **self.live()})

    def live(self) -> dict[str, Any]:
        """The numbers of ``stats.json`` and the live view."""
        return numbers.live(self, now_iso())

    def summary(self) -> dict[str, Any]:
        return numbers.summary(self)

    # ------------------------------------------------------------------------------------ workers

    def _init(self, slot: Slot) -> WorkerInit:
        c = self.config
        database = None if c.ray else database_dir(c.out)
        coverage = self.coverage.to_json() if c.steer else None
        return c.worker_init(slot.index, coverage=coverage, database=database, campaign_seconds=self.stats.elapsed)

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

    def _dispatch(self, slot: Slot, stopping: bool, grace_over: bool) -> None:
        h = slot.handle
        if h is None or h.command is not None:
            return
        command = self.scheduler.command(
            slot,
            stopping=stopping,
            grace_over=grace_over,
            cases=self.stats.cases,
            in_flight=self._cases_in_flight(),
            knows_current_case=h.knows_current_case,
            shrink_seconds=self.stats.seconds["shrink"],
            elapsed=self.stats.elapsed,
            known_version=self.book.version,
            known=self.book.known,
            case_seconds=self.stats.seconds["case"] / self.stats.cases if self.stats.cases else 0.0,
            triage_budget=self.scheduler.triage_budget(self.stats.seconds["triage"], numbers.worker_wall(self)),
        )
        if command is not None:
            if slot.ready is None and not h.knows_current_case:
                slot.ready = time.monotonic()  # NOTE [worker time]: no beats tell when it is up; from now
            h.send(command)

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
            if slot.ready is None and kind in ("beat", "result"):
                slot.ready = time.monotonic()  # NOTE [worker time]: its start-up is over
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

    # ------------------------------------------------------------------------------------ results

    def _on_fuzz(self, slot: Slot, result: FuzzResult) -> None:
        if self.startup_seconds is None:
            self.startup_seconds = self.stats.elapsed - self.stats.elapsed_before
        slot.next = max(slot.next, result.next)
        slot.rss_mb = result.rss_mb
        self.stats.skipped += result.skipped
        self.stats.invalid += result.invalid
        self.stats.seconds["triage"] += result.triage_seconds  # NOTE [triage share]
        self.stats.seconds["triage_compiled"] += result.compiled_triage_seconds
        for report in result.reports:
            self._on_report(slot, report)
        for k, rf in result.triaged:
            self._on_triaged(k, rf)
        self._dirty = True
        if result.recycle:
            self._restart(slot, result.recycle, recycle=True)

    def _on_report(self, slot: Slot, r: CaseReport) -> None:
        slot.cases += 1
        slot.cases_since_start += 1
        self.stats.count(r, slot.index)
        self.coverage.add(r.features, r.transforms, r.seconds - r.compiled_seconds)  # as the worker steers
        if r.internal_errors:
            self.log_internal("".join(r.internal_errors))
        for finding in r.findings:
            self._on_finding(slot, r.k, finding)

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
        self.outdir.lock()
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

        def request_stop(signum: int, frame: Any) -> None:
            self._stop += 1

        for s in previous:
            signal.signal(s, request_stop)
        self.stats.started = time.monotonic()
        self.verifier.start()
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
        for bucket in self.book.buckets.values():
            if bucket.status == "pending":  # NOTE [resume]: its verification did not finish
                self.verifier.submit(bucket, bucket.published)
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
        queue = self.scheduler.queue
        last_tick = last_stats = last_state = last_rss = 0.0
        grace_deadline: float | None = None
        while True:
            stopping = self._should_stop()
            if stopping and grace_deadline is None:
                grace_deadline = time.monotonic() + (c.shrink_grace if c.shrink_grace is not None else 1e12)
                # what the grace publishes unshrunk is verified all at once, on cores the fuzzing had
                self.verifier.widen(max(1, min(len(self.slots), os.cpu_count() or 1)))
            if self._stop >= 2 and grace_deadline is not None:
                grace_deadline = min(grace_deadline, time.monotonic())
            grace_over = grace_deadline is not None and time.monotonic() >= grace_deadline
            for slot in self.slots:
                self._dispatch(slot, stopping, grace_over)
            busy = [s for s in self.slots if s.handle is not None and s.handle.command is not None]
            waiting = self.scheduler.untriaged
            if stopping and (not busy or grace_over) and (not (queue or waiting) or grace_over):
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
                self._record_history()
                self.write_stats("running")
            if now - last_rss >= c.rss_interval and all(s.rss_mb for s in self.slots):
                last_rss = now
                self.rss_history.append(
                    [
                        round(self.stats.elapsed, 1),
                        round(rss_mb(), 1),
                        round(sum(s.rss_mb for s in self.slots), 1),
                        [round(s.rss_mb, 1) for s in self.slots],
                    ]
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
        for job in queue:
            self._complete(job, job.case, self._unshrunk_info(job, "the campaign ended before it was shrunk"))
        queue.clear()
        if self.scheduler.untriaged:  # NOTE [triage share]: the grace ended first; counted, never silent
            left = list(self.scheduler.untriaged.values())
            self.stats.left_untriaged += len(left)
            self.event("untriaged", findings=len(left), hits=sum(u.hits for u in left))
            self.scheduler.untriaged.clear()

    def _record_history(self) -> None:
        """A row of ``queue_history`` and ``progress_history`` (every stats interval, and at the end)."""
        elapsed = round(self.stats.elapsed, 1)
        running = len(self.scheduler.running)
        self.queue_history.append([elapsed, len(self.scheduler.queue), running, round(self.stats.seconds["shrink"], 1)])
        verified = sum(b.status == "verified" for b in self.book.buckets.values())
        self.progress_history.append([elapsed, self.stats.cases, len(self.book.buckets), verified])

    def finish(self, on_tick: Callable[[Campaign], None] | None = None) -> None:
        self.elapsed = self.stats.elapsed
        while self.verifier.pending:
            if on_tick is not None:
                on_tick(self)
            time.sleep(0.1)
        self._collect_verifications()
        self.verifier.close()
        self._record_history()
        self.save_state()
        self.write_stats("stopped")
        self.event("stop", cases=self.stats.cases, buckets=len(self.book.buckets), reason=self._stop_reason())
        self.outdir.close()  # releases the lock on OUT

    def _stop_reason(self) -> str:
        if self._stop:
            return "signal"
        if self.config.max_cases is not None and self.stats.cases >= self.config.max_cases:
            return "max_cases"
        return "duration"
