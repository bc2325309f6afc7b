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
from dataclasses import replace
from typing import Any

from ..gen.coverage import Coverage
from ..gen.streams import Decoder, database_dir, stream_buffer
from ..ir.case import Case, Compile
from ..ir.features import features
from ..ir.files import atomic_write_json
from ..ir.oracles import COMPILED, MAIN
from ..judge.compare import Limitation, load_registry
from ..judge.execute import Outcome, Side
from ..publish.findings import Finding, expect_of, repro_lines
from ..publish.verify import Verifier
from ..triage.buckets import Bucket, BucketBook, RawFinding, ShrinkJob
from ..triage.shrink import narrowed
from ..triage.signature import Signature, compile_key, skeleton
from . import numbers, state
from .config import CampaignConfig, Stats
from .outdir import OutDir, now_iso
from .protocol import CaseReport, Fuzz, FuzzResult, Job, JobResult, WorkerInit
from .schedule import Scheduler, Slot, Untriaged
from .transport import InProcess, LocalProcess, RayActor, wait
from .worker import rss_mb


class Campaign:
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
        self.book: BucketBook[Finding] = BucketBook(config.family_limit)
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
        return c.worker_init(
            slot.index, coverage=self.coverage.to_json(), database=database, campaign_seconds=self.stats.elapsed
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
            triaging = current[1] if h.knows_current_case and current is not None and current[0] == "triage" else None
            self._untriaged_back(command, triaging, why)
            position = None
            compiled = None
            if triaging is not None:  # the command's triage comes before its cases: none was run
                reason = f"{why} while triaging a finding"
            elif h.knows_current_case and current is not None and current[0] == "case":
                position = int(current[1])
                compiled = current[2] if len(current) > 2 else None  # NOTE [compile share]
            elif command.span == 1:
                position = command.start
            else:  # a Ray actor: re-run the lost positions one case per command to find the culprit
                slot.careful_until = max(slot.careful_until, command.start + (command.span or command.max_cases))
            if position is not None:
                slot.skip.add(position)
                self._crash(slot, position, why, pid, hang=hang, compiled=compiled)
                reason = f"{why} at position {position}"
        self._restart(slot, reason)

    def _untriaged_back(self, command: Fuzz, triaging: str | None, why: str) -> None:
        """NOTE [triage share]: the untriaged findings a dead worker's command carried wait for another
        worker, but the one whose triage it died in (or that was carried by two dead workers) is not
        handed out again: the crash would repeat. It is logged and counted as left untriaged."""
        for _, rf in command.triage:
            waiting = self.scheduler.untriaged.get(rf.quick)
            if waiting is None:
                continue
            waiting.sent = False
            waiting.deaths += 1
            if rf.quick == triaging or waiting.deaths >= 2:
                del self.scheduler.untriaged[rf.quick]
                self.stats.left_untriaged += 1
                self.log_internal(f"--- the worker {why} while triaging {rf.quick}; that finding is not triaged\n")

    def _crash(
        self, slot: Slot, position: int, why: str, pid: int | None, *, hang: bool, compiled: Compile | None = None
    ) -> None:
        """A worker died (or hung past the limit) on case ``position`` of ``slot`` (run with ``compiled``, its
        beat said): a crash/hang finding, published only if its repro crashes (hangs) again in a fresh
        process."""
        case = self._decoder.draw(slot.index, position)
        if case is not None and compiled is not None:
            case = replace(case, compile=compiled)
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
        bucket = self.book.add(sig, finding)
        if bucket is not None:
            self.verifier.submit(bucket, finding)

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

    def _on_triaged(self, k: int, rf: RawFinding) -> None:
        """NOTE [triage share]: an untriaged finding a command carried, back triaged (or not: it waits on)."""
        waiting = self.scheduler.untriaged.get(rf.quick)
        if waiting is None:  # met again as a known bug meanwhile: counted then
            return
        if rf.untriaged:
            waiting.sent = False
            return
        del self.scheduler.untriaged[rf.quick]
        self._on_finding(self.slots[waiting.slot], waiting.k, rf)
        for _ in range(waiting.hits - 1):  # its repeats while it waited
            self.book.see(RawFinding(rf.oracle, rf.verdict, rf.quick, rf.fingerprint, rf.stack))

    def _on_finding(self, slot: Slot, k: int, rf: RawFinding) -> None:
        """The book says whether this is a known bug (NOTE [signature memo]); a new one is queued to shrink,
        an untriaged one to triage (NOTE [triage share])."""
        if rf.untriaged and rf.quick not in self.book.quick:
            waiting = self.scheduler.untriaged.get(rf.quick)
            if waiting is not None:
                waiting.hits += 1
            else:
                self.stats.untriaged += 1
                self.scheduler.untriaged[rf.quick] = Untriaged(rf, slot.index, k)
            return
        if rf.untriaged:  # a quick key the book knows: a hit, like any repeat
            rf = RawFinding(rf.oracle, rf.verdict, rf.quick, rf.fingerprint, rf.stack)
        seen = self.book.see(rf)
        waiting = self.scheduler.untriaged.pop(rf.quick, None) if rf.raw is not None else None
        for _ in range(waiting.hits if waiting is not None else 0):  # another worker triaged it meanwhile
            self.book.see(RawFinding(rf.oracle, rf.verdict, rf.quick, rf.fingerprint, rf.stack))
        if seen.kind == "orphan":
            self.log_internal(f"--- a repeat of {rf.quick} arrived before its first report; not counted\n")
        if seen.kind != "new":
            return
        assert rf.raw is not None and rf.case is not None and rf.outcome is not None
        job = ShrinkJob(
            raw=rf.raw,
            goal=rf.goal,
            case=rf.case,
            outcome=rf.outcome,
            buffer=stream_buffer(self.config.seed, slot.index, k),
            position=k,
            slot=slot.index,
            seconds_to_find=self.stats.elapsed,
            cases_to_find=self.stats.cases,
        )
        self.book.open(job)
        self.scheduler.queue.append(job)

    def _on_job(self, job: ShrinkJob, result: JobResult) -> None:
        self.stats.seconds["shrink"] += result.seconds
        self.scheduler.job_done(result.seconds, compiled=job.goal.oracle == COMPILED)
        if result.error is not None:
            self.log_internal(f"--- shrinking {job.raw.id}\n{result.error}")
            self._complete(job, job.case, self._unshrunk_info(job, "the shrink job failed"))
        elif result.same_as is not None and result.same_as in self.book.buckets:
            self.book.merge(job, result.same_as)
        else:
            assert result.case is not None
            info = dict(result.info)
            info["lines_before"] = repro_lines(
                job.case, job.goal.oracle, expect_of(job.goal.verdict, job.outcome, job.goal.fingerprint)
            )
            after = result.outcome if result.outcome is not None else job.outcome
            verdict = narrowed(job.goal, result.verdict)
            info["lines_after"] = repro_lines(
                result.case, job.goal.oracle, expect_of(verdict, after, job.goal.fingerprint)
            )
            self._complete(job, result.case, info, outcome=result.outcome, triage=result.triage, verdict=verdict)
        self._dirty = True

    def _unshrunk_info(self, job: ShrinkJob, why: str) -> dict[str, Any]:
        lines = repro_lines(job.case, job.goal.oracle, expect_of(job.goal.verdict, job.outcome, job.goal.fingerprint))
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
        verdict: str | None = None,
    ) -> None:
        """Bucket a shrunk finding by its shrunk signature (the book decides) and publish it if it is to be.
        ``verdict``: the shrunk case's, where shrinking narrowed the goal's (NOTE [one-sided errors])."""
        raw, goal, case = job.raw, job.goal, job.case
        shrink_info["raw_signature"] = raw.text
        sig = Signature(
            verdict or goal.verdict,
            goal.oracle,
            skeleton(shrunk),
            raw.features,
            raw.error,
            compile_key(shrunk, goal.oracle),
        )
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
        config = self._decoder.config(job.slot, job.position)
        if config is not None:  # NOTE [swarm]: the configuration the finding's case was drawn under
            finding.extra["swarm"] = config.to_json()
        bucket, publish = self.book.settle(job, sig, finding, shrink_info["seconds"])
        if publish:
            self.verifier.submit(bucket, finding)

    def _collect_verifications(self) -> None:
        for bucket in self.verifier.collect():
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
