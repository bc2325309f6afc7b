"""The driver's scheduling (NOTE [campaign driver]) without workers or torch: which command an idle
worker gets."""

from __future__ import annotations

import math

from fuzzer.campaign.protocol import Fuzz, Job
from fuzzer.campaign.schedule import (
    COMPILED_PATIENCE,
    MAX_COMMAND_CASES,
    RAY_SPAN,
    TRIAGE_BURST,
    TRIAGE_PER_COMMAND,
    Scheduler,
    Slot,
    Untriaged,
    compiled_budget,
)
from fuzzer.ir.case import Case
from fuzzer.ir.oracles import COMPILED
from fuzzer.judge.execute import Outcome, Side
from fuzzer.triage.buckets import KnownBucket, KnownBuckets, RawFinding, ShrinkJob
from fuzzer.triage.shrink import Goal
from fuzzer.triage.signature import Signature

KNOWN = KnownBuckets((KnownBucket("b", Goal("value_mismatch", "o", ()), ("grad",)),))


def job(case: Case, verdict: str, name: str, oracle: str = "functorch_vs_create_graph") -> ShrinkJob:
    sig = Signature(verdict, oracle, (name,), ())
    outcome = Outcome(verdict, Side("0", None, None), Side("1", None, None), 0.0)
    return ShrinkJob(sig, Goal(verdict, sig.oracle, ()), case, outcome, b"", 1.0, 1)


def scheduler(workers: int, **kw) -> Scheduler:
    slots = [Slot(i) for i in range(workers)]
    args = dict(shrink_share=0.25, shrink_budget=50, slice_seconds=1.0, max_cases=None, in_process=workers == 0)
    args.update(kw)
    return Scheduler(slots or [Slot(0)], **args)


def ask(s: Scheduler, slot: Slot, **kw) -> Fuzz | Job | None:
    args = dict(
        stopping=False,
        grace_over=False,
        cases=0,
        in_flight=0,
        knows_current_case=True,
        shrink_seconds=0.0,
        elapsed=100.0,
        known_version=0,
        known=lambda: KNOWN,
        now=1000.0,
    )
    args.update(kw)
    return s.command(slot, **args)


def test_shrink_jobs_get_at_most_their_share_of_worker_time() -> None:
    s = scheduler(2)
    # 100 s x 2 workers: 50 core-seconds may go to shrinking
    assert s.shrink_time_left(45.0, 100.0, now=1000.0)
    assert not s.shrink_time_left(55.0, 100.0, now=1000.0)
    s.slots[0].job, s.slots[0].job_started = object(), 990.0  # type: ignore[assignment] # running: from its start
    assert not s.shrink_time_left(45.0, 100.0, now=1000.0)
    assert scheduler(0).shrink_time_left(1e9, 1.0, now=1000.0)  # in process: shrink right away


def test_a_job_starts_only_where_the_share_holds_with_it_counted_at_its_expected_length(seed_case: Case) -> None:
    """NOTE [shrink share]: before the first answer a job is expected to take its budget of case runs;
    after, the mean of the answered jobs."""
    s = scheduler(2)  # budget 50 case runs, share 1/4 of 2 workers
    assert s.expected_job_seconds(0.1) == 5.0
    s.queue.append(job(seed_case, "value_mismatch", "a"))
    # 8 s in: 4 core-seconds may shrink, a 5 s job would overshoot; 12 s in: 6 may
    assert isinstance(ask(s, s.slots[0], elapsed=8.0, case_seconds=0.1), Fuzz)
    assert isinstance(ask(s, s.slots[1], elapsed=12.0, case_seconds=0.1), Job)
    s.job_done(1.0)
    s.job_done(2.0)
    assert s.expected_job_seconds(0.1) == 1.5  # measured jobs now, not the estimate
    s.slots[1].job = None
    s.queue.append(job(seed_case, "value_mismatch", "b"))
    assert isinstance(ask(s, s.slots[0], elapsed=8.0, case_seconds=0.1, shrink_seconds=2.0), Job)
    assert not s.shrink_time_left(3.0, 8.0, now=1000.0, expected=1.5) and s.shrink_time_left(2.0, 8.0, 1000.0, 1.5)


