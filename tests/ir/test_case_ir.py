"""The case IR: JSON round trip, validation, and clear errors for bad input."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given

from fuzzer.ir.case import SCHEMA_VERSION, Case, CaseError
from fuzzer.ir.dataflow import live_outputs, missing_values
from fuzzer.ir.serde import case_from_json, case_to_json, dumps, loads
from fuzzer.ir.shapes import needs_sum
from fuzzer.ir.validate import validate
from strategies import cases


@given(cases())
def test_json_round_trip(case: Case) -> None:
    data = case_to_json(case)
    assert data["schema_version"] == SCHEMA_VERSION
    again = case_from_json(json.loads(json.dumps(data)))
    assert again == case
    assert dumps(again) == dumps(case)


@given(cases())
def test_drawn_cases_are_valid_and_backward_has_its_values(case: Case) -> None:
    assert validate(case) is case
    assert missing_values(case.function) == []


def _mutate(case: Case, path: list, value) -> str:
    data = case_to_json(case)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(data)


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (["schema_version"], 99, "schema_version: unsupported version 99"),
        (["function", "nodes", 0, "op"], "matmul", "function.nodes[0].op: unknown op 'matmul'"),
        (["function", "nodes", 0, "op"], "__import__('os').system('true')", "unknown op"),
        (["transforms", 0, "name"], "hessian_of_doom", "transforms[0].name: unknown transform 'hessian_of_doom'"),
        (["function", "style"], "fancy", "function.style: unknown style 'fancy'"),
        (["function", "saved"], [], "backward needs x0 but it is not saved"),
        (["function", "outputs", 0, "ref"], "t7", "function.outputs[0].ref: 't7' is not a node"),
        (["function", "nodes", 0, "args"], ["y0"], "bad value reference 'y0'"),
        (["inputs", "values"], [[1.0, 2.0]], "inputs.values[0]: has 2 values"),
        (["inputs", "values"], [[float("nan")]], "values must be finite"),
    ],
)
def test_invalid_fields_are_named(seed_case: Case, path: list, value, expected: str) -> None:
    with pytest.raises(CaseError) as info:
        loads(_mutate(seed_case, path, value), source="bad.json")
    assert str(info.value).startswith("bad.json: ")
    assert expected in str(info.value)


def test_unknown_field_is_named(seed_case: Case) -> None:
    data = case_to_json(seed_case)
    data["function"]["source_code"] = "import os"
    with pytest.raises(CaseError, match=r"function: unknown field\(s\) 'source_code'"):
        case_from_json(data)


def test_bad_json_names_line_and_column() -> None:
    with pytest.raises(CaseError, match=r"x.json: not valid JSON \(line 2, column 1"):
        loads('{"schema_version": 1,\n}', source="x.json")


def test_outer_autograd_must_be_outermost(seed_case: Case) -> None:
    bad = replace(seed_case, transforms=tuple(reversed(seed_case.transforms)))
    with pytest.raises(CaseError, match="must be the outermost level"):
        validate(bad)


def test_grad_over_non_scalar_is_summed(planted_case: Case) -> None:
    # grad over vmap: vmap's output is batched, so grad sums it; vmap itself never sums.
    assert needs_sum(planted_case) == [True, False]


def test_live_outputs_are_those_whose_gradient_reaches_an_input(seed_case: Case) -> None:
    """NOTE [live gradient]: the seed's Function returns (x**3, x) and ignores the second grad."""
    fn = seed_case.function
    assert [o.kind for o in fn.outputs] == ["node", "input"] and fn.unused_grads == (1,)
    assert live_outputs(fn) == (0,)
    assert live_outputs(replace(fn, unused_grads=())) == (0, 1)
    assert live_outputs(replace(fn, unused_grads=(0, 1))) == ()
    assert live_outputs(replace(fn, unused_grads=(), none_grads=(0,))) == ()  # backward returns None for x
