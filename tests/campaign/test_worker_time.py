"""NOTE [worker time], NOTE [compile share], NOTE [case sample], NOTE [frozen heap] and the worker's beats:
what a worker's time is spent on is counted, bounded and shown, without torch fakes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from fuzzer.campaign.config import SAMPLE_KINDS, CaseSample, Stats
from fuzzer.campaign.protocol import CaseReport
from fuzzer.campaign.transport import _Beats
from fuzzer.gen.compiled import CompileShare
from fuzzer.ir.case import Case, Compile
from fuzzer.publish.report import WORKER_TIME_PARTS, _worker_time_lines

ROOT = Path(__file__).resolve().parents[2]


def test_the_compile_share_counts_all_a_compiled_case_costs_against_the_whole_loop(seed_case: Case) -> None:
    """A case runs compiled while compiled cases took at most ``share`` of the fuzz loop's time so far,
    all of their cost counted, not only the compiled oracle's sides."""
    share = CompileShare(seed=1, slot=0, share=0.15)
    assert share.used == 0.0
    share.record(1.0, 0.0)
    share.record(0.3, 0.2)  # a compiled case of 0.3 s: 0.2 s of it its compile, Dynamo's resets and the rest
    assert share.used == pytest.approx(0.2 / 1.3) and share.compiled_cases == 1
    assert share.attach(seed_case, 5, 0.0) is seed_case  # over the share: the next case runs eagerly only
    share.record(0.1 / 0.15, 0.0)  # cheap cases ran
    assert share.used < 0.15
    attached = share.attach(seed_case, 5, 0.0)
    assert attached.compile is not None and attached.compile.backend != "inductor"  # not in the first minute


def _report(k: int, compiled: Compile | None, loop: float, compiled_seconds: float = 0.0) -> CaseReport:
    return CaseReport(
        k=k,
        features=(),
        transforms=(),
        verdicts=(),
        seconds=loop,
        loop_seconds=loop,
        compile=compiled,
        compiled_seconds=compiled_seconds,
    )


def test_stats_count_loop_time_and_the_compiled_cases_cost_apart() -> None:
    stats = Stats()
    c = Compile("eager", True, "around")
    stats.count(_report(0, None, 0.01), slot=0)
    stats.count(_report(1, c, 0.5, 0.4), slot=1)
    assert stats.seconds["loop"] == pytest.approx(0.51)
    assert stats.seconds["loop_compiled"] == pytest.approx(0.5) and stats.seconds["compiled"] == pytest.approx(0.4)
    assert stats.sample.seen == {"torch_func": 1, "compiled": 1}
    assert stats.sample.cases["compiled"] == [[1, 1, "eager", True, "around"]]
    again = Stats.from_json(json.loads(json.dumps(stats.to_json())))
    assert again.sample.to_json() == stats.sample.to_json()  # saved with the counters (NOTE [resume])


