"""A mark_dirty Function with a hand-written vmap rule (issue 22's vocabulary, NOTE [mark_dirty vmap rule] in
fuzzer/codegen/fn_rules.py): the rule updates the dirty input once, through the Function, and returns the very
object it received with its own in_dims entry. Such a Function is consistent on real torch under vmap (the dirty
input batched or not), under reverse and forward transforms around and inside vmap, and the generator draws it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, find, settings

from fuzzer.codegen.render import render
from fuzzer.ir.case import Case, FDef, FunctionDef, Inputs, Node, Output, Transform
from fuzzer.ir.oracles import MAIN
from fuzzer.ir.shapes import input_shapes, numel
from fuzzer.ir.validate import validate
from fuzzer.judge.judge import Judge
from strategies import autograd_functions


def _case(*transforms: Transform, rule: str = "custom") -> Case:
    fn = FunctionDef(
        n_inputs=2,
        nodes=(Node("pow", ("x0",)),),
        outputs=(Output("input", "x1"), Output("node", "t0")),
        saved=("x0",),
        dirty=(1,),
        jvp_rule=True,
        vmap_rule=rule,
    )
    bare = Case(fn, FDef(uses=(0, 1)), Inputs((2,), ((0.0,), (0.0,))), transforms)
    pool = (1.25, 0.5, -0.5, 2.0, 0.75, -1.5, 1.0, 0.25)
    values = tuple(tuple(pool[(i + k) % len(pool)] for k in range(numel(s))) for i, s in enumerate(input_shapes(bare)))
    return validate(Case(fn, FDef(uses=(0, 1)), Inputs((2,), values), transforms))


def _vmap(*in_dims: int | None) -> Transform:
    return Transform("vmap", batch_size=2, in_dims=in_dims)


def test_the_rule_returns_the_dirty_input_it_received() -> None:
    text = render(_case(_vmap(0, 0)), oracle=MAIN, style="repro")
    assert "def vmap(info, in_dims, x0, x1):" in text
    assert "(x1 if i == 0 else x1.clone())" in text  # updated once, through the Function
    assert "return (x1, torch.stack([out[1] for out in outs])), (in_dims[1], 0)" in text
    assert "x1.movedim" not in text


@pytest.mark.parametrize(
    ("stack", "oracle"),
    [
        ((_vmap(0, 0),), "vmap_vs_loop"),
        ((_vmap(0, None),), "vmap_vs_loop"),  # the dirty input unbatched: doubled once, not B times
        ((_vmap(None, 0),), "vmap_vs_loop"),
        ((Transform("grad"), _vmap(0, None)), MAIN),
        ((_vmap(0, 0), Transform("grad")), "vmap_vs_loop"),
        ((Transform("jacrev"),), MAIN),
        ((Transform("jacfwd", argnums=1),), MAIN),
        ((Transform("jvp"), _vmap(0, 0)), MAIN),
        ((Transform("hessian"),), MAIN),
    ],
    ids=lambda v: (
        ">".join(t.name + (str(t.in_dims) if t.name == "vmap" else "") for t in v) if isinstance(v, tuple) else v
    ),
)
def test_a_mark_dirty_vmap_rule_is_consistent(stack: tuple[Transform, ...], oracle: str) -> None:
    j = Judge()(_case(*stack), oracle)
    assert j.verdict == "consistent", (j.verdict, j.reason, j.fingerprint, j.outcome)


def test_a_contradicting_rule_is_still_caught() -> None:
    """The same stack with the planted rule that doubles what it stacks: the comparison can fail."""
    j = Judge()(_case(_vmap(0, None), rule="custom_wrong"), "vmap_vs_loop")
    assert j.verdict == "value_mismatch", (j.verdict, j.reason)


def test_the_generator_draws_mark_dirty_with_a_hand_written_vmap_rule() -> None:
    fn = find(
        autograd_functions(),
        lambda fn: bool(fn.dirty) and fn.vmap_rule == "custom",
        settings=settings(max_examples=5000, database=None, suppress_health_check=list(HealthCheck)),
    )
    assert fn.dirty and fn.vmap_rule == "custom"


def test_a_dirty_input_returned_twice_keeps_its_aliasing_under_the_rule() -> None:
    """Both copies come back as the one object the rule received (only computed outputs are stacked
    anew), so a Function that returns its dirty input twice is still compared when f modifies a computed
    output in place, and agrees."""
    fn = FunctionDef(
        n_inputs=2,
        nodes=(Node("pow", ("x0",)),),
        outputs=(Output("input", "x1"), Output("input", "x1"), Output("node", "t0")),
        saved=("x0",),
        dirty=(1,),
        vmap_rule="custom",
    )
    case = validate(
        Case(fn, FDef(uses=(0, 1, 2), inplace=(2,)), Inputs((), ((1.25, 0.5), (-0.5, 2.0))), (_vmap(0, 0),))
    )
    j = Judge()(case, "vmap_vs_loop")
    assert j.verdict == "consistent", (j.verdict, j.reason, j.outcome)


def test_materialized_zeros_of_the_dirty_output_take_the_shape_sample_0_passed() -> None:
    """set_materialize_grads(False) and a dirty output whose grad backward uses: sample 0 of the rule passes the
    whole batched input, so the zeros standing in for a None grad take the shape setup_context recorded. With the
    per-sample shape written into backward, autograd_grad(vmap(f)) raised "returned an invalid gradient ... got [1]
    but expected shape compatible with [3, 1]" (error-d51b8af0e6 of a 10-minute no-swarm run of issue 22: the
    Function's own fault, reported as torch's)."""
    plain = _case(Transform("autograd_grad"), _vmap(0, 0))
    fn = plain.function
    case = validate(
        Case(
            FunctionDef(**{**fn.__dict__, "materialize_grads": False, "jvp_rule": False}),
            FDef(uses=(1,)),  # the dirty output's grad is None in backward: f does not use it
            plain.inputs,
            plain.transforms,
        )
    )
    text = render(case, oracle=MAIN, style="repro")
    assert "ctx.x1_shape = x1.shape" in text and "torch.zeros(ctx.x1_shape" in text
    for oracle in (MAIN, "vmap_vs_loop"):
        j = Judge()(case, oracle)
        assert j.verdict == "consistent", (oracle, j.verdict, j.reason, j.outcome)
