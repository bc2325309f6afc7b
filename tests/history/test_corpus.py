"""Corpus, replay and bisection: real torch, real worker processes, a corrupt corpus."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA, ROOT

from fuzzer.cli import main
from fuzzer.codegen.render import render
from fuzzer.history.corpus import add_findings, load_corpus, load_entry, version_tuple, write_entry
from fuzzer.history.replay import ChildInterpreter, ThisInterpreter, change_of
from fuzzer.history.torch_bisect import BisectError, bisect
from fuzzer.ir.case import SCHEMA_VERSION, Case
from fuzzer.ir.serde import dumps, load
from fuzzer.triage.ablate import without
from fuzzer.triage.shrink import Shrinker, case_runner, goal_of

THIS_TORCH = ".".join(map(str, version_tuple(torch.__version__)))


def _meta(entry_id: str, verdict: str, status: str = "open", oracle: str = "vmap_vs_loop") -> dict:
    return {
        "id": entry_id,
        "signature": f"{verdict}|{oracle}|vmap|custom_vmap",
        "verdict": verdict,
        "oracle": oracle,
        "first_seen": {"torch_version": "2.0.1", "date": "2026-01-01"},
        "upstream": None,
        "status": status,
        "history": [],
    }


def _entry(corpus: Path, entry_id: str, case: Case, verdict: str, status: str = "open", oracle: str = "vmap_vs_loop"):
    return write_entry(corpus, entry_id, case, _meta(entry_id, verdict, status, oracle), render(case, oracle=oracle))


def test_checked_in_corpus_loads_and_holds_the_seed() -> None:
    entries, errors = load_corpus([ROOT / "corpus"])
    assert errors == []
    seed = [e for e in entries if e.case == load(str(DATA / "seed_case.json"))]
    assert seed and seed[0].meta["first_seen"]["torch_version"] == "2.0.1"
    assert {"output_is_input", "saved_output"} <= set(seed[0].meta["essential_features"])
    for e in entries:
        compile((e.path / "repro.py").read_text(), str(e.path / "repro.py"), "exec")


def test_corrupt_entries_are_named_and_the_rest_replays(planted_case: Case, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    _entry(corpus, "good", planted_case, "value_mismatch")
    (corpus / "truncated").mkdir()
    (corpus / "truncated" / "case.json").write_text(dumps(planted_case)[:200])
    (corpus / "future").mkdir()
    (corpus / "future" / "case.json").write_text(
        dumps(planted_case).replace(f'"schema_version": {SCHEMA_VERSION}', '"schema_version": 99')
    )
    bad_op = json.loads(dumps(planted_case))
    bad_op["function"]["nodes"][0]["op"] = "os.system"
    (corpus / "bad-op").mkdir()
    (corpus / "bad-op" / "case.json").write_text(json.dumps(bad_op))
    (corpus / "bad-meta").mkdir()
    (corpus / "bad-meta" / "case.json").write_text(dumps(planted_case))
    (corpus / "bad-meta" / "meta.json").write_text('{"schema_version": 1, "status": "probably fixed"}')
    out = tmp_path / "replay.json"
    assert main(["replay", str(corpus), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4
    assert any("truncated/case.json: not valid JSON" in line for line in err)
    assert any("future/case.json: schema_version: unsupported version 99" in line for line in err)
    assert any("bad-op/case.json" in line and "'os.system'" in line for line in err)
    assert any("bad-meta/meta.json: status" in line for line in err)
    records = json.loads(out.read_text())
    good = [r for r in records if r["id"] == "good"]
    assert len(good) == 1 and good[0]["verdict"] == "value_mismatch" and good[0]["torch_version"] == torch.__version__
    assert {r["verdict"] for r in records if r["id"] is None} == {"invalid"}
    assert all({"case", "signature", "torch_version", "verdict"} <= set(r) for r in records)


def test_fixed_and_regressed_are_reported_and_update_records_them(planted_case: Case, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    # the planted case without its planted rule: consistent under vmap_vs_loop
    consistent = without(planted_case, "custom_vmap")
    assert consistent is not None
    _entry(corpus, "was-open-now-fixed", consistent, "value_mismatch", status="open")
    _entry(corpus, "fixed-then-regressed", planted_case, "value_mismatch", status="fixed-in 2.0.0")
    _entry(corpus, "as-recorded", planted_case, "value_mismatch", status="open")
    out = tmp_path / "r.json"
    assert main(["replay", str(corpus), "--json", str(out)]) == 1
    changes = {r["id"]: r["change"] for r in json.loads(out.read_text())}
    assert changes == {"was-open-now-fixed": "fixed", "fixed-then-regressed": "regressed", "as-recorded": None}
    assert main(["replay", str(corpus), "--update"]) == 1  # a regression stays a failure
    meta = json.loads((corpus / "was-open-now-fixed" / "meta.json").read_text())
    assert meta["status"] == f"fixed-in {THIS_TORCH}" and meta["history"][-1]["verdict"] == "consistent"
    assert json.loads((corpus / "fixed-then-regressed" / "meta.json").read_text())["status"] == "open"
    capsys.readouterr()
    assert main(["replay", str(corpus)]) == 0  # everything is as recorded now


def test_change_classification(planted_case: Case, tmp_path: Path) -> None:
    e = load_entry(_entry(tmp_path, "e", planted_case, "value_mismatch", status="fixed-in 2.5.0"))
    assert change_of(e, "2.4.1", "value_mismatch") == ""
    assert change_of(e, "2.4.1", "consistent") == "fixed"
    assert change_of(e, "2.5.0+cpu", "consistent") == ""
    assert change_of(e, "2.13.0", "value_mismatch") == "regressed"
    assert change_of(e, "2.4.1", "error_functorch_only") == "new_error"
    assert change_of(e, "2.4.1", "different_errors") == "new_error"
    assert change_of(e, "2.4.1", "hang") == "hang"
    bare = load_entry(tmp_path / "e" / "case.json")
    assert change_of(bare, "2.13.0", "value_mismatch") == "new" and change_of(bare, "2.13.0", "consistent") == ""


def test_worker_matches_in_process_and_survives_crash_and_hang(planted_case: Case, seed_case: Case) -> None:
    here = ThisInterpreter()
    worker = ChildInterpreter(sys.executable, hang_grace=1.0)
    try:
        assert worker.torch_version == torch.__version__
        for case, oracle in ((planted_case, "vmap_vs_loop"), (seed_case, "functorch_vs_create_graph")):
            assert worker.evaluate(case, oracle, 60)[0] == here.evaluate(case, oracle, 60)[0]
        assert worker._proc is not None
        os.kill(worker._proc.pid, signal.SIGKILL)  # the worker dies (as on a segfault)
        assert worker.evaluate(planted_case, "vmap_vs_loop", 60)[0] == "crash"
        assert worker.restarts == 1
        assert worker.evaluate(planted_case, "vmap_vs_loop", 60)[0] == "value_mismatch"  # a fresh worker goes on
        assert worker._proc is not None
        os.kill(worker._proc.pid, signal.SIGSTOP)  # the worker stops answering
        verdict, detail = worker.evaluate(planted_case, "vmap_vs_loop", 0.5)
        assert verdict == "hang" and worker.restarts == 2
        assert worker.evaluate(planted_case, "vmap_vs_loop", 60)[0] == "value_mismatch"
    finally:
        worker.close()


def test_corpus_add_dedupes_by_signature_and_keeps_the_smaller_repro(planted_case: Case, tmp_path: Path) -> None:
    oracle = "vmap_vs_loop"
    run = case_runner(oracle)
    goal = goal_of(planted_case, oracle, run)
    small = Shrinker(goal, run).shrink(planted_case).case

    def finding(name: str, case: Case) -> Path:
        d = tmp_path / "out" / "findings" / name
        d.mkdir(parents=True)
        (d / "case.json").write_text(dumps(case))
        (d / "repro.py").write_text(render(case, oracle=oracle, style="repro"))
        record = {
            "id": "value_mismatch-0000000000",
            "signature": f"value_mismatch|{oracle}|vmap|custom_vmap",
            "verdict": "value_mismatch",
            "oracle": oracle,
            "torch_version": torch.__version__,
            "signature_features": ["custom_vmap"],
        }
        (d / "finding.json").write_text(json.dumps(record))
        return d

    corpus = tmp_path / "corpus"
    big, little = finding("a", planted_case), finding("b", small)
    first = add_findings(corpus, [big])
    assert first.added == ["value_mismatch-0000000000"]
    again = add_findings(corpus, [big])
    assert again.kept == ["value_mismatch-0000000000"] and not again.added
    smaller = add_findings(corpus, [little])
    assert smaller.replaced == ["value_mismatch-0000000000"]
    entries, errors = load_corpus([corpus])
    assert errors == [] and len(entries) == 1 and entries[0].case == small
    assert add_findings(corpus, [big]).kept  # the bigger one never comes back
    shutil.rmtree(tmp_path / "out")


def test_bisect_finds_the_first_changed_release() -> None:
    versions = ["2.0.1", "2.1.0", "2.1.1", "2.2.0", "2.3.0", "2.4.0", "2.13.0"]
    truth = {v: ("value_mismatch" if v == "2.0.1" else "consistent") for v in versions}
    probed: list[str] = []

    def evaluate(v: str) -> tuple[str, str]:
        probed.append(v)
        return truth[v], ""

    result = bisect(versions, evaluate)
    assert result.first_changed == "2.1.0" and "2.1.0" in result.summary()
    assert len(probed) <= 4  # two ends + log2 of the rest
    same = bisect(["2.1.0", "2.13.0"], lambda v: ("consistent", ""))
    assert same.first_changed is None and "no change" in same.summary()
    with pytest.raises(BisectError):
        bisect(["2.13.0"], evaluate)


def test_bisect_cli_rejects_bad_input_in_one_line(tmp_path: Path, capsys) -> None:
    assert main(["bisect", str(DATA / "seed_case.json"), "--versions", "2.0.1,banana"]) == 2
    assert main(["bisect", str(DATA / "seed_case.json"), "--range", "2.0.1-2.13.0"]) == 2
    (tmp_path / "bad.json").write_text("{")
    assert main(["bisect", str(tmp_path / "bad.json"), "--versions", "2.0.1,2.13.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "banana" in err[0] and "LOW..HIGH" in err[1] and "not valid JSON" in err[2]


def test_bisect_cli_on_this_torch_alone(tmp_path: Path, capsys) -> None:
    """Both ends are this interpreter's release: no venv is created, the verdicts agree."""
    assert main(["bisect", str(DATA / "seed_case.json"), "--versions", f"{THIS_TORCH},{THIS_TORCH}"]) == 0
    assert "no change" in capsys.readouterr().out


