"""What a fuzz worker does: draw cases from its stream, run them under every oracle, classify, ablate
new findings; and, when the driver asks, shrink a finding (a *job*).

The same :class:`Worker` runs in the driver's own process (``--workers 0``), in a local worker process
(:mod:`fuzzer.campaign.transport`) or in a Ray actor; it never writes under OUT (the driver is the only writer).

NOTE [worker protocol]
The driver sends a worker one command at a time: :class:`Fuzz` (run cases from a position for up to
some seconds or cases) or :class:`Job` (shrink one new finding). While working, the worker calls
``beat(what)`` before every case run (``("case", k)`` for a drawn case, ``("job", id)`` in a job); a
local worker process forwards each beat to the driver, which is how the driver knows which case was
running when a process died or went silent (a hang that SIGALRM could not interrupt). The answer,
:class:`FuzzResult` or :class:`JobResult`, comes when the command is done, so a worker that dies loses
the reports of the command it was running: the driver re-runs that command from its first position,
skipping the case that killed the worker.

NOTE [worker time]
Every second of a worker's fuzz loop belongs to the case it was spent on: a case's ``loop_seconds`` run
from the end of the case before to the end of its own bookkeeping, so they hold its decoding, the draws
steering skipped before it, running and judging it, and the worker's bookkeeping; the ablation of a new
finding (triage) is counted apart, like shrink jobs. Of a compiled case, ``compiled_seconds`` is all of
its run but the sides of the oracles it would have run uncompiled: the compile, Dynamo's resets, the
garbage collected after it, the script compiled whole. That is what ``--compile-share`` bounds (NOTE
[compile share]) and what the summary shows as the compiled oracle's share of the worker wall time;
``summary.json``'s ``case_sample`` names a uniform sample of the cases run, compiled and not apart,
so that ``bench/scale_bench.py --from-run`` can time their bare torch work (NOTE [case sample] in
:mod:`fuzzer.campaign.config`).
"""

from __future__ import annotations

import math
import os
import time
import traceback
from dataclasses import replace
from typing import Any