def test_value_mismatch_jobs_go_first_to_at_most_half_the_workers(seed_case: Case) -> None:
    s = scheduler(4)
    s.queue += [job(seed_case, "torch_bug_error", "a"), job(seed_case, "value_mismatch", "b")]
    first = ask(s, s.slots[0])
    assert isinstance(first, Job) and first.id == s.slots[0].job.raw.id and "value_mismatch" in first.id
    assert first.buckets == KNOWN and first.budget == 50
    second = ask(s, s.slots[1])
    assert isinstance(second, Job) and s.queue == []
    s.queue.append(job(seed_case, "value_mismatch", "c"))
    assert isinstance(ask(s, s.slots[2]), Fuzz)  # two of four shrink already
    s.slots[0].job = None
    assert isinstance(ask(s, s.slots[0]), Fuzz)  # just shrunk: fuzzes next
    assert isinstance(ask(s, s.slots[0]), Job)


def test_no_job_past_the_share_until_stopping_then_every_worker_shrinks(seed_case: Case) -> None:
    s = scheduler(2)
    s.queue += [job(seed_case, "value_mismatch", "a"), job(seed_case, "value_mismatch", "b")]
    assert isinstance(ask(s, s.slots[0], shrink_seconds=60.0), Fuzz)
    assert isinstance(ask(s, s.slots[0], shrink_seconds=60.0, stopping=True), Job)
    assert isinstance(ask(s, s.slots[1], shrink_seconds=60.0, stopping=True), Job)
    assert ask(s, s.slots[1], stopping=True) is None  # nothing queued, no more fuzzing
    s.queue.append(job(seed_case, "value_mismatch", "c"))
    assert ask(s, s.slots[1], stopping=True, grace_over=True) is None


def test_silent_results_first_then_the_cheapest_and_a_compiled_one_waits_at_most_its_patience(
    seed_case: Case,
) -> None:
    """NOTE [campaign driver]: value_mismatch first, compiled or not; among jobs of one kind a compiled
    finding's shrink (a compile per run) waits behind torch.func ones for at most COMPILED_PATIENCE
    seconds, and always in the grace."""
    s = scheduler(4)
    s.queue += [job(seed_case, "torch_bug_error", "t"), job(seed_case, "value_mismatch", "c", COMPILED)]
    first = ask(s, s.slots[0], elapsed=100.0)  # both found at 1.0 s
    assert isinstance(first, Job) and first.goal.oracle == COMPILED and first.budget == compiled_budget(50)
    s.queue[:] = [job(seed_case, "value_mismatch", "d", COMPILED), job(seed_case, "value_mismatch", "u")]
    cheap = ask(s, s.slots[1], elapsed=100.0)
    assert isinstance(cheap, Job) and cheap.goal.oracle != COMPILED
    s.queue.append(job(seed_case, "value_mismatch", "v"))
    s.slots[0].job = s.slots[1].job = None
    s.slots[0].just_shrunk = s.slots[1].just_shrunk = False
    waited = ask(s, s.slots[0], elapsed=1.0 + COMPILED_PATIENCE)  # waited its patience: the oldest goes
    assert isinstance(waited, Job) and waited.goal.oracle == COMPILED
    s.queue[:] = [job(seed_case, "value_mismatch", "e", COMPILED), job(seed_case, "value_mismatch", "w")]
    grace = ask(s, s.slots[1], elapsed=1.0 + COMPILED_PATIENCE, stopping=True)  # in the grace: cheapest
    assert isinstance(grace, Job) and grace.goal.oracle != COMPILED


def test_fuzz_commands_split_the_cases_left_and_send_the_book_once(seed_case: Case) -> None:
    s = scheduler(2, max_cases=1000)
    slot = s.slots[0]
    slot.next, slot.skip = 40, {41}
    cmd = ask(s, slot, cases=100, in_flight=300, known_version=3)
    assert isinstance(cmd, Fuzz)
    assert (cmd.start, cmd.max_cases, cmd.skip, cmd.span, cmd.buckets) == (40, 300, frozenset({41}), None, KNOWN)
    again = ask(s, slot, cases=100, in_flight=300, known_version=3)
    assert isinstance(again, Fuzz) and again.buckets is None  # the worker knows version 3 already
    assert ask(s, slot, cases=700, in_flight=300) is None  # every case is asked for
    unlimited = scheduler(2)
    assert ask(unlimited, unlimited.slots[0]).max_cases == MAX_COMMAND_CASES


def test_careful_reruns_and_workers_without_beats(seed_case: Case) -> None:
    s = scheduler(2)
    slot = s.slots[1]
    slot.next, slot.careful_until = 10, 12
    cmd = ask(s, slot)
    assert isinstance(cmd, Fuzz) and (cmd.start, cmd.max_cases, cmd.span, cmd.careful) == (10, 1, 1, True)
    slot.next = 12
    ray = ask(s, slot, knows_current_case=False)
    assert isinstance(ray, Fuzz) and ray.span == RAY_SPAN and not ray.careful


