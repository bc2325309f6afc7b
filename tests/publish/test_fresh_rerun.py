"""NOTE [fresh rerun]: a value finding verified in a fork-server child is published only once a fresh
interpreter reproduces it too."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fuzzer.ir.case import Case
from fuzzer.judge.judge import Judge
from fuzzer.publish.forkserver import ForkServer
from fuzzer.publish.verify import stage, verify_and_publish


def test_a_value_finding_a_fork_child_verifies_is_rerun_in_a_fresh_interpreter(
    tmp_path: Path, judged_finding, planted_case: Case
) -> None:
    finding, j = judged_finding(planted_case, "vmap_vs_loop")
    assert j.verdict == "value_mismatch"
    server = ForkServer()
    try:
        verified, dest = verify_and_publish(tmp_path, stage(tmp_path, finding), finding, server=server)
    finally:
        server.close()
    record = json.loads((dest / "finding.json").read_text())["verification"]
    assert verified and dest.parent.name == "findings" and record["method"] == "fork server"
    assert record["fresh_rerun"]["exit_code"] == 1


def test_a_value_finding_only_a_fork_child_reproduces_is_not_published(
    tmp_path: Path, judged_finding, planted_case: Case, seed_case: Case
) -> None:
    """A child whose heap made the values disagree (value_mismatch-e5303d720e: linearize's uninitialized
    values, alike in every child of one server) is played by a server that answers as a real child did
    for a real mismatch; the finding's own repro is consistent on this torch, as that one was in every
    fresh interpreter."""
    if Judge(timeout=120)(seed_case, "functorch_vs_create_graph").verdict != "consistent":
        pytest.skip("the seed case is a disagreement on this torch")
    real, _ = judged_finding(planted_case, "vmap_vs_loop")
    server = ForkServer()
    try:
        code, output, _ = server.run(stage(tmp_path / "real", real) / "repro.py")
    finally:
        server.close()
    assert code == 1 and "not close" in output

    class SameHeapChild(ForkServer):
        def run(self, script: Path) -> tuple[int | None, str, float]:
            return code, output, 0.1

    out = tmp_path / "run"
    finding = dataclasses.replace(
        real, case=seed_case, signature=dataclasses.replace(real.signature, oracle="functorch_vs_create_graph")
    )
    verified, dest = verify_and_publish(out, stage(out, finding), finding, server=SameHeapChild())
    record = json.loads((dest / "finding.json").read_text())["verification"]
    assert not verified and dest.parent.name == "unverified"
    assert record["fresh_rerun"]["exit_code"] == 0 and "output_tail" in record["fresh_rerun"]