from ..codegen.render import render
from ..gen.compiled import CompileShare
from ..gen.coverage import Coverage, Steering
from ..gen.modes import CheckpointShare, CustomOpShare
from ..gen.streams import Decoder
from ..ir.case import CHECKPOINT_COMPILE, Case
from ..ir.custom_op import as_custom_op
from ..ir.features import features
from ..ir.oracles import CHECKPOINT, COMPILED, applicable, without_modes
from ..ir.verdicts import ERROR_VERDICTS, FINDING_VERDICTS
from ..judge.apis import API_REASONS
from ..judge.execute import COMPILED_TRIAGE, Outcome, triage_source
from ..judge.judge import NO_COMPILE, Judge, Judgement
from ..judge.torch_state import freeze_heap, prepare_process, torch_state_changes
from ..publish.upstream import one_bucket_key
from ..triage.buckets import KnownBuckets, RawFinding, error_bucket_id, quick_key
from ..triage.shrink import Goal, Shrinker
from ..triage.signature import signature, skeleton
from .protocol import Beat, CaseReport, Fuzz, FuzzResult, Job, JobResult, WorkerInit


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process in MiB (Linux ``/proc``; 0.0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _with_modes(drawn: Case, like: Case) -> Case:
    """NOTE [modes]: a case the strategy drew, run in the modes ``like`` runs in (its Function as a custom op
    where ``like``'s is one and the op can say it)."""
    drawn = replace(drawn, compile=like.compile, checkpoint=like.checkpoint)
    if like.function.style == "custom_op":
        return as_custom_op(drawn) or drawn
    return drawn


#: NOTE [modes]: the reason every oracle of a custom-op case gives on a torch without custom ops.
NO_CUSTOM_OP = API_REASONS["torch.library.custom_op"]


class Worker:
    def __init__(self, init: WorkerInit, beat: Beat | None = None) -> None:
        self.init = init
        self.beat: Beat = beat or (lambda what: None)
        self._judge = Judge(timeout=init.case_timeout, subject=init.subject)
        self.decoder = Decoder(init.seed, init.strategy_kwargs, init.database, swarm=init.swarm)
        self.coverage = Coverage.from_json(init.coverage) if init.coverage else Coverage()
        self.steering = (
            Steering(self.coverage, seed=f"{init.seed}/{init.slot}", by=init.steer_by) if init.steer else None
        )
        self.cases_run = 0
        self._seen: set[str] = set()  # quick keys this worker reported in full
        self._error_keys: set[str] = set()  # error bucket ids this worker reported in full
        self.buckets = KnownBuckets()
        self._current: tuple[str, Any] = ("idle", None)  # what a beat reports (NOTE [worker protocol])
        self._timed_out = False  # a case hit the per-case timer (NOTE [interrupted cases])
        self._leaked: list[str] = []  # NOTE [leaked torch state]: what the last case left changed
        prepare_process()  # NOTE [leaked torch state]
        if init.own_process:
            freeze_heap(start=True)  # NOTE [frozen heap]: never in a process it shares
        self.compiles = CompileShare(
            init.seed, init.slot, init.compile_share, by=init.steer_by, autograd="compiled_autograd" in init.modes
        )
        share = init.checkpoint_share if "checkpoint" in init.modes else 0.0
        self.checkpoints = CheckpointShare(init.seed, init.slot, share, by=init.steer_by)  # NOTE [modes]
        self.custom_ops = CustomOpShare(init.seed, init.slot, init.custom_op_share, by=init.steer_by)
        self._started = time.monotonic()
        self._triage_left = math.inf  # NOTE [triage share]: seconds of triage the current command may spend

    def draw(self, k: int) -> Case | None:
        """Case ``k`` of this worker's stream (None when its bytes decode to no case)."""
        return self.decoder.draw(self.init.slot, k)

    def handle(self, command: Fuzz | Job) -> FuzzResult | JobResult:
        return self.fuzz(command) if isinstance(command, Fuzz) else self.job(command)

    def fuzz(self, cmd: Fuzz) -> FuzzResult:
        if cmd.buckets is not None:
            self.buckets = cmd.buckets
        self._triage_left = cmd.triage_budget  # NOTE [triage share]
        triaged, triage, compiled_triage = self._triage_carried(cmd.triage)
        deadline = time.monotonic() + cmd.seconds
        reports: list[CaseReport] = []
        k, skipped, invalid, generate = cmd.start, 0, 0, 0.0
        recycle = None
        began = time.perf_counter()  # NOTE [worker time]: when the next case's iteration began
        while len(reports) < cmd.max_cases and (not reports or time.monotonic() < deadline):
            if cmd.span is not None and k - cmd.start >= cmd.span:
                break
            pos = k
            k += 1
            if pos in cmd.skip:
                continue
            t0 = time.perf_counter()
            case = self.draw(pos)
            if case is None:
                invalid += 1
                generate += time.perf_counter() - t0
                continue
            tags, names = features(case), tuple(t.name for t in case.transforms)
            if self.steering is not None and not cmd.careful and not self.steering.accept(tags, names):
                skipped += 1
                generate += time.perf_counter() - t0
                continue
            generate += time.perf_counter() - t0
            if not cmd.careful:  # NOTE [compile share], NOTE [modes]
                case = self.custom_ops.attach(case, pos, refused=self.buckets.refused())
                case = self.compiles.attach(case, pos, self.init.campaign_seconds + time.monotonic() - self._started)
                case = self.checkpoints.attach(case, pos)
            # NOTE [worker protocol]: a mode's case names its modes' fields, which the position alone does not
            op = case.function.style == "custom_op"
            if op:  # NOTE [custom op mode]: reported with the tag of the op it ran as
                tags = features(case)
            modes = case.compile is not None or case.checkpoint is not None or op
            self._current = ("case", pos, case.compile, case.checkpoint, op) if modes else ("case", pos)
            report = self.run(case, pos, tags)
            compiled = checkpointed = 0.0
            if case.checkpoint is not None:  # NOTE [modes]: its own oracle, all of it where nothing else is a mode's
                mine = sum(s for o, s in report.oracle_seconds if o == CHECKPOINT)
                others = sum(s for o, s in report.oracle_seconds if o != CHECKPOINT)
                rest = report.seconds - report.triage_seconds - others
                checkpointed = mine if case.compile is not None else max(mine, rest)
            if case.compile is not None:  # NOTE [worker time]: all of it but the oracles it would run anyway
                others = sum(s for o, s in report.oracle_seconds if o != COMPILED)
                compiled = max(0.0, report.seconds - report.triage_seconds - others)
                if (COMPILED, "not_applicable", NO_COMPILE) in report.verdicts:
                    self.compiles.share = 0.0  # this torch has no torch.compile: no case is run compiled again
            if op and any(reason == NO_CUSTOM_OP for _, _, reason in report.verdicts):
                self.custom_ops.share = 0.0  # this torch has no torch.library.custom_op: no case is one again
            # NOTE [modes]: a custom-op case runs instead of the drawn one: all of it is the mode's
            custom_op = max(0.0, report.seconds - report.triage_seconds - compiled - checkpointed) if op else 0.0
            self.coverage.add(tags, names, report.seconds - compiled - checkpointed)  # NOTE [compile share]
            self.cases_run += 1
            now = time.perf_counter()
            loop = now - began - report.triage_seconds
            began = now
            self.compiles.record(loop, compiled + report.compiled_triage_seconds)
            self.checkpoints.record(loop, checkpointed)
            self.custom_ops.record(loop, custom_op)
            reports.append(
                replace(
                    report,
                    generate_seconds=generate,
                    loop_seconds=loop,
                    compile=case.compile,
                    checkpoint=case.checkpoint,
                    compiled_seconds=compiled,
                    custom_op_seconds=custom_op,
                )
            )
            generate = 0.0
            recycle = self._recycle()
            if recycle:
                break
        return FuzzResult(
            tuple(reports), k, skipped, invalid, recycle, rss_mb(), tuple(triaged), triage, compiled_triage
        )

    def _triage_carried(self, carried: tuple[tuple[int, RawFinding], ...]) -> tuple[list, float, float]:
        """NOTE [triage share]: the untriaged findings a command carries, triaged while its budget lasts
        (the rest go back untriaged), with the seconds that took (and of them, the compiled oracle's)."""
        out: list[tuple[int, RawFinding]] = []
        seconds = compiled = 0.0
        for k, rf in carried:
            if self._triage_left <= 0.0:
                out.append((k, rf))
                continue
            assert rf.case is not None and rf.outcome is not None
            self._current = ("triage", rf.quick)  # NOTE [worker protocol]
            start = time.perf_counter()
            out.append((k, self._triage(rf.case, rf.verdict, rf.outcome, rf.oracle, rf.fingerprint, rf.quick)))
            spent = time.perf_counter() - start
            seconds += spent
            self._triage_left -= spent
            if rf.oracle == COMPILED:
                compiled += spent
                self.compiles.record(0.0, spent)
        return out, seconds, compiled

    def _recycle(self) -> str | None:
        i = self.init
        if self._timed_out:
            return "recycled after a case timeout (NOTE [interrupted cases] in fuzzer.judge.torch_state)"
        if self._leaked:
            return f"recycled: a case left torch's state changed ({'; '.join(self._leaked)}; NOTE [leaked torch state])"
        if i.recycle_cases is not None and self.cases_run >= i.recycle_cases:
            return f"recycled after {self.cases_run} cases"
        if i.max_rss_mb is not None:
            rss = rss_mb()
            if rss > i.max_rss_mb:
                return f"recycled at {rss:.0f} MiB (over {i.max_rss_mb:.0f} MiB)"
        return None

    # ---------------------------------------------------------------------------------- running

    def judge(self, case: Case, oracle: str) -> str:
        return self.evaluate(case, oracle)[0]

    def evaluate(self, case: Case, oracle: str) -> tuple[str, str]:
        """(verdict, error fingerprint) of ``case`` under ``oracle``: what the shrinker keeps."""
        self.beat(self._current)
        try:
            j = self._judge(case, oracle)
        except Exception:  # noqa: BLE001
            return "internal_error", ""
        return j.verdict, j.fingerprint

    def run(self, case: Case, k: int = -1, tags: tuple[str, ...] | None = None) -> CaseReport:
        """Run ``case`` under every oracle that applies (NOTE [oracles]) through the judge. Never raises:
        an internal error is reported with its traceback. ``tags``: its features, where known already."""
        start = time.perf_counter()
        verdicts: list[tuple[str, str, str | None]] = []
        found: list[RawFinding] = []
        errors: list[str] = []
        noise = 0
        torch_seconds = triage = compiled_triage = 0.0
        oracle_seconds: list[tuple[str, float]] = []
        self.beat(self._current)
        oracles = applicable(case)
        try:  # NOTE [one exec per case]; a beat before each oracle (NOTE [worker protocol])
            judgements: list[Judgement | None] = list(
                self._judge.all(case, oracles, before=lambda o: self.beat(self._current))
            )
        except Exception:  # noqa: BLE001 (an internal error: judge the oracles one by one to see whose)
            judgements = [None] * len(oracles)
        for oracle, j in zip(oracles, judgements, strict=True):
            try:
                if j is None:
                    self.beat(self._current)
                    j = self._judge(case, oracle)
                torch_seconds += j.seconds
                oracle_seconds.append((oracle, j.seconds))
                noise += j.float32_noise
                self._timed_out |= j.verdict == "hang"
                verdicts.append((oracle, j.verdict, j.reason))
                if j.verdict in FINDING_VERDICTS:
                    assert j.outcome is not None
                    t0 = time.perf_counter()
                    # NOTE [repaired rules]: a finding of the Function's clean twin is reported as that twin;
                    # NOTE [compiled mode]: only the compiled oracle's findings keep the case's compile (a
                    # mode's field is kept by its oracle's findings only)
                    subject = without_modes(j.repaired or case, oracle)  # NOTE [oracle table]
                    j, subject = self._compiled_twin(j, subject)  # NOTE [checkpoint mode]
                    found.append(self._finding(subject, j.verdict, j.outcome, j.oracle, j.fingerprint))
                    spent = time.perf_counter() - t0
                    triage += spent
                    compiled_triage += spent if j.oracle == COMPILED else 0.0
            except Exception:  # noqa: BLE001
                errors.append(f"--- case {k} ({oracle})\n{traceback.format_exc()}")
        self._leaked = torch_state_changes()  # NOTE [leaked torch state]
        return CaseReport(
            k=k,
            features=features(case) if tags is None else tags,
            transforms=tuple(t.name for t in case.transforms),
            verdicts=tuple(verdicts),
            findings=tuple(found),
            float32_noise=noise,
            internal_errors=tuple(errors),
            seconds=time.perf_counter() - start,
            torch_seconds=torch_seconds,
            triage_seconds=triage,
            oracle_seconds=tuple(oracle_seconds),
            compiled_triage_seconds=compiled_triage,
        )

    def _compiled_twin(self, j: Judgement, case: Case) -> tuple[Judgement, Case]:
        """NOTE [checkpoint mode]: a finding of a checkpoint placed ``compiled`` that the same compile shows
        without the checkpoint is torch.compile's, not checkpointing's: it is reported as that
        ``compiled_vs_eager`` finding (so it is bucketed, shrunk and drafted with the compiled ones)."""
        if j.oracle != CHECKPOINT or case.checkpoint is None or case.checkpoint.placement != "compiled":
            return j, case
        twin = replace(case, checkpoint=None, compile=CHECKPOINT_COMPILE)
        try:
            tj = self._judge(twin, COMPILED)
        except Exception:  # noqa: BLE001 (no twin: the finding stays the checkpoint's)
            return j, case
        return (tj, twin) if tj.verdict in FINDING_VERDICTS else (j, case)

    def _finding(self, case: Case, verdict: str, outcome: Outcome, oracle: str, fp: str) -> RawFinding:
        quick = quick_key(verdict, oracle, case, fp)
        stack = skeleton(case)
        if quick in self._seen:
            return RawFinding(oracle, verdict, quick, fp, stack)
        refused = self._refusal(case, verdict, oracle, fp)  # NOTE [known refusals]
        if refused is not None:
            self._seen.add(quick)
            return RawFinding(oracle, verdict, quick, fp, stack, same_as=refused)
        if verdict in ERROR_VERDICTS:
            # NOTE [error buckets]: the bucket is the error's fingerprint; known ones need no ablation
            key = error_bucket_id(verdict, oracle, stack, fp)
            if key in self._error_keys or self.buckets.has(key):
                self._seen.add(quick)
                return RawFinding(oracle, verdict, quick, fp, stack, same_as=key)
        if self._triage_left <= 0.0:  # NOTE [triage share]: it waits; the driver hands it out again later
            return RawFinding(oracle, verdict, quick, fp, stack, case=case, outcome=outcome, untriaged=True)
        start = time.perf_counter()
        try:
            return self._triage(case, verdict, outcome, oracle, fp, quick)
        finally:
            self._triage_left -= time.perf_counter() - start

    def _refusal(self, case: Case, verdict: str, oracle: str, fp: str) -> str | None:
        """NOTE [known refusals]: the one bucket of the known bug this finding shows, once the book has it."""
        if verdict not in ERROR_VERDICTS:
            return None
        key = one_bucket_key(
            fingerprint=fp, verdict=verdict, oracle=oracle, stack=skeleton(case), case_features=features(case)
        )
        return self.buckets.refusal(key) if key is not None else None

    def _triage(self, case: Case, verdict: str, outcome: Outcome, oracle: str, fp: str, quick: str) -> RawFinding:
        """What the book needs of a new finding: a known bucket whose bug it shows (NOTE [signature memo]),
        else its signature, by ablation (NOTE [signatures])."""
        stack = skeleton(case)
        self._seen.add(quick)
        refused = self._refusal(case, verdict, oracle, fp)  # NOTE [known refusals]
        if refused is not None:
            return RawFinding(oracle, verdict, quick, fp, stack, same_as=refused)
        if verdict in ERROR_VERDICTS:
            key = error_bucket_id(verdict, oracle, stack, fp)
            if key in self._error_keys or self.buckets.has(key):
                return RawFinding(oracle, verdict, quick, fp, stack, same_as=key)
            self._error_keys.add(key)
        else:
            known = self._known_bucket(case, Goal(verdict, oracle, (), fp))
            if known is not None:
                return RawFinding(oracle, verdict, quick, fp, stack, same_as=known)
        raw = signature(
            case,
            verdict,
            lambda variant: self.judge(variant, oracle),
            oracle=oracle,
            error=fp if verdict in ERROR_VERDICTS else "",
        )
        return RawFinding(oracle, verdict, quick, fp, stack, raw, case, outcome)

    def _known_bucket(self, case: Case, seen: Goal) -> str | None:
        """NOTE [signature memo]: the first known bucket whose bug ``case`` shows once cut to the bucket's
        skeleton (the book says which cuts; a run per essential feature, plus one, checks each)."""
        for bucket_id, goal, cut in self.buckets.cuts(case, seen):
            checker = Shrinker(goal, lambda c: self.evaluate(c, seen.oracle), budget=1 + len(goal.features))
            if checker.same_bug(cut, full=False):
                return bucket_id
        return None

    # ------------------------------------------------------------------------------------- jobs

    def job(self, job: Job) -> JobResult:
        start = time.monotonic()
        try:
            return self._job(job, start)
        except Exception:  # noqa: BLE001 (a failed job publishes the finding unshrunk)
            return JobResult(job.id, error=traceback.format_exc(), seconds=time.monotonic() - start)

    def _job(self, job: Job, start: float) -> JobResult:
        goal, case = job.goal, job.case

        self._current = ("job", job.id)

        def run(c: Case) -> tuple[str, str]:
            result = self.evaluate(c, goal.oracle)
            self._leaked = torch_state_changes()
            if self._leaked:  # NOTE [leaked torch state]: nothing run after it means anything
                raise RuntimeError(f"a case left torch's state changed: {'; '.join(self._leaked)}")
            return result

        # NOTE [signature memo]: a finding whose bug still shows once its stack is cut to an existing
        # bucket's skeleton is a hit of that bucket, not a new one.
        for bucket_id, cut in job.buckets.job_cuts(case, goal):
            if Shrinker(goal, run, budget=2 + len(features(case))).same_bug(cut):
                return JobResult(job.id, same_as=bucket_id, seconds=time.monotonic() - start)
        shrunk, info = case, {"runs": 0, "seconds": 0.0, "steps": [], "exhausted": False}
        verdict = goal.verdict
        if job.budget > 0:
            strategy = self.decoder.strategy(job.position, job.slot)
            op = case.function.style == "custom_op"
            if case.compile is not None or case.checkpoint is not None or op:  # NOTE [modes]: apart from the bytes
                strategy = strategy.map(lambda c: _with_modes(c, case))
            result = Shrinker(goal, run, budget=job.budget).shrink(case, strategy=strategy, buffer=job.buffer)
            shrunk, verdict = result.case, result.verdict
            info = {
                "runs": result.runs,
                "seconds": round(result.seconds, 3),
                "steps": result.steps,
                "exhausted": result.exhausted,
            }
        self.beat(("job", job.id))
        outcome = self._judge(shrunk, goal.oracle).outcome
        assert outcome is not None
        triage = None
        if goal.verdict == "value_mismatch" and goal.oracle == COMPILED:
            triage = COMPILED_TRIAGE  # NOTE [compiled mode]: eager is the reference by the oracle's definition
        elif goal.verdict == "value_mismatch":
            label, detail = triage_source(render(shrunk, oracle=goal.oracle))
            triage = (label, detail[:500])
        return JobResult(
            job.id,
            case=shrunk,
            outcome=outcome,
            verdict=verdict,
            info=info,
            triage=triage,
            seconds=time.monotonic() - start,
        )
