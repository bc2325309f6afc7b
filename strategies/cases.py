"""Whole cases: a Function, ``f``, inputs and a transform stack (:class:`fuzzer.case.Case`).

Invariants: every drawn case passes :func:`fuzzer.case.validate`; its forward values stay below
:data:`fuzzer.case.MAX_MAGNITUDE` (:func:`fuzzer.case.forward_bound`), so nothing overflows; the create_graph-mode cost estimate
(:func:`fuzzer.case.reference_cost`) stays within ``max_cost`` (the base shape is drawn among those
that fit the stack); ``f`` adds its used outputs elementwise when they share a shape and otherwise sums
each to a scalar.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import assume
from hypothesis import strategies as st

from fuzzer.case import (
    DTYPES,
    FUNCTORCH_TRANSFORMS,
    MAX_MAGNITUDE,
    STYLES,
    Case,
    FDef,
    Inputs,
    forward_bound,
    input_shapes,
    numel,
    output_shapes,
    reference_cost,
    repair_vmap_dims,
)

from ._validate import check_int_range, check_subset
from .functions import _rarely, functions
from .inputs import tensor_values
from .transforms import transform_stacks

__all__ = ["SHAPES", "cases"]

#: Base shapes, simplest first: from scalar to small 2-D.
SHAPES: tuple[tuple[int, ...], ...] = (
    (),
    (1,),
    (2,),
    (3,),
    (1, 1),
    (2, 1),
    (1, 2),
    (2, 2),
    (2, 3),
    (3, 2),
)


def cases(
    *,
    max_inputs: int = 3,
    max_outputs: int = 3,
    max_nodes: int = 4,
    min_depth: int = 1,
    max_depth: int = 3,
    transforms: Sequence[str] = FUNCTORCH_TRANSFORMS,
    outer_autograd: bool | None = None,
    styles: Sequence[str] = STYLES,
    vmap_rules: Sequence[str] = ("none", "generate", "custom"),
    dtypes: Sequence[str] = DTYPES,
    max_cost: int = 256,
) -> st.SearchStrategy[Case]:
    """Cases for the differential check. See :func:`strategies.functions` and
    :func:`strategies.transform_stacks` for the parameters passed through."""
    check_int_range("max_inputs", max_inputs, 1, 3)
    dtypes = check_subset("dtypes", dtypes, DTYPES)
    check_int_range("max_cost", max_cost, 1, 1_000_000)

    return _case(
        max_inputs,
        max_outputs,
        max_nodes,
        min_depth,
        max_depth,
        tuple(transforms),
        outer_autograd,
        tuple(styles),
        tuple(vmap_rules),
        dtypes,
        max_cost,
    )


@st.composite
def _case(
    draw: st.DrawFn,
    max_inputs: int,
    max_outputs: int,
    max_nodes: int,
    min_depth: int,
    max_depth: int,
    transforms: tuple[str, ...],
    outer_autograd: bool | None,
    styles: tuple[str, ...],
    vmap_rules: tuple[str, ...],
    dtypes: tuple[str, ...],
    max_cost: int,
) -> Case:
    n_inputs = draw(st.integers(1, max_inputs))
    stack = draw(
        transform_stacks(
            n_inputs=n_inputs,
            min_depth=min_depth,
            max_depth=max_depth,
            transforms=transforms,
            outer_autograd=outer_autograd,
        )
    )
    fits = [s for s in SHAPES if reference_cost(stack, s, s) <= max_cost] or [()]
    shape = draw(st.sampled_from(fits))
    fn = draw(
        functions(
            shape=shape,
            n_inputs=n_inputs,
            max_inputs=max_inputs,
            max_outputs=max_outputs,
            max_nodes=max_nodes,
            styles=styles,
            vmap_rules=vmap_rules,
        )
    )
    n_out = len(fn.outputs)
    uses = tuple(sorted(draw(st.lists(st.integers(0, n_out - 1), min_size=1, max_size=n_out, unique=True))))
    shapes = output_shapes(fn, shape)
    combine = draw(st.sampled_from(("add", "sum")))
    if len({shapes[j] for j in uses}) > 1:
        combine = "sum"
    inplace = tuple(j for j, o in enumerate(fn.outputs) if o.kind == "node" and draw(_rarely))
    inplace_no_grad = bool(inplace) and draw(st.booleans())
    dtype = draw(st.sampled_from(dtypes))
    f = FDef(uses, combine, inplace, inplace_no_grad)
    draft = repair_vmap_dims(Case(fn, f, Inputs(shape, (), dtype), stack))
    values = tuple(draw(tensor_values(n_inputs=1, numel=numel(s)))[0] for s in input_shapes(draft))
    case = replace(draft, inputs=Inputs(shape, values, dtype))
    assume(forward_bound(case) <= MAX_MAGNITUDE)  # no overflowing chains (exp of exp of exp...)
    return case
