"""Status handling of replay --update and bisect --update across releases with local version suffixes
(``2.13.0+cpu``, ``2.14.1+cu130``). No torch runs: results and bisections are made up."""

from __future__ import annotations

import json
from pathlib import Path

from fuzzer.cli import main
from fuzzer.codegen.render import render
from fuzzer.history import torch_bisect
from fuzzer.history.corpus import Entry, load_entry, write_entry
from fuzzer.history.replay import ReplayResult, change_of, update_corpus
from fuzzer.history.torch_bisect import BisectResult, bisect, bisected_status, unprobed
from fuzzer.ir.case import Case

RELEASES = ["2.0.1", "2.1.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0"]


def _entry(tmp_path: Path, case: Case, status: str, history: list[tuple[str, str]], first: str = "2.0.1+cu117"):
    meta = {
        "id": "e",
        "signature": "value_mismatch|vmap_vs_loop|vmap|generate_vmap_rule",
        "verdict": "value_mismatch",
        "oracle": "vmap_vs_loop",
        "first_seen": {"torch_version": first, "date": "2026-12-02"},
        "upstream": None,
        "status": status,
        "history": [{"torch_version": v, "verdict": verdict, "date": "2026-12-03"} for v, verdict in history],
    }
    return load_entry(write_entry(tmp_path / "corpus", "e", case, meta, render(case, oracle="vmap_vs_loop")))


def _replayed(entry: Entry, verdicts: dict[str, str]) -> list[ReplayResult]:
    results = []
    for version, verdict in verdicts.items():
        r = ReplayResult(entry, version, f"/venvs/torch-{version}/bin/python", verdict)
        r.change = change_of(entry, version, verdict)
        results.append(r)
    return results


def test_a_fix_on_a_cuda_build_becomes_fixed_in_its_release(planted_case: Case, tmp_path: Path) -> None:
    """value_mismatch-7c9142f91f on 2.0.1, 2.13.0 and 2.14.1: the +cu130 suffix is not part of the status."""
    e = _entry(tmp_path, planted_case, "open", [("2.0.1+cu117", "value_mismatch"), ("2.13.0+cpu", "value_mismatch")])
    results = _replayed(
        e, {"2.0.1+cu117": "value_mismatch", "2.13.0+cpu": "value_mismatch", "2.14.1+cu130": "consistent"}
    )
    assert [r.change for r in results] == ["", "", "fixed"]
    assert update_corpus(results) == ["e: torch 2.14.1+cu130: consistent (status: fixed-in 2.14.1)"]
    e = load_entry(e.path)
    assert e.status == "fixed-in 2.14.1"
    assert e.expected_verdict("2.13.0+cpu") == "value_mismatch" and e.expected_verdict("2.14.1") == "consistent"
    assert e.expected_verdict("2.15.0+cu130") == "consistent" and e.expected_verdict("2.14.0") == "value_mismatch"
    assert all(change_of(e, r.torch_version, r.verdict) == "" for r in results)  # the next replay: as recorded


def test_a_fix_seen_on_an_older_release_moves_fixed_in_down(planted_case: Case, tmp_path: Path) -> None:
    """fixed-in 2.14.1 from a replay that skipped 2.14.0; 2.14.0 turns out consistent: fixed-in 2.14.0 (it
    stayed fixed-in 2.14.1 before, and then its history and status disagreed)."""
    history = [("2.13.0+cpu", "value_mismatch"), ("2.14.1+cu130", "consistent")]
    e = _entry(tmp_path, planted_case, "fixed-in 2.14.1", history)
    results = _replayed(e, {"2.14.0+cu128": "consistent"})
    assert results[0].change == "fixed"
    assert update_corpus(results) == ["e: torch 2.14.0+cu128: consistent (status: fixed-in 2.14.0)"]
    assert load_entry(e.path).status == "fixed-in 2.14.0"


def test_consistent_below_a_newer_disagreement_is_no_fix(planted_case: Case, tmp_path: Path) -> None:
    """An older release that happens to be consistent while a newer one still shows the bug is recorded,
    but is no fixed-in (neither for an open entry nor below an existing fixed-in)."""
    e = _entry(tmp_path, planted_case, "open", [("2.13.0+cpu", "value_mismatch")])
    results = _replayed(e, {"2.0.1+cu117": "consistent", "2.13.0+cpu": "value_mismatch"})
    assert results[0].change == "fixed"
    assert update_corpus(results) == ["e: torch 2.0.1+cu117: consistent"]
    e = load_entry(e.path)
    assert e.status == "open" and e.meta["history"][-1]["torch_version"] == "2.0.1+cu117"
    history = [("2.13.0+cpu", "value_mismatch"), ("2.14.1+cu130", "consistent")]
    f = _entry(tmp_path, planted_case, "fixed-in 2.14.1", history)
    assert update_corpus(_replayed(f, {"2.0.1+cu117": "consistent"})) == ["e: torch 2.0.1+cu117: consistent"]
    assert load_entry(f.path).status == "fixed-in 2.14.1"


