"""A jvp rule that returns an input's tangent itself as the tangent of a new output (``x + s``) breaks the
forward-mode AD docs' rule that the jvp "match the view/inplace behavior of forward()": f's in-place
change of the output then changes the caller's tangent. The generator writes a clone there; the old
rendering is the rule-breaking variant ``jvp_alias`` (drawn rarely), which cases of schema <= 2 load as."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fuzzer.codegen.render import render
from fuzzer.history.corpus import load_entry
from fuzzer.ir.features import features
from fuzzer.ir.oracles import MAIN
from fuzzer.ir.serde import case_from_json, case_to_json
from fuzzer.judge.judge import Judge

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def _old_case():
    """Once corpus error-e349ed6e78 (schema 2): jacfwd over a Function returning x + s whose jvp
    returns tx0, f doubling the output in place; only plain forward AD raised."""
    data = json.loads((DATA / "jvp_alias_case.json").read_text())
    assert data["schema_version"] == 2
    return case_from_json(data)


def test_a_schema_2_case_loads_as_it_was_rendered() -> None:
    case = _old_case()
    assert case.function.jvp_alias and "jvp_alias" in features(case)
    assert "        dt0 = tx0\n" in render(case, style="repro")
    again = case_from_json(case_to_json(case))  # schema 3 keeps the flag
    assert again == case


def test_without_the_alias_the_jvp_returns_a_new_tensor_and_the_case_is_consistent() -> None:
    case = _old_case()
    fixed = replace(case, function=replace(case.function, jvp_alias=False))
    assert "dt0 = tx0.clone()" in render(fixed, style="repro")
    assert "jvp_alias" not in features(fixed)
    j = Judge()(fixed, MAIN)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_the_alias_makes_values_and_errors_not_applicable() -> None:
    j = Judge()(_old_case(), MAIN)
    assert (j.verdict, j.reason) == ("not_applicable", "jvp_returns_input_tangent"), (j.verdict, j.fingerprint)


def test_an_internal_assert_of_such_a_function_is_still_a_finding_naming_the_rule() -> None:
    """Corpus torch_bug_error-c5d4d4ff93 (G11): the same alias with a narrow view of the output,
    '!this_view_meta->has_fw_view() INTERNAL ASSERT FAILED' in plain forward AD."""
    e = load_entry(CORPUS / "torch_bug_error-c5d4d4ff93")
    assert e.case.function.jvp_alias
    j = Judge()(e.case, e.oracle)
    assert j.verdict == "torch_bug_error" and j.broken_rule == "jvp_returns_input_tangent", (j.verdict, j.broken_rule)
    assert "INTERNAL ASSERT FAILED" in j.fingerprint
