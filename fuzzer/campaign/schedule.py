"""Which command an idle worker gets next (NOTE [campaign driver]): the driver's scheduling, without I/O.

:class:`Scheduler` decides and records the decision on the :class:`Slot`; the driver sends the command
and handles the answer. Unit-tested on its own (tests/campaign/test_schedule.py).

NOTE [shrink share]
Shrink jobs may take ``shrink_share`` of the worker time, and a job runs to its end once started (seconds
to tens of seconds). Admitting a job whenever the share *so far* allows it overshoots at the start: on
torch 2.0.1 the first finding arrives within 5 s, and its 21 s shrink then held one of two workers
until 30 s, half the campaign's cores in the minutes where most bugs are found (a seed hunt's worker
seconds: shrink 130 of 170 by the end of the grace). So a job starts only where the share still holds
with it counted at its *expected* length: the mean of the jobs answered so far, or, before the first,
its budget of case runs at the mean seconds of a fuzzed case. The first job thus waits until the
campaign has run about ``expected / (shrink_share * workers)`` seconds (13 s for 6.5 s jobs, 2 workers,
1/4), and later ones keep the share on average instead of after the fact. Compiled and torch.func jobs
are expected apart (a compiled job pays a compile per run, several times a torch.func job's length):
one mean for both let a single long compiled job hold every job back while the queue grew, and a job
of the kind that does not fit now lets one of the other kind through. The grace is
unaffected: when stopping, every worker shrinks.

NOTE [triage share]
Triage of a new finding (its ablation, a run per feature, and the checks against known buckets: NOTE
[signature memo]) runs inside the fuzz loop, where it is cheap for a torch.func finding and costs a
compile per run for a compiled one; on a torch with many bugs, the first minutes find a new one every
few cases. So it gets a share of the worker time like shrinking, ``triage_share``: each fuzz command
may spend what the share leaves (``triage_share`` x the worker wall time so far, less the triage done,
split between the slots, and at most :data:`TRIAGE_BURST` seconds), and a new finding met past it is
reported *untriaged*, with its case and outcome. The scheduler keeps those (one per quick key, its
repeats counted as hits) and hands them out again, a few per command, once the share allows; when the
campaign stops they are triaged before any shrink job, in the grace. None is dropped silently: what
the grace leaves untriaged, and a finding whose triage killed a worker (handed out again, it would kill
the next), are counted (``triage.left_untriaged`` in summary.json) and logged. In-process campaigns
triage right away, so their findings repeat exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..ir.oracles import COMPILED
from ..triage.buckets import KnownBuckets, RawFinding, ShrinkJob
from .protocol import Fuzz, Job

#: Stream positions one command to a worker without beats (a Ray actor) may look at.
RAY_SPAN = 64
#: NOTE [compile share]: a compiled finding's case runs cost a compile each (50-200 times a torch.func
#: case), so its shrink gets this fraction of ``--shrink-budget`` (the walk is the same, only shorter:
#: backend, fullgraph and placement come among the first cuts).
COMPILED_SHRINK_FRACTION = 0.25


#: Seconds a compiled finding's shrink job waits behind cheaper ones at most (NOTE [campaign driver]).
COMPILED_PATIENCE = 300.0


def compiled_budget(budget: int) -> int:
    return max(1, int(budget * COMPILED_SHRINK_FRACTION)) if budget else 0


#: The most cases one fuzz command may ask for.
MAX_COMMAND_CASES = 10_000
#: NOTE [triage share]: the most seconds one fuzz command may spend triaging, and the most untriaged
#: findings it carries back to a worker.
TRIAGE_BURST = 30.0
TRIAGE_PER_COMMAND = 8


@dataclass
class Untriaged:
    """NOTE [triage share]: a new finding whose triage waits: the slot and stream position it was found
    at, its repeats so far, whether a command carries it now, and how many workers died carrying it."""

    finding: RawFinding
    slot: int
    k: int
    hits: int = 1
    sent: bool = False
    deaths: int = 0  # workers that died carrying it


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
    handle: Any = None  # its transport Handle (fuzzer.campaign.transport), None before the first start
    job: ShrinkJob | None = None
    rss_mb: float = 0.0
    just_shrunk: bool = False  # its last command was a job (NOTE [campaign driver])
    job_started: float = 0.0  # when its job was sent
    buckets_sent: int = -1  # the book version its worker knows (-1: a new worker, none)
    started: float = field(default_factory=time.monotonic)
    ready: float | None = None  # when its first worker first spoke (NOTE [worker time]); kept over restarts
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


class Scheduler:
    """NOTE [campaign driver]: a shrink job when one is queued (value_mismatch first; at most half the
    workers at once, never twice in a row on one worker, only while shrink jobs have taken at most
    ``shrink_share`` of the worker time so far; every worker once the campaign is stopping), else a
    slice of the worker's stream. In-process campaigns (``in_process``) run one case per command and
    shrink right away, so a seed's cases, verdicts and buckets repeat exactly."""

    def __init__(
        self,
        slots: list[Slot],
        *,
        shrink_share: float,
        shrink_budget: int,
        slice_seconds: float,
        max_cases: int | None,
        in_process: bool,
        triage_share: float = 1.0,
    ) -> None:
        self.slots = slots
        self.queue: list[ShrinkJob] = []
        self.shrink_share = shrink_share
        self.shrink_budget = shrink_budget
        self.slice_seconds = slice_seconds
        self.max_cases = max_cases
        self.in_process = in_process
        # jobs answered in this driver's life and their seconds, torch.func (False) and compiled (True) apart
        # (NOTE [shrink share])
        self.jobs_done = {False: 0, True: 0}
        self.jobs_seconds = {False: 0.0, True: 0.0}
        self.triage_share = triage_share
        self.untriaged: dict[str, Untriaged] = {}  # quick key -> finding waiting for triage (NOTE [triage share])

    def triage_budget(self, triage_seconds: float, wall: float) -> float:
        """NOTE [triage share]: the seconds of triage one fuzz command may spend, given the triage done so
        far and the worker wall time so far (core seconds)."""
        if self.in_process:
            return math.inf
        left = self.triage_share * wall - triage_seconds
        return min(TRIAGE_BURST, max(0.0, left) / max(1, len(self.slots)))

    def waiting_triage(self) -> list[Untriaged]:
        return [u for u in self.untriaged.values() if not u.sent]

    def _carry(self, budget: float) -> tuple[tuple[int, RawFinding], ...]:
        """Untriaged findings for one command with ``budget`` seconds of triage, marked as sent."""
        if budget <= 0.0:
            return ()
        chosen = self.waiting_triage()[:TRIAGE_PER_COMMAND]
        for u in chosen:
            u.sent = True
        return tuple((u.k, u.finding) for u in chosen)

    def job_done(self, seconds: float, *, compiled: bool = False) -> None:
        self.jobs_done[compiled] += 1
        self.jobs_seconds[compiled] += seconds

    def expected_job_seconds(self, case_seconds: float, *, compiled: bool = False) -> float:
        """NOTE [shrink share]: the mean seconds of the jobs of its kind (compiled or not) answered so far;
        before the first, a job's budget of case runs at ``case_seconds`` (the mean seconds of a fuzzed
        case) each."""
        if self.jobs_done[compiled]:
            return self.jobs_seconds[compiled] / self.jobs_done[compiled]
        return (compiled_budget(self.shrink_budget) if compiled else self.shrink_budget) * case_seconds

    @property
    def running(self) -> list[ShrinkJob]:
        return [s.job for s in self.slots if s.job is not None]

    def shrink_time_left(self, shrink_seconds: float, elapsed: float, now: float, expected: float = 0.0) -> bool:
        """Whether shrink jobs, with one more of ``expected`` seconds, take at most ``shrink_share`` of the
        worker time so far (``shrink_seconds`` of finished jobs, running ones from their start; NOTE [shrink
        share]). In-process campaigns shrink right away."""
        if self.in_process:
            return True
        used = shrink_seconds + sum(now - s.job_started for s in self.slots if s.job is not None)
        return used + expected <= self.shrink_share * elapsed * len(self.slots)

    @staticmethod
    def _order(job: ShrinkJob, *, stopping: bool, elapsed: float) -> tuple[bool, bool]:
        """NOTE [campaign driver]: silent wrong results first, then the cheapest: a compiled finding's shrink
        (tens of seconds of compiles) waits behind torch.func ones (seconds) of its kind unless it has
        waited :data:`COMPILED_PATIENCE` seconds already (always in the grace, which shrinks as many as it
        can); otherwise the oldest first."""
        compiled = job.goal.oracle == COMPILED
        defer = compiled and (stopping or elapsed - job.seconds_to_find < COMPILED_PATIENCE)
        return job.raw.verdict != "value_mismatch", defer

    def _next_job(
        self,
        slot: Slot,
        stopping: bool,
        grace_over: bool,
        shrink_seconds: float,
        elapsed: float,
        now: float,
        case_seconds: float,
    ) -> ShrinkJob | None:
        """The queued job ``slot`` shrinks next, if any: the first in order (:meth:`_order`) whose kind's
        expected length still fits the share (NOTE [shrink share]), so that a compiled job too long for it
        lets a torch.func one through."""
        if not self.queue or grace_over:
            return None
        fits: dict[bool, bool] = {}
        for job in sorted(self.queue, key=lambda j: self._order(j, stopping=stopping, elapsed=elapsed)):
            compiled = job.goal.oracle == COMPILED
            if compiled not in fits:
                expected = self.expected_job_seconds(case_seconds, compiled=compiled)
                time_left = self.shrink_time_left(shrink_seconds, elapsed, now, expected)
                fits[compiled] = self.may_shrink(slot, stopping=stopping, time_left=time_left)
            if fits[compiled]:
                return job
        return None

    def may_shrink(self, slot: Slot, *, stopping: bool, time_left: bool) -> bool:
        if stopping:
            return True
        shrinking = sum(1 for s in self.slots if s.job is not None)
        return shrinking < (len(self.slots) + 1) // 2 and not slot.just_shrunk and time_left

    def command(
        self,
        slot: Slot,
        *,
        stopping: bool,
        grace_over: bool,
        cases: int,
        in_flight: int,
        knows_current_case: bool,
        shrink_seconds: float,
        elapsed: float,
        known_version: int,
        known: Callable[[], KnownBuckets],
        now: float | None = None,
        case_seconds: float = 0.0,
        triage_budget: float = math.inf,
    ) -> Fuzz | Job | None:
        """The next command for ``slot``'s idle worker (None: nothing to do now); records it on the slot.
        ``cases``: cases reported so far; ``in_flight``: cases asked of workers and not yet reported;
        ``case_seconds``: the mean seconds of a fuzzed case so far (NOTE [shrink share]);
        ``triage_budget``: what a fuzz command may spend triaging (:meth:`triage_budget`)."""
        now = time.monotonic() if now is None else now
        if stopping and not grace_over and self.waiting_triage():  # NOTE [triage share]: before any shrink
            slot.just_shrunk = False
            carried = self._carry(math.inf)
            return Fuzz(start=slot.next, max_cases=0, seconds=0.0, triage_budget=math.inf, triage=carried)
        job = self._next_job(slot, stopping, grace_over, shrink_seconds, elapsed, now, case_seconds)
        if job is not None:
            slot.just_shrunk = True
            self.queue.remove(job)
            slot.job, slot.job_started = job, now
            return Job(
                id=job.raw.id,
                goal=job.goal,
                case=job.case,
                buffer=job.buffer,
                position=job.position,
                slot=job.slot,
                budget=compiled_budget(self.shrink_budget) if job.goal.oracle == COMPILED else self.shrink_budget,
                buckets=known(),
            )
        if stopping:
            return None
        left = None if self.max_cases is None else self.max_cases - cases - in_flight
        if left is not None and left <= 0:
            return None
        slot.just_shrunk = False
        if slot.next < slot.careful_until:
            return Fuzz(start=slot.next, max_cases=1, seconds=0.0, skip=frozenset(slot.skip), careful=True, span=1)
        span = None
        if self.in_process:
            cap = 1  # one case per command, jobs right after it
        else:
            cap = MAX_COMMAND_CASES if left is None else max(1, left // max(1, len(self.slots)))
            if not knows_current_case:
                span = RAY_SPAN  # what a careful re-run has to cover after a death (NOTE [transports])
        buckets = None
        if slot.buckets_sent != known_version:
            slot.buckets_sent = known_version
            buckets = known()
        return Fuzz(
            start=slot.next,
            max_cases=cap,
            seconds=self.slice_seconds,
            skip=frozenset(slot.skip),
            span=span,
            buckets=buckets,
            triage_budget=triage_budget,
            triage=self._carry(triage_budget),
        )