def test_rejudging_drops_non_findings_and_merges_one_root_cause(
    planted_case: Case, seed_case: Case, tmp_path: Path
) -> None:
    """bench/rejudge_corpus.py: an entry that is a finding on no torch leaves; entries of one error
    fingerprint become one, listing the others as variants; the rest get the new history and status."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rejudge", ROOT / "bench" / "rejudge_corpus.py")
    rejudge = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(rejudge)
    corpus = tmp_path / "corpus"
    for name in ("artifact", "bug-a", "bug-b", "seed"):
        _entry(corpus, name, seed_case if name == "seed" else planted_case, "value_mismatch")
    (corpus / "bug-a" / "repro.py").write_text("x = 1\n")  # the smaller repro is the one kept
    fp = "AssertionError: flat_bdims must not be None @ torch/_functorch/vmap.py:wrap_batched"
    records = [
        {"id": "artifact", "torch_version": "2.13.0", "verdict": "not_applicable", "detail": "tensor_saved_on_ctx"},
        {"id": "bug-a", "torch_version": "2.13.0", "verdict": "torch_bug_error", "detail": fp},
        {"id": "bug-b", "torch_version": "2.13.0", "verdict": "torch_bug_error", "detail": fp},
        {"id": "seed", "torch_version": "2.0.1", "verdict": "value_mismatch", "detail": ""},
        {"id": "seed", "torch_version": "2.13.0", "verdict": "consistent", "detail": ""},
    ]
    (tmp_path / "r.json").write_text(json.dumps(records))
    assert rejudge.main([str(tmp_path / "r.json"), "--corpus", str(corpus)]) == 0
    assert sorted(p.name for p in corpus.iterdir()) == ["bug-a", "seed"]
    a = json.loads((corpus / "bug-a" / "meta.json").read_text())
    assert (
        a["variants"] == ["bug-b"] and a["error"] == fp and a["verdict"] == "torch_bug_error" and a["status"] == "open"
    )
    seed = load_entry(corpus / "seed")
    assert seed.status == "fixed-in 2.13.0" and seed.expected_verdict("2.0.1") == "value_mismatch"
    assert seed.expected_verdict("2.13.0") == "consistent"
