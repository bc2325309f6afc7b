"""NOTE [broken rules]: a Function that breaks a documented rule makes a value comparison meaningless, never
an internal error of torch acceptable. On real torch: a torch-bug error of such a Function is a finding that
names the rule; the same stack over a Function that breaks the same rule but runs cleanly is not one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from fuzzer.ir.oracles import MAIN
from fuzzer.ir.serde import case_from_json
from fuzzer.ir.validity import RULES, not_applicable, values_meaningless
from fuzzer.judge.judge import Judge

DATA = Path(__file__).resolve().parents[1] / "data"


def _ctx_case():
    # autograd_grad > jvp over a Function that keeps x0 and an output on ctx, returns one tensor twice
    # and whose jvp returns one tangent for both; f doubles both outputs in place. Plain forward AD
    # raises "is_inplace_op INTERNAL ASSERT FAILED" (torch 2.0.1 .. 2.14.1).
    return case_from_json(json.loads((DATA / "ctx_internal_assert_case.json").read_text()))


def test_an_internal_assert_of_a_function_that_keeps_a_tensor_on_ctx_is_a_finding(judged_finding) -> None:
    case = _ctx_case()
    assert not_applicable(case, MAIN) == "tensor_saved_on_ctx"  # the validity table's word on values
    finding, j = judged_finding(case, MAIN)
    assert j.verdict == "torch_bug_error", (j.verdict, j.reason)
    assert j.broken_rule == "tensor_saved_on_ctx"
    assert "INTERNAL ASSERT FAILED" in j.fingerprint
    assert finding.broken_rule == "tensor_saved_on_ctx"
    assert "breaks a rule (tensor_saved_on_ctx)" in finding.short_header()[0]
    assert any(RULES["tensor_saved_on_ctx"] in line for line in finding.header())
    assert finding.record({})["broken_rule"] == "tensor_saved_on_ctx"


def test_a_function_that_breaks_the_rule_but_runs_cleanly_is_not_a_finding() -> None:
    """The same stack, a Function of one output that keeps x0 on ctx: the comparison of values is not
    applicable, and nothing torch calls a bug happens, so nothing is reported."""
    case = _ctx_case()
    fn = replace(case.function, outputs=case.function.outputs[:1], saved=("x0",), on_ctx=("x0",))
    clean = replace(case, function=fn, f=replace(case.f, uses=(0,), inplace=()))
    j = Judge()(clean, MAIN)
    assert (j.verdict, j.reason, j.broken_rule) == ("not_applicable", "tensor_saved_on_ctx", None)
    assert j.outcome is not None  # it ran: a torch bug there would have been seen


def test_the_function_under_test_keeps_every_verdict() -> None:
    """``affuzz check`` (subject="function"): no comparison is not applicable, no rule is named."""
    j = Judge(subject="function")(_ctx_case(), MAIN)
    assert j.verdict == "torch_bug_error" and j.broken_rule is None


def _data_case(name: str):
    return case_from_json(json.loads((DATA / name).read_text()))


def test_values_computed_from_a_saved_tensor_modified_in_place_are_not_compared() -> None:
    """A Function that returns one tensor twice and saves it; f doubles the other copy in place. torch.func
    does not check versions, so hessian and jacrev(jacrev) read the doubled tensor a different number of
    times (24 vs 16; plain autograd refuses the program): no finding. A hand check of a 10-minute run
    found this false positive (value_mismatch-b2ac4078da)."""
    case = _data_case("saved_output_modified_case.json")
    assert values_meaningless(case) == "saved_tensor_modified_in_place"
    j = Judge()(case, "forward_over_reverse")
    assert (j.verdict, j.reason) == ("not_applicable", "saved_tensor_modified_in_place")
    fixed = replace(case, f=replace(case.f, inplace=()))  # without the in-place change: comparable, and equal
    assert values_meaningless(fixed) is None
    assert Judge()(fixed, "forward_over_reverse").verdict == "consistent"


def test_an_unexplained_error_of_such_a_program_is_still_a_finding() -> None:
    """autograd.grad over linearize of a Function that saves its output, f doubling it in place under
    no_grad: torch.func's linearize raises "a leaf Variable that requires grad is being used in an in-place
    operation" (its const-folding turns the primal values into leaves that require grad, then replays
    f's mul_ on them; a hand check of a 10-minute run: genuine, plain ``x * 3`` then ``mul_`` shows it),
    which does not come from the saved tensor. Only values are meaningless. (The case this test had
    before raised only because the generated jvp returned the input tangent itself for a new output,
    which breaks the documented rule that jvp match forward's view behaviour: fixed in the generator.)"""
    case = _data_case("saved_output_inplace_error_case.json")
    assert values_meaningless(case) == "saved_tensor_modified_in_place"
    j = Judge()(case, MAIN)
    assert j.verdict in ("different_errors", "error_functorch_only"), (j.verdict, j.reason)
    assert "a leaf Variable that requires grad is being used in an in-place operation" in j.fingerprint
