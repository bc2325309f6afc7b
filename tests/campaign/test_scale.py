"""Campaigns with worker processes: crash and hang isolation, stats and events, kill -9 and --resume,
the lock on OUT, worker streams, coverage and steering."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given

from fuzzer.campaign.config import CampaignConfig
from fuzzer.campaign.driver import Campaign
from fuzzer.campaign.protocol import Fuzz, WorkerInit
from fuzzer.campaign.worker import Worker
from fuzzer.cli import main
from fuzzer.gen.coverage import Coverage, Steering, cells
from fuzzer.gen.profile import campaign_settings
from fuzzer.gen.streams import GROUP, Decoder, stream_buffer
from fuzzer.ir.case import TRANSFORMS
from fuzzer.ir.features import ALL_FEATURES, features

ROOT = Path(__file__).resolve().parents[2]
EVENTS = {"start", "stop", "new_bucket", "crash", "hang", "worker_restart", "untriaged"}
STATS_KEYS = {"cases", "elapsed_seconds", "cases_per_second", "workers", "buckets", "worker_restarts"}
SMALL = {"transforms": ["grad", "vmap"], "max_depth": 2, "outer_autograd": False}


def _events(out: Path) -> list[dict]:
    lines = (out / "events.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is whole JSON
    assert all(r["event"] in EVENTS for r in records), records
    return records


def _kill_when(campaign: Campaign, ready, sig: int) -> list[int]:
    """An on_tick hook that sends ``sig`` to the first worker for which ``ready(slot)`` holds, once."""
    sent: list[int] = []

    def tick(c: Campaign) -> None:
        for slot in c.slots:
            h = slot.handle
            if not sent and h is not None and h.pid and ready(slot):
                os.kill(h.pid, sig)
                sent.append(h.pid)

    campaign._test_tick = tick  # type: ignore[attr-defined]
    return sent


def _fuzzing_a_case(slot) -> bool:
    h = slot.handle
    return isinstance(h.command, Fuzz) and h.current is not None and h.current[0] == "case"


def test_a_worker_killed_mid_case_is_replaced_and_its_case_recorded(tmp_path: Path) -> None:
    config = CampaignConfig(out=tmp_path, seed=5, duration=None, max_cases=30, workers=2, strategy_kwargs=SMALL)
    campaign = Campaign(config)
    sent = _kill_when(campaign, _fuzzing_a_case, signal.SIGKILL)
    campaign.run(on_tick=campaign._test_tick, tick_seconds=0.0)  # type: ignore[attr-defined]
    summary = campaign.summary()
    assert sent and summary["worker_restarts"] == 1
    assert summary["cases"] >= 30  # the campaign went on to its limit
    events = _events(tmp_path)
    [crash] = [e for e in events if e["event"] == "crash"]
    [restart] = [e for e in events if e["event"] == "worker_restart"]
    assert crash["pid"] == sent[0] and "SIGKILL" in crash["why"] and crash["position"] >= 0
    assert restart["old_pid"] == sent[0] and f"position {crash['position']}" in restart["reason"]
    # the case did not crash by itself: its repro ran in a fresh process and did not die, so the crash
    # bucket is kept under unverified/ and not reported
    [bucket] = [b for b in summary["buckets"] if b["verdict"] == "crash"]
    assert bucket["status"] == "unverified"
    assert not (tmp_path / "findings" / bucket["id"]).exists()
    record = json.loads((tmp_path / "unverified" / bucket["id"] / "finding.json").read_text())
    assert record["verification"]["exit_code"] in (0, 1)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert STATS_KEYS <= set(stats) and stats["worker_restarts"] == 1 and stats["status"] == "stopped"
    assert [e["event"] for e in events][0] == "start" and events[-1]["event"] == "stop"


def test_a_silent_worker_is_killed_and_its_case_recorded_as_a_hang(tmp_path: Path) -> None:
    """A worker that stops answering (SIGSTOP here, as a deadlock in torch's C++ would) is killed after
    the hang limit; the campaign goes on."""
    config = CampaignConfig(
        out=tmp_path, seed=2, duration=None, max_cases=8, workers=1, strategy_kwargs=SMALL, hang_limit=3.0
    )
    campaign = Campaign(config)
    sent = _kill_when(campaign, _fuzzing_a_case, signal.SIGSTOP)
    campaign.run(on_tick=campaign._test_tick, tick_seconds=0.0)  # type: ignore[attr-defined]
    summary = campaign.summary()
    assert sent and summary["worker_restarts"] == 1 and summary["cases"] >= 8
    [hang] = [e for e in _events(tmp_path) if e["event"] == "hang"]
    assert hang["pid"] == sent[0] and "no sign of life" in hang["why"]
    assert summary["verdicts"]["hang"] == 1


def _wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise AssertionError("timed out")


def test_kill_9_of_the_driver_then_resume_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "fuzzer",
        "run",
        "--duration",
        "120",
        "--workers",
        "2",
        "--seed",
        "3",
        "--compile-share",
        "0",
    ]
    proc = subprocess.Popen([*cmd, "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        def progressed() -> bool:
            state = json.loads((out / "state.json").read_text())
            return state["stats"]["cases"] >= 20 and any((out / "findings").iterdir())

        _wait_for(progressed, 100)
    finally:
        proc.kill()  # kill -9 of the driver
        proc.wait()
    # nothing truncated: every JSON file parses, every event line is whole
    for path in [out / "state.json", out / "stats.json", *out.glob("findings/*/*.json")]:
        json.loads(path.read_text())
    before = _events(out)
    state = json.loads((out / "state.json").read_text())
    published = {p.name for p in (out / "findings").iterdir()}
    # ten more seconds, and a short end: findings still queued for shrinking are published unshrunk (verified)
    resume = ["run", "--resume", str(out), "--duration", f"{state['stats']['elapsed'] + 10:.0f}", "--shrink-grace", "5"]
    assert main(resume) == 0
    assert json.loads((out / "state.json").read_text())["config"]["shrink_grace"] == 5  # a resume may change it
    summary = json.loads((out / "summary.json").read_text())
    after = _events(out)
    assert after[: len(before)] == before  # appended to, not rewritten
    starts = [e for e in after if e["event"] == "start"]
    assert [s["resumed"] for s in starts] == [False, True]
    assert starts[1]["cases"] == state["stats"]["cases"] > 0  # counters continue from the saved state
    assert summary["cases"] > state["stats"]["cases"]
    assert summary["elapsed_seconds"] > state["stats"]["elapsed"]
    ids = {b["id"] for b in summary["buckets"]}
    assert published <= ids  # every finding reported before the kill is still a bucket
    for b in summary["buckets"]:
        if b["id"] in published:
            assert b["status"] == "verified" and (out / b["path"] / "repro.py").exists()
    assert after[-1]["event"] == "stop"


def test_resume_refuses_what_it_cannot_continue(tmp_path: Path, capsys) -> None:
    assert main(["run", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "state.json: no such file" in err
    (tmp_path / "state.json").write_text('{"schema_version": 1, "conf')
    assert main(["run", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not valid JSON" in err


def test_a_second_driver_on_the_same_out_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["run", "--max-cases", "2", "--workers", "0", "--seed", "1", "--out", str(out)]) == 0
    fd = os.open(out / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running driver holds it
    try:
        assert main(["run", "--resume", str(out), "--max-cases", "4"]) == 2
    finally:
        os.close(fd)
    err = capsys.readouterr().err.strip()
    assert "another affuzz driver" in err and len(err.splitlines()) == 1
    # once the lock is free the same command continues the campaign
    assert main(["run", "--resume", str(out), "--max-cases", "4"]) == 0
    assert json.loads((out / "summary.json").read_text())["cases"] == 4


def test_worker_streams_repeat_per_slot() -> None:
    """NOTE [worker streams]: a position names a case; slots draw different cases."""
    a, b = Decoder(7, SMALL), Decoder(7, SMALL)
    assert [a.draw(0, k) for k in range(5)] == [b.draw(0, k) for k in range(5)]
    assert [a.draw(0, k) for k in range(5)] != [a.draw(1, k) for k in range(5)]
    init = WorkerInit(slot=1, seed=7, strategy_kwargs=SMALL, steer=True)
    first = Worker(init).fuzz(Fuzz(start=0, max_cases=4, seconds=60.0))
    again = Worker(init).fuzz(Fuzz(start=0, max_cases=4, seconds=60.0))
    assert [r.k for r in first.reports] == [r.k for r in again.reports]
    assert [r.verdicts for r in first.reports] == [r.verdicts for r in again.reports]
    skipped = Worker(init).fuzz(Fuzz(start=0, max_cases=4, seconds=60.0, skip=frozenset({first.reports[0].k})))
    assert first.reports[0].k not in [r.k for r in skipped.reports]


def test_a_position_is_one_entry_of_its_group_and_the_shrinker_can_decode_it_alone() -> None:
    """NOTE [worker streams] and NOTE [case groups]: positions k - k % GROUP ... share one Function; the
    strategy the shrinker gets for position k decodes exactly case k from the group's buffer, in any
    order of access."""
    decoder = Decoder(3, {})
    ks = [*range(GROUP + 1, 2 * GROUP), GROUP]  # one group, not in order
    later = [decoder.draw(0, k) for k in ks]
    fresh = Decoder(3, {})
    assert later == [fresh.draw(0, k) for k in sorted(ks)][1:] + [fresh.draw(0, GROUP)]
    group = [c for c in later if c is not None]
    assert len(group) >= 2 and len({c.function for c in group}) == 1
    assert len({c.transforms for c in group}) >= 2
    for k in ks:
        case = decoder.draw(0, k)
        if case is None:
            continue
        seen: list = []

        @campaign_settings(database=None)
        @given(decoder.strategy(k))
        def decode(c) -> None:
            seen.append(c)  # noqa: B023 (called right below, in this iteration)

        decode.hypothesis.fuzz_one_input(stream_buffer(3, 0, k))
        assert seen == [case]


def test_coverage_counts_cells_and_round_trips() -> None:
    cov = Coverage()
    assert cov.add(["saved_input", "grad_unused"], ["grad", "vmap"]) == cells(
        ["saved_input", "grad_unused"], ["grad", "vmap"]
    )
    assert cov.add(["saved_input"], ["grad", "grad"]) == set()
    assert cov.cells[("saved_input", "grad")] == 2 and cov.skeletons["grad>grad"] == 1
    sat = cov.saturation(ALL_FEATURES, TRANSFORMS)
    assert sat["cells_covered"] == 4 and sat["cells_possible"] == len(ALL_FEATURES) * len(TRANSFORMS)
    assert sat["cases_since_new_cell"] == 1
    assert Coverage.from_json(json.loads(json.dumps(cov.to_json()))).to_json() == cov.to_json()
    cov.add(["saved_input"], ["linearize", "grad"], seconds=0.5)
    assert cov.cell_seconds[("saved_input", "linearize")] == 0.5 and cov.transform_core["grad"] == 0.25
    again = Coverage.from_json(json.loads(json.dumps(cov.to_json())))
    assert again.to_json() == cov.to_json() and again.transform_share() == {"grad": 0.5, "linearize": 0.5, "vmap": 0.0}
    old = {k: v for k, v in cov.to_json().items() if k not in ("cell_seconds", "transforms", "seconds")}
    assert Coverage.from_json(old).cells == cov.cells  # a state saved before NOTE [cost-aware steering]


def test_time_steering_skips_expensive_cases_in_proportion_to_their_cost() -> None:
    """NOTE [cost-aware steering]: 1000 cheap grad cases (1 ms) and 100 linearize cases (100 ms) of the
    same features: by counts the linearize cells are the rare ones and always run; by time they hold 10x
    the seconds and run near the floor scaled by their cost; a cell never covered always runs."""
    cov = Coverage()
    for _ in range(1000):
        cov.add(["saved_input"], ["grad"], seconds=0.001)
    for _ in range(100):
        cov.add(["saved_input"], ["linearize"], seconds=0.1)
    by_cases = Steering(cov, seed="s", by="cases", warmup=0)
    by_time = Steering(cov, seed="s", by="time", warmup=0)
    assert by_cases.probability(["saved_input"], ["linearize"]) == 1.0
    assert by_cases.probability(["saved_input"], ["grad"]) == 0.5
    # k = u / e = (11 s / 1100) / 0.1 s = 0.1; by rarity 1.01 / 10.01; the floor 0.5 * k is higher
    assert by_time.probability(["saved_input"], ["linearize"]) == pytest.approx(0.05)
    assert by_time.probability(["saved_input"], ["grad"]) == 1.0
    assert by_time.probability(["mark_dirty"], ["linearize"]) == 1.0


def test_time_steering_gives_an_expensive_transform_a_fair_share_of_core_time() -> None:
    """The same stream steered by cases and by time, each case costing 100 ms with a linearize level and
    1 ms without (about the ratio on torch 2.13): by time a linearize level is in far fewer cases and
    takes less of the core time, and it still covers the cells steering by cases does (1500 cases: 20 % of the cases and 96 %
    of the seconds by cases, 3 % and 77 % by time; the share falls further as a campaign goes on)."""
    decoder = Decoder(11, {})

    def campaign(by: str) -> Coverage:
        cov = Coverage()
        steer = Steering(cov, seed="11/0", by=by, warmup=100)
        k = 0
        while cov.cases < 1500:
            case = decoder.draw(0, k)
            k += 1
            if case is None:
                continue
            tags, names = features(case), [t.name for t in case.transforms]
            if steer.accept(tags, names):
                cov.add(tags, names, seconds=0.1 if "linearize" in names else 0.001)
        return cov

    cases, time = campaign("cases"), campaign("time")

    def linearize(cov: Coverage) -> tuple[float, float]:  # its share of the cases and of the seconds
        return cov.transform_cases["linearize"] / cov.cases, cov.transform_seconds["linearize"] / cov.seconds

    (n_cases, s_cases), (n_time, s_time) = linearize(cases), linearize(time)
    assert n_time < n_cases / 4 and s_time < s_cases - 0.1, (n_cases, s_cases, n_time, s_time)
    assert time.transform_share()["linearize"] < cases.transform_share()["linearize"]
    # the cells the grid fills either way (a rare tag's cell may come a few hundred cases sooner or later)
    assert {c for c, n in cases.cells.items() if n >= 3} <= set(time.cells)


def test_steering_runs_rare_cells_always_and_common_ones_at_the_floor() -> None:
    cov = Coverage()
    for _ in range(1000):
        cov.add(["saved_input"], ["grad"])
    cov.add(["mark_dirty"], ["vmap"])
    steer = Steering(cov, seed="s", by="cases", min_accept=0.25, warmup=0)
    assert steer.probability(["mark_dirty"], ["vmap"]) == 1.0
    assert steer.probability(["saved_input"], ["grad"]) == 0.25
    decisions = [steer.accept(["saved_input"], ["grad"]) for _ in range(2000)]
    assert 0.2 < sum(decisions) / len(decisions) < 0.3
    again = Steering(cov, seed="s", by="cases", min_accept=0.25, warmup=0)
    assert decisions == [again.accept(["saved_input"], ["grad"]) for _ in range(2000)]
    with pytest.raises(ValueError):
        Steering(cov, seed="s", min_accept=0.0)
    with pytest.raises(ValueError):
        Steering(cov, seed="s", by="wall")


def test_steering_evens_out_the_cells_a_campaign_covers() -> None:
    """Drawing the same stream with and without steering: the least-covered cells get more cases."""
    decoder = Decoder(11, {})
    plain, steered = Coverage(), Coverage()
    steer = Steering(steered, seed="11/0", by="cases", warmup=100)
    k = 0
    while steered.cases < 600:
        case = decoder.draw(0, k)
        k += 1
        if case is None:
            continue
        tags, names = features(case), [t.name for t in case.transforms]
        if plain.cases < 600:
            plain.add(tags, names)
        if steer.accept(tags, names):
            steered.add(tags, names)

    def low(cov: Coverage) -> float:
        counts = sorted(cov.cells.values())
        return sum(counts[: len(counts) // 5])  # cases in the rarest fifth of cells

    assert low(steered) > low(plain)


def test_campaigns_use_their_own_hypothesis_profile_even_on_ci() -> None:
    """NOTE [hypothesis settings]: whatever profile is loaded (Hypothesis loads ``ci`` by itself where
    CI is set, and it derandomizes), decoding and shrinking run under the campaign profile."""
    from hypothesis import settings

    from fuzzer.gen.profile import campaign_settings

    current = settings._current_profile  # restored below
    settings.load_profile("ci")
    try:
        assert settings.default.derandomize is True
        s = campaign_settings(database=None)
        assert s.derandomize is False and s.deadline is None and s.database is None
        a, b = Decoder(3, SMALL), Decoder(3, SMALL)
        assert [a.draw(2, k) for k in range(4)] == [b.draw(2, k) for k in range(4)]
    finally:
        settings.load_profile(current)
