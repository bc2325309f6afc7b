"""A finding's two JSON forms are written and read by one class (fuzzer.publish.findings.Finding)."""

from __future__ import annotations

from pathlib import Path

from fuzzer.ir.case import Case
from fuzzer.ir.files import atomic_write_json, atomic_write_text
from fuzzer.ir.serde import dumps
from fuzzer.judge.execute import Outcome, Side
from fuzzer.publish.findings import RECORD_KEYS, Finding
from fuzzer.triage.signature import Signature


def finding(case: Case) -> Finding:
    sig = Signature("error_functorch_only", "jacrev_vs_jacfwd", ("jacrev",), ("saved_output",), "RuntimeError: x @ -")
    return Finding(
        case=case,
        signature=sig,
        features=("output_is_input", "saved_output"),
        outcome=Outcome(sig.verdict, Side(None, "RuntimeError", "x"), Side("tensor(1.)", None, None), 0.25),
        seconds_to_find=1.5,
        cases_to_find=7,
        torch_version="2.13.0",
        found_by="affuzz run --seed 1",
        original=case,
        shrink={"runs": 3, "seconds": 0.5},
        extra={"triage": "functorch_wrong", "worker": {"slot": 1}},
    )


def test_finding_json_round_trips_through_its_directory(seed_case: Case, tmp_path: Path) -> None:
    f = finding(seed_case)
    record = f.record({"exit_code": 1})
    assert set(record) - set(f.extra) <= RECORD_KEYS  # the keys it writes itself are the ones it reads back
    atomic_write_json(tmp_path / "finding.json", record)
    atomic_write_text(tmp_path / "case.json", dumps(seed_case))
    back = Finding.from_dir(tmp_path)
    assert (back.case, back.signature, back.features, back.extra) == (f.case, f.signature, f.features, f.extra)
    assert (back.seconds_to_find, back.cases_to_find, back.torch_version, back.found_by, back.shrink) == (
        1.5,
        7,
        "2.13.0",
        "affuzz run --seed 1",
        {"runs": 3, "seconds": 0.5},
    )
    assert back.original is None  # no original.json written here
    assert back.outcome.functorch.value == f.outcome.functorch.summary()


def test_finding_state_form_is_complete(seed_case: Case) -> None:
    f = finding(seed_case)
    assert Finding.from_json(f.to_json()) == f
