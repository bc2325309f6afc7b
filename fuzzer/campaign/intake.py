"""What the driver does with findings (NOTE [campaign driver] in :mod:`fuzzer.campaign.driver`): the bucket
book says new or known (NOTE [signature memo]), a new one is queued to shrink or, past the triage share,
to triage (NOTE [triage share]); a shrunk one is bucketed by its shrunk signature and verified. A part of
:class:`~fuzzer.campaign.driver.Campaign`, split out to keep each module readable."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..gen.streams import stream_buffer
from ..ir.case import Case
from ..ir.features import features
from ..ir.oracles import COMPILED
from ..judge.execute import Outcome
from ..publish.findings import Finding, expect_of, repro_lines
from ..triage.buckets import RawFinding, ShrinkJob
from ..triage.shrink import narrowed
from ..triage.signature import Signature, compile_key, skeleton
from .protocol import JobResult
from .schedule import Slot, Untriaged

if TYPE_CHECKING:
    from .driver import Campaign


class FindingIntake:
    """The driver's handling of findings and shrink results (mixed into :class:`Campaign`)."""

    def _on_triaged(self: Campaign, k: int, rf: RawFinding) -> None:
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

    def _on_finding(self: Campaign, slot: Slot, k: int, rf: RawFinding) -> None:
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

    def _on_job(self: Campaign, job: ShrinkJob, result: JobResult) -> None:
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

    def _unshrunk_info(self: Campaign, job: ShrinkJob, why: str) -> dict[str, Any]:
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
        self: Campaign,
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

    def _collect_verifications(self: Campaign) -> None:
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
