"""What the driver does when a worker dies or goes silent (NOTE [campaign driver] in
:mod:`fuzzer.campaign.driver`): the case it was running becomes a crash or hang finding, the command's
untriaged findings wait for another worker, the slot gets a new worker. A part of
:class:`~fuzzer.campaign.driver.Campaign`, split out to keep each module readable."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..ir.case import Checkpoint, Compile
from ..ir.custom_op import as_custom_op
from ..ir.features import features
from ..ir.oracles import MAIN
from ..judge.execute import Outcome, Side
from ..publish.findings import Finding
from ..triage.signature import Signature, skeleton
from .protocol import Fuzz, Job
from .schedule import Slot

if TYPE_CHECKING:
    from .driver import Campaign


class WorkerDeaths:
    """The driver's handling of dead and silent workers (mixed into :class:`Campaign`)."""

    def _watchdog(self: Campaign) -> None:
        limit = self.config.silence_limit
        if self.transport == "ray":
            limit = max(limit * 10, 600.0)  # no beats from Ray actors (NOTE [transports])
        now = time.monotonic()
        for slot in self.slots:
            h = slot.handle
            if h is not None and h.command is not None and now - h.last_beat > limit:
                h.kill()
                self._on_death(slot, f"no sign of life for {now - h.last_beat:.0f} s (killed)", hang=True)

    def _on_death(self: Campaign, slot: Slot, why: str, *, hang: bool) -> None:
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
            compiled = checkpoint = None
            custom_op = False
            if triaging is not None:  # the command's triage comes before its cases: none was run
                reason = f"{why} while triaging a finding"
            elif h.knows_current_case and current is not None and current[0] == "case":
                position = int(current[1])
                compiled = current[2] if len(current) > 2 else None  # NOTE [compile share], NOTE [modes]
                checkpoint = current[3] if len(current) > 3 else None
                custom_op = bool(current[4]) if len(current) > 4 else False
            elif command.span == 1:
                position = command.start
            else:  # a Ray actor: re-run the lost positions one case per command to find the culprit
                slot.careful_until = max(slot.careful_until, command.start + (command.span or command.max_cases))
            if position is not None:
                slot.skip.add(position)
                self._crash(
                    slot, position, why, pid, hang=hang, compiled=compiled, checkpoint=checkpoint, custom_op=custom_op
                )
                reason = f"{why} at position {position}"
        self._restart(slot, reason)

    def _untriaged_back(self: Campaign, command: Fuzz, triaging: str | None, why: str) -> None:
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
        self: Campaign,
        slot: Slot,
        position: int,
        why: str,
        pid: int | None,
        *,
        hang: bool,
        compiled: Compile | None = None,
        checkpoint: Checkpoint | None = None,
        custom_op: bool = False,
    ) -> None:
        """A worker died (or hung past the limit) on case ``position`` of ``slot`` (run with ``compiled`` and
        ``checkpoint``, its beat said): a crash/hang finding, published only if its repro crashes (hangs)
        again in a fresh process."""
        case = self._decoder.draw(slot.index, position)
        if case is not None and (compiled is not None or checkpoint is not None):
            case = replace(case, compile=compiled, checkpoint=checkpoint)
        if case is not None and custom_op:  # NOTE [custom op mode]
            case = as_custom_op(case) or case
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