def test_in_process_runs_one_case_per_command_and_shrinks_right_away(seed_case: Case) -> None:
    s = scheduler(0)
    cmd = ask(s, s.slots[0])
    assert isinstance(cmd, Fuzz) and cmd.max_cases == 1
    s.queue.append(job(seed_case, "torch_bug_error", "a"))
    s.slots[0].just_shrunk = False
    assert isinstance(ask(s, s.slots[0], shrink_seconds=1e9), Job)


def _untriaged(case: Case, quick: str) -> RawFinding:
    outcome = Outcome("value_mismatch", Side("0", None, None), Side("1", None, None), 0.0)
    return RawFinding("o", "value_mismatch", quick, "", ("grad",), case=case, outcome=outcome, untriaged=True)


def test_triage_gets_at_most_its_share_of_worker_time_and_waiting_findings_go_out_when_it_allows(
    seed_case: Case,
) -> None:
    """NOTE [triage share]: a command may triage what the share leaves, split between the slots (at most
    TRIAGE_BURST); the findings that waited ride on commands while it leaves something, a few at a time."""
    s = scheduler(2, triage_share=0.2)
    assert s.triage_budget(0.0, 100.0) == 10.0  # 0.2 x 100 core-seconds, two slots
    assert s.triage_budget(25.0, 100.0) == 0.0  # spent: new findings wait
    assert s.triage_budget(0.0, 10_000.0) == TRIAGE_BURST
    assert scheduler(0, triage_share=0.2).triage_budget(1e9, 1.0) == math.inf  # in process: right away
    for i in range(TRIAGE_PER_COMMAND + 2):
        s.untriaged[f"q{i}"] = Untriaged(_untriaged(seed_case, f"q{i}"), slot=1, k=i)
    none = ask(s, s.slots[0], triage_budget=0.0)
    assert isinstance(none, Fuzz) and none.triage_budget == 0.0 and none.triage == ()
    some = ask(s, s.slots[0], triage_budget=5.0)
    assert isinstance(some, Fuzz) and some.triage_budget == 5.0
    assert [k for k, _ in some.triage] == list(range(TRIAGE_PER_COMMAND))  # the oldest first
    rest = ask(s, s.slots[1], triage_budget=5.0)
    assert isinstance(rest, Fuzz) and [rf.quick for _, rf in rest.triage] == ["q8", "q9"]  # not sent twice


def test_when_stopping_waiting_findings_are_triaged_before_any_shrink_job(seed_case: Case) -> None:
    s = scheduler(2, triage_share=0.2)
    s.queue.append(job(seed_case, "value_mismatch", "a"))
    s.untriaged["q"] = Untriaged(_untriaged(seed_case, "q"), slot=0, k=7)
    first = ask(s, s.slots[0], stopping=True, triage_budget=0.0)
    assert isinstance(first, Fuzz) and first.max_cases == 0 and first.triage_budget == math.inf
    assert [rf.quick for _, rf in first.triage] == ["q"]
    assert isinstance(ask(s, s.slots[1], stopping=True), Job)  # the shrink job next
    assert ask(s, s.slots[0], stopping=True, grace_over=True) is None  # the grace is over: nothing more


def test_compiled_and_torch_func_jobs_are_expected_apart_and_one_too_long_lets_the_other_through(
    seed_case: Case,
) -> None:
    """NOTE [shrink share]: a long compiled job's mean does not hold torch.func jobs back."""
    s = scheduler(2)
    s.job_done(60.0, compiled=True)
    s.job_done(2.0)
    assert s.expected_job_seconds(0.1, compiled=True) == 60.0 and s.expected_job_seconds(0.1) == 2.0
    s.queue += [job(seed_case, "value_mismatch", "c", COMPILED), job(seed_case, "torch_bug_error", "f")]
    # past the compiled job's patience, first in order; 301 s x 2 workers: 150.5 core-seconds may shrink,
    # 100 used: the 60 s compiled job would overshoot, a 2 s torch.func one fits
    elapsed = 1.0 + COMPILED_PATIENCE
    assert s._order(s.queue[0], stopping=False, elapsed=elapsed) < s._order(s.queue[1], stopping=False, elapsed=elapsed)
    command = ask(s, s.slots[0], shrink_seconds=100.0, elapsed=elapsed)
    assert isinstance(command, Job) and command.goal.oracle != COMPILED
    assert [j.goal.oracle for j in s.queue] == [COMPILED]
