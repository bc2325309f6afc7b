"""A mark_dirty Function with a jvp rule (issue 22's vocabulary): forward doubles a dirty input in place and
returns it; the documented jvp doubles that input's tangent in place and returns the same tensor. Such a
Function is consistent under the stacks that run its jvp, on real torch, and the generator draws it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, find, settings

from fuzzer.codegen.render import render
from fuzzer.ir.case import Case, FDef, FunctionDef, Inputs, Node, Output, Transform
from fuzzer.ir.oracles import MAIN
from fuzzer.ir.validate import validate
from fuzzer.judge.judge import Judge
from strategies import autograd_functions


def _case(*transforms: Transform) -> Case:
    fn = FunctionDef(
        n_inputs=2,
        nodes=(Node("pow", ("x0",)),),
        outputs=(Output("input", "x1"), Output("node", "t0")),
        saved=("x0",),
        dirty=(1,),
        jvp_rule=True,
    )
    return validate(Case(fn, FDef(uses=(0, 1)), Inputs((2,), ((1.25, 0.5), (-0.5, 2.0))), transforms))


def test_the_jvp_rule_updates_the_dirty_tangent_in_place_and_returns_it() -> None:
    text = render(_case(Transform("jvp")), oracle=MAIN, style="repro")
    assert "ctx.mark_dirty(x1)" in text
    assert "tx1.mul_(2)" in text
    assert "ctx.save_for_forward(x0)" in text  # the dirty input is not saved


@pytest.mark.parametrize(
    "stack",
    [
        (Transform("jvp"),),
        (Transform("jvp", argnums=1),),
        (Transform("grad"),),
        (Transform("grad"), Transform("jvp")),
    ],
    ids=lambda s: ">".join(t.name for t in s),
)
def test_a_faithful_mark_dirty_jvp_is_consistent(stack: tuple[Transform, ...]) -> None:
    j = Judge()(_case(*stack), MAIN)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint)


def test_the_generator_draws_mark_dirty_with_a_jvp_rule() -> None:
    fn = find(
        autograd_functions(),
        lambda fn: bool(fn.dirty) and fn.jvp_rule,
        settings=settings(max_examples=5000, database=None, suppress_health_check=list(HealthCheck)),
    )
    assert fn.dirty and fn.jvp_rule