def test_the_case_sample_is_uniform_over_the_whole_run_and_bounded() -> None:
    """NOTE [case sample]: after 20,000 cases a sample of 500 still draws from every part of the run."""
    sample = CaseSample(seed=3, size=500)
    for k in range(20_000):
        sample.add(k % 2, k, None)
    chosen = sample.cases["torch_func"]
    assert len(chosen) == 500 and sample.seen["torch_func"] == 20_000 and sample.cases["compiled"] == []
    quarters = Counter(4 * entry[1] // 20_000 for entry in chosen)
    assert set(quarters) == {0, 1, 2, 3} and min(quarters.values()) > 90  # ~125 each
    assert set(SAMPLE_KINDS) == set(sample.to_json()["cases"])
    with pytest.raises(ValueError):
        CaseSample(size=0)


def test_every_part_of_the_worker_time_has_its_words_in_the_report() -> None:
    parts = {"generate", "torch_func_sides", "compiled", "loop_rest", "triage", "shrink", "other"}
    assert set(WORKER_TIME_PARTS) == parts
    wt = {
        "wall_core_seconds": 10.0,
        "core_seconds": dict.fromkeys(parts, 1.0),
        "share": dict.fromkeys(parts, 0.1),
    }
    lines = _worker_time_lines(wt)
    assert all(any(label in line for line in lines) for label in WORKER_TIME_PARTS.values())


class _Pipe:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


def test_a_worker_beats_when_what_it_does_changes_or_a_second_passed() -> None:
    pipe = _Pipe()
    beats = _Beats(pipe, every=3600.0)  # type: ignore[arg-type]
    for what in [("case", 1), ("case", 1), ("case", 1), ("case", 2), ("job", "x"), ("job", "x")]:
        beats(what)
    assert pipe.sent == [("beat", ("case", 1)), ("beat", ("case", 2)), ("beat", ("job", "x"))]
    alive = _Beats(pipe, every=0.0)  # type: ignore[arg-type]
    alive(("case", 3))
    alive(("case", 3))
    assert pipe.sent[-2:] == [("beat", ("case", 3))] * 2  # still alive: the same case beats again


def test_a_worker_process_freezes_its_heap_and_a_shared_process_never_does() -> None:
    """NOTE [frozen heap]: a worker with its own process freezes what it imported (a full collection then
    walks only what cases made); a worker sharing its process (in-process campaigns, tests) leaves it."""
    code = (
        "import gc, sys\n"
        "from fuzzer.campaign.protocol import WorkerInit\n"
        "from fuzzer.campaign.worker import Worker\n"
        "Worker(WorkerInit(slot=0, seed=1, own_process=sys.argv[1] == 'own'))\n"
        "print(gc.get_freeze_count())\n"
    )
    own = subprocess.run([sys.executable, "-c", code, "own"], capture_output=True, text=True, cwd=ROOT, check=True)
    shared = subprocess.run(
        [sys.executable, "-c", code, "shared"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert int(own.stdout) > 100_000  # torch and the fuzzer's modules
    assert int(shared.stdout) == 0


def test_a_compiled_case_counts_its_compile_in_the_share_and_not_in_steering() -> None:
    """NOTE [worker time] on a real compiled case: its loop seconds hold its whole run, its compiled
    seconds all of it but the other oracles' sides, and steering weighs it without them (NOTE [compile
    share]: the share bounds that cost already)."""
    from dataclasses import replace

    from fuzzer.campaign.protocol import Fuzz, WorkerInit
    from fuzzer.campaign.worker import Worker

    worker = Worker(WorkerInit(slot=0, seed=4, compile_share=0.5, steer=False))
    worker.compiles.attach = lambda case, k, t: replace(case, compile=Compile("eager", True, "around"))  # type: ignore[method-assign]
    [report] = worker.fuzz(Fuzz(start=0, max_cases=1, seconds=60.0)).reports
    assert report.compile == Compile("eager", True, "around")
    others = sum(s for o, s in report.oracle_seconds if o != "compiled_vs_eager")
    assert 0.0 < report.compiled_seconds == pytest.approx(report.seconds - report.triage_seconds - others)
    assert report.loop_seconds >= report.seconds - report.triage_seconds
    assert worker.coverage.seconds == pytest.approx(report.seconds - report.compiled_seconds)
    assert worker.compiles.compiled_seconds >= report.compiled_seconds


def test_a_custom_op_case_is_the_modes_and_a_torch_without_custom_ops_turns_the_mode_off(monkeypatch) -> None:
    """NOTE [modes]: a custom-op case runs instead of the drawn one, so all of it but triage is the mode's
    cost; where this torch has no torch.library.custom_op (2.0.1), the first such case says so and the
    worker writes no case as an op again."""
    from fuzzer.campaign.protocol import Fuzz, WorkerInit
    from fuzzer.campaign.worker import Worker
    from fuzzer.judge import apis as apis_module

    worker = Worker(WorkerInit(slot=0, seed=9, custom_op_share=0.9, modes=("custom_op",), steer=False))
    result = worker.fuzz(Fuzz(start=0, max_cases=60, seconds=120.0))
    ops = [r for r in result.reports if "custom_op" in r.features]
    assert ops and all(r.custom_op_seconds == pytest.approx(r.seconds - r.triage_seconds) for r in ops)
    assert all(r.custom_op_seconds == 0.0 for r in result.reports if "custom_op" not in r.features)
    assert worker.custom_ops.seconds == pytest.approx(sum(r.custom_op_seconds for r in ops))

    monkeypatch.setattr(apis_module, "api_missing", {"torch.library.custom_op": "no custom_op"}.get)
    worker = Worker(WorkerInit(slot=0, seed=9, custom_op_share=0.9, modes=("custom_op",), steer=False))
    result = worker.fuzz(Fuzz(start=0, max_cases=60, seconds=120.0))
    ops = [r for r in result.reports if "custom_op" in r.features]
    assert len(ops) == 1 and worker.custom_ops.share == 0.0
    assert {(o, v, why) for o, v, why in ops[0].verdicts} == {
        (o, "not_applicable", "custom_op_unavailable") for o, _, _ in ops[0].verdicts
    }
