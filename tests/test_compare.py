"""Verdicts and the known-limitations registry, on real torch runs and on outcome records."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fuzzer.case import Case
from fuzzer.compare import RegistryError, classify, load_registry
from fuzzer.execute import Outcome, Side, run_case


def test_legacy_forward_under_functorch_is_expected(seed_case: Case) -> None:
    legacy = replace(seed_case, function=replace(seed_case.function, style="legacy"))
    outcome = run_case(legacy)
    assert outcome.verdict == "error_functorch_only"
    assert outcome.functorch.error_type == "RuntimeError"
    assert classify(outcome, load_registry()) == ("expected", "legacy_forward_under_functorch")


def test_vmap_without_rule_is_expected(planted_case: Case) -> None:
    no_rule = replace(planted_case, function=replace(planted_case.function, vmap_rule="none"))
    outcome = run_case(no_rule)
    assert classify(outcome, load_registry()) == ("expected", "vmap_without_rule")


def test_planted_vmap_bug_is_a_value_mismatch(planted_case: Case) -> None:
    outcome = run_case(planted_case)
    assert outcome.verdict == "value_mismatch"
    assert classify(outcome, load_registry()) == ("value_mismatch", None)
    correct = replace(planted_case, function=replace(planted_case.function, vmap_rule="custom"))
    assert run_case(correct).verdict == "consistent"


def _side(err: str | None = None, kind: str = "RuntimeError") -> Side:
    return Side(None, kind, err) if err is not None else Side("tensor(1.)", None, None)


@pytest.mark.parametrize(
    "verdict, fc, ref, expected",
    [
        ("error_functorch_only", _side("boom"), _side(), "error_functorch_only"),
        ("error_reference_only", _side(), _side("boom"), "error_reference_only"),
        ("different_errors", _side("a", "RuntimeError"), _side("b", "ValueError"), "different_errors"),
        ("error_functorch_only", _side("it must override the setup_context staticmethod"), _side(), "expected"),
        # the legacy limitation is a functorch-mode one: the same message from the reference is a finding
        (
            "error_reference_only",
            _side(),
            _side("it must override the setup_context staticmethod"),
            "error_reference_only",
        ),
        ("value_mismatch", _side(), _side(), "value_mismatch"),
    ],
)
def test_classify(verdict: str, fc: Side, ref: Side, expected: str) -> None:
    assert classify(Outcome(verdict, fc, ref, 0.0), load_registry())[0] == expected


def test_registry_entries_cite_documentation() -> None:
    for lim in load_registry():
        assert lim.docs.startswith("https://"), lim.name


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "x", "mode": "sideways", "pattern": "a", "docs": "d"}, "mode 'sideways' is not one of"),
        ({"name": "x", "mode": "both", "pattern": "(", "docs": "d"}, "bad pattern"),
        ({"name": "x", "mode": "both"}, "needs name, mode, pattern and docs"),
    ],
)
def test_bad_registry_is_named(tmp_path: Path, entry: dict, message: str) -> None:
    path = tmp_path / "lims.json"
    path.write_text(json.dumps({"schema_version": 1, "limitations": [entry]}))
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert str(path) in str(info.value) and message in str(info.value)