def test_a_regression_above_is_no_earlier_fix(planted_case: Case, tmp_path: Path) -> None:
    history = [("2.13.0+cpu", "value_mismatch"), ("2.14.1+cu130", "consistent")]
    e = _entry(tmp_path, planted_case, "fixed-in 2.14.1", history)
    results = _replayed(e, {"2.14.0": "consistent", "2.15.0+cu130": "value_mismatch"})
    assert [r.change for r in results] == ["fixed", "regressed"]
    update_corpus(results)
    assert load_entry(e.path).status == "open"


def _bisected(truth: dict[str, str]) -> BisectResult:
    return bisect(list(truth), lambda v: (truth[v], "functorch: tensor([[1., 1., 0.],\n        [1., 1., 0.]])"))


def test_bisect_status_keeps_a_finer_fixed_in() -> None:
    """The seed (fixed-in 2.1.0) bisected over 2.0.1, 2.13.0, 2.14.1 changes at 2.13.0: the fix is somewhere
    in 2.1.0..2.13.0, which 2.1.0 already says more precisely; --update used to record fixed-in 2.13.0."""
    seed = _bisected({"2.0.1": "value_mismatch", "2.13.0": "consistent", "2.14.1": "consistent"})
    assert seed.first_changed == "2.13.0" and seed.before == "2.0.1"
    assert bisected_status("fixed-in 2.1.0", seed) is None
    assert bisected_status("fixed-in 2.13.0", seed) is None
    assert bisected_status("fixed-in 2.14.1", seed) == "fixed-in 2.13.0"  # contradicted: 2.13.0 is consistent
    assert bisected_status("fixed-in 2.0.1", seed) == "fixed-in 2.13.0"  # contradicted: 2.0.1 shows the bug
    assert bisected_status("open", seed) == "fixed-in 2.13.0"
    g3 = _bisected({"2.0.1": "value_mismatch", "2.13.0": "value_mismatch", "2.14.1": "consistent"})
    assert bisected_status("open", g3) == "fixed-in 2.14.1"
    assert unprobed(g3, RELEASES) == ["2.14.0"] and unprobed(seed, RELEASES) == ["2.1.0", "2.12.1"]
    introduced = _bisected({"2.0.1": "consistent", "2.13.0": "value_mismatch", "2.14.1": "value_mismatch"})
    assert bisected_status("open", introduced) is None
    same = _bisected({"2.0.1": "value_mismatch", "2.14.1": "value_mismatch"})
    assert bisected_status("open", same) is None and unprobed(same, RELEASES) == []


def test_bisect_cli_update_keeps_a_finer_status_and_names_unprobed_releases(
    planted_case: Case, tmp_path: Path, capsys, monkeypatch
) -> None:
    truth = {"2.0.1": "value_mismatch", "2.13.0": "consistent", "2.14.1": "consistent"}
    monkeypatch.setattr(torch_bisect, "evaluator", lambda case, oracle, **kw: lambda v: (truth[v], ""))
    monkeypatch.setattr(torch_bisect, "released_versions", lambda low, high, **kw: RELEASES)
    e = _entry(tmp_path, planted_case, "fixed-in 2.1.0", [])
    assert main(["bisect", str(e.path), "--versions", "2.0.1,2.13.0,2.14.1", "--update"]) == 0
    out = capsys.readouterr().out
    assert "first release where the verdict changed: 2.13.0" in out
    assert "note: 2 releases (2.1.0 to 2.12.1) between 2.0.1 and 2.13.0 were not probed" in out
    assert "kept: e: status fixed-in 2.1.0" in out
    assert json.loads((e.path / "meta.json").read_text())["status"] == "fixed-in 2.1.0"
    truth = {"2.0.1": "value_mismatch", "2.13.0": "value_mismatch", "2.14.1": "consistent"}
    e = _entry(tmp_path, planted_case, "open", [])
    assert main(["bisect", str(e.path), "--versions", "2.0.1,2.13.0,2.14.1", "--update"]) == 0
    out = capsys.readouterr().out
    assert (
        "note: 2.14.0 between 2.13.0 and 2.14.1 was not probed: the change is in 2.14.0 or in 2.14.1 "
        "(--range 2.13.0..2.14.1 pins it)"
    ) in out
    assert "recorded: e: status fixed-in 2.14.1" in out
    assert load_entry(e.path).status == "fixed-in 2.14.1"


def test_bisect_logs_one_line_per_release() -> None:
    lines: list[str] = []
    bisect(
        ["2.0.1", "2.14.1"], lambda v: ("value_mismatch", "functorch: tensor([[1.],\n        [0.]])"), log=lines.append
    )
    assert lines == [f"torch {v}: value_mismatch (functorch: tensor([[1.], [0.]]))" for v in ("2.0.1", "2.14.1")]
