"""NOTE [fresh rerun]: a value finding verified in a fork-server child is published only once a fresh
interpreter reproduces it too."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from fuzzer.ir.case import Case
from fuzzer.ir.serde import load
from fuzzer.judge.judge import Judge
from fuzzer.publish.forkserver import ForkServer
from fuzzer.publish.verify import Verifier, stage, verify_and_publish
from fuzzer.triage.buckets import Bucket


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


def test_two_repros_of_one_bucket_verify_one_after_the_other(
    tmp_path: Path, judged_finding, planted_case: Case
) -> None:
    """NOTE [one staging folder per bucket]: a smaller repro of a bucket submitted while the bucket's
    previous one is still queued or running no longer empties the staging folder under it: each is
    staged and verified in turn, and the folder published last holds the files of the finding it names."""
    first, j = judged_finding(planted_case, "vmap_vs_loop")
    assert j.verdict == "value_mismatch"
    values = tuple(tuple(2 * v for v in vals) for vals in planted_case.inputs.values)
    second = dataclasses.replace(
        first, case=dataclasses.replace(planted_case, inputs=dataclasses.replace(planted_case.inputs, values=values))
    )
    bucket = Bucket(first.signature, first)
    log: list[str] = []
    verifier = Verifier(tmp_path, python=sys.executable, case_timeout=60.0, log=log.append)
    verifier.start()
    verifier.submit(bucket, first)
    verifier.submit(bucket, second)
    verifier.close()
    assert not log, log
    assert bucket.status == "verified" and bucket.finding is second
    published = tmp_path / "findings" / first.signature.id
    assert load(str(published / "case.json")) == second.case
    assert not (tmp_path / "unverified").exists()
