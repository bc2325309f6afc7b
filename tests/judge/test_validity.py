"""NOTE [valid comparisons]: no comparison of rules that disagree is ever run (a property test on drawn
Functions), and what each side runs."""

from __future__ import annotations

import types
import warnings
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings

from fuzzer.codegen.render import render
from fuzzer.ir.case import CHECKPOINT_PLACEMENTS, COMPILE_PLACEMENTS, Case, Checkpoint, Compile
from fuzzer.ir.features import repeated_outputs
from fuzzer.ir.oracles import CHECKPOINT, COMPILED, ORACLES, applicable, oracle_kind
from fuzzer.ir.shapes import input_shapes
from fuzzer.ir.validity import not_applicable, sides
from strategies import cases


def _fn_class(case: Case):
    ns: dict = {}
    source = render(case)
    exec(compile(source.split("\n\ndef f(")[0], "<fn>", "exec"), ns)  # the Function class only
    return ns["Fn"]


def _adjoint_gap(case: Case) -> float | None:
    """|<g, J t> - <B g, t>| for the Function's own jvp rule (J) and backward (B, through one plain
    autograd.grad) on the outputs f uses, random g and t at the case's inputs; None where the
    Function cannot be evaluated this way."""
    fn = case.function
    gen = torch.Generator().manual_seed(0)
    xs = [torch.tensor(v, dtype=torch.float64).reshape(input_shapes(case)[i]) for i, v in enumerate(case.inputs.values)]
    if any(t.name == "vmap" for t in case.transforms):  # base shape only: the rules are elementwise
        xs = [torch.randn(case.inputs.shape, dtype=torch.float64, generator=gen) for _ in xs]
    cls = _fn_class(case)
    scalars = [float(s) for s in fn.scalars]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            leaves = [x.clone().requires_grad_() for x in xs]
            outs = cls.apply(*leaves, *scalars)
            outs = outs if isinstance(outs, tuple) else (outs,)
            used = [j for j in case.f.uses if j not in fn.non_differentiable]
            gs = {j: torch.randn(outs[j].shape, dtype=torch.float64, generator=gen) for j in used}
            ts = [torch.randn(x.shape, dtype=torch.float64, generator=gen) for x in xs]
            targets = [outs[j] for j in used if outs[j].requires_grad]
            grads = (
                torch.autograd.grad(targets, leaves, [gs[j] for j in used if outs[j].requires_grad], allow_unused=True)
                if targets
                else [None] * len(leaves)
            )
            ctx = types.SimpleNamespace(saved_tensors=tuple(xs), **{f"s{i}": s for i, s in enumerate(scalars)})
            tangents = cls.jvp(ctx, *ts, *[None] * len(scalars))
    except RuntimeError:
        return None  # e.g. an input returned as-is and saved: the Function is rejected before any rule runs
    tangents = tangents if isinstance(tangents, tuple) else (tangents,)
    lhs = sum(float((gs[j] * tangents[j]).sum()) for j in used if tangents[j] is not None)
    rhs = sum(float((g * t).sum()) for g, t in zip(grads, ts, strict=True) if g is not None)
    return abs(lhs - rhs) / (1 + abs(lhs) + abs(rhs))


@settings(max_examples=150, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    cases(
        vmap_rules=("generate",), styles=("setup_context",), transforms=("jacrev",), max_depth=1, outer_autograd=False
    )
)
def test_no_comparison_of_disagreeing_first_order_rules_is_run(case: Case) -> None:
    # every Function gets a jvp rule, so backward and jvp can be compared wherever the table allows it
    case = replace(case, function=replace(case.function, jvp_rule=not case.function.dirty))
    assume(case.function.jvp_rule and not repeated_outputs(case))
    runs_across_rules = [
        o
        for o in applicable(case)
        if not_applicable(case, o) is None and (lambda a, b: a.path[:1] != b.path[:1])(*sides(case, o))
    ]
    assume(runs_across_rules)
    gap = _adjoint_gap(case)
    assume(gap is not None)
    assert gap < 1e-6, (runs_across_rules, case)


@pytest.mark.parametrize("oracle", ORACLES)
def test_sides_of_the_seed(seed_case: Case, oracle: str) -> None:
    if oracle == COMPILED:  # NOTE [compiled mode]: for a case that runs compiled, its eager side compiled
        with pytest.raises(ValueError, match="needs a case with a compile"):
            sides(seed_case, oracle)
        for placement in COMPILE_PLACEMENTS:
            a, b = sides(replace(seed_case, compile=Compile("eager", True, placement)), oracle)
            assert a.path == b.path == ("R", "R") and b.compiled is not None and a.compiled is None
            assert a.functorch == (placement != "plain") and replace(b, compiled=None) == a
        return
    if oracle == CHECKPOINT:  # NOTE [checkpoint mode]: the side it wraps, with f checkpointed
        with pytest.raises(ValueError, match="needs a case with a checkpoint"):
            sides(seed_case, oracle)
        for placement in CHECKPOINT_PLACEMENTS:
            k = Checkpoint("checkpoint", placement)
            a, b = sides(replace(seed_case, checkpoint=k), oracle)
            assert a.path == b.path == ("R", "R") and b.checkpoint == k and a.checkpoint is None
            assert a.functorch == (placement == "inside") and (b.compiled is not None) == (placement == "compiled")
            assert replace(b, checkpoint=None, compiled=None) == a
        return
    if oracle_kind(oracle).side_b in ("function_twin", "opcheck"):  # NOTE [custom op mode]: one stack, one op
        a, b = sides(seed_case, oracle)
        assert replace(a, custom_op=False) == b and a.path == ("R", "R")
        assert a.functorch == (oracle_kind(oracle).side_a == "functorch")
        assert a.custom_op == (oracle_kind(oracle).side_b == "function_twin") and not b.custom_op
        return
    a, b = sides(seed_case, oracle)
    assert a.path == ("R", "R") and a.functorch and not a.forward_ad
    if oracle == ORACLES[0]:
        assert b.path == ("R", "R") and not b.functorch and not b.vmap
