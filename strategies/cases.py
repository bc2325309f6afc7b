"""Whole cases: a Function, ``f``, inputs and a transform stack (:class:`fuzzer.ir.case.Case`).

Invariants: every drawn case passes :func:`fuzzer.ir.case.validate`; its forward values stay below
:data:`fuzzer.ir.case.MAX_MAGNITUDE` (:func:`fuzzer.ir.case.forward_bound`), so nothing overflows; the create_graph-mode cost estimate
(:func:`fuzzer.ir.case.reference_cost`) stays within ``max_cost`` (the base shape is drawn among those
that fit the stack); ``f`` adds its used outputs elementwise when they share a shape and otherwise sums
each to a scalar.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from functools import lru_cache

from hypothesis import assume
from hypothesis import strategies as st

from fuzzer.ir.case import (
    DTYPES,
    FUNCTION_STYLES,
    FUNCTORCH_TRANSFORMS,
    Case,
    Checkpoint,
    Compile,
    FDef,
    FunctionDef,
    Inputs,
    Transform,
)
from fuzzer.ir.dataflow import live_outputs, repair_vmap_dims
from fuzzer.ir.features import ALL_FEATURES
from fuzzer.ir.shapes import MAX_MAGNITUDE, forward_bound, input_shapes, numel, output_shapes, reference_cost

from ._validate import BOOLS, check_int_range, check_subset, ints, pick, rarely
from .functions import OP_ORDER, functions
from .inputs import VALUES
from .transforms import transform_stacks

__all__ = ["SHAPES", "case_groups", "cases", "group_entry"]

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
    styles: Sequence[str] = FUNCTION_STYLES,
    vmap_rules: Sequence[str] = ("none", "generate", "custom"),
    dtypes: Sequence[str] = DTYPES,
    max_cost: int = 256,
    features: Collection[str] | None = None,
    ops: Collection[str] | None = None,
    compiled: st.SearchStrategy[Compile] | None = None,
    checkpointed: st.SearchStrategy[Checkpoint] | None = None,
) -> st.SearchStrategy[Case]:
    """Cases for the differential check. See :func:`strategies.functions` and
    :func:`strategies.transform_stacks` for the parameters passed through; ``features``: the feature tags
    drawn (None: all; NOTE [swarm] in :mod:`fuzzer.gen.swarm`), ``inplace_on_output`` among them;
    ``compiled`` (e.g. :func:`strategies.compile_configs`): each case also runs under torch.compile as
    drawn from it (the oracle ``compiled_vs_eager``; None: no case does); ``checkpointed`` (e.g.
    :func:`strategies.checkpoint_configs`): each case also runs checkpointed as drawn from it (the oracle
    ``checkpoint_vs_plain``; None: no case does)."""
    groups = case_groups(
        size=1,
        max_inputs=max_inputs,
        max_outputs=max_outputs,
        max_nodes=max_nodes,
        min_depth=min_depth,
        max_depth=max_depth,
        transforms=transforms,
        outer_autograd=outer_autograd,
        styles=styles,
        vmap_rules=vmap_rules,
        dtypes=dtypes,
        max_cost=max_cost,
        features=features,
        ops=ops,
    )
    one = group_entry(groups, 0)
    if compiled is not None:
        one = st.tuples(one, compiled).map(lambda pair: replace(pair[0], compile=pair[1]))
    if checkpointed is not None:
        one = st.tuples(one, checkpointed).map(lambda pair: replace(pair[0], checkpoint=pair[1]))
    return one


def case_groups(
    *,
    size: int = 4,
    max_inputs: int = 3,
    max_outputs: int = 3,
    max_nodes: int = 4,
    min_depth: int = 1,
    max_depth: int = 3,
    transforms: Sequence[str] = FUNCTORCH_TRANSFORMS,
    outer_autograd: bool | None = None,
    styles: Sequence[str] = FUNCTION_STYLES,
    vmap_rules: Sequence[str] = ("none", "generate", "custom"),
    dtypes: Sequence[str] = DTYPES,
    max_cost: int = 256,
    features: Collection[str] | None = None,
    ops: Collection[str] | None = None,
) -> st.SearchStrategy[tuple[Case | None, ...]]:
    """``size`` cases that share one Function and ``f`` (and base shape), each with its own transform
    stack, dtype and input values: the cheap way to draw many cases (NOTE [case groups]).

    Invariants: the tuple has exactly ``size`` entries; entry 0 is distributed as :func:`cases` draws a
    case, and is None only where its forward values exceed :data:`fuzzer.ir.case.MAX_MAGNITUDE` (a draw
    :func:`cases` rejects); entry ``i > 0`` draws its stack as :func:`cases` does and is None when that
    stack does not fit the group's base shape within ``max_cost`` or its forward values exceed
    :data:`fuzzer.ir.case.MAX_MAGNITUDE`. Every entry that is not None satisfies :func:`cases`'s invariants.
    """
    check_int_range("size", size, 1, 64)
    check_int_range("max_inputs", max_inputs, 1, 3)
    dtypes = check_subset("dtypes", dtypes, DTYPES)
    check_int_range("max_cost", max_cost, 1, 1_000_000)
    tags = None if features is None else frozenset(check_subset("features", features, ALL_FEATURES, empty=True))
    op_set = None if ops is None else tuple(sorted(check_subset("ops", ops, OP_ORDER)))
    return _group(
        size,
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
        tags,
        op_set,
    )


def group_entry(groups: st.SearchStrategy[tuple[Case | None, ...]], i: int) -> st.SearchStrategy[Case]:
    """Entry ``i`` of the groups ``groups`` draws, where it is not None (the other entries are decoded
    and dropped): a lone case is entry 0 of a group of one, and the shrinker decodes case ``i`` of a
    campaign's group from the group's bytes this way."""
    return _entry(groups, i)


# NOTE [case groups]
# Decoding a case with Hypothesis costs about as much as running it (a few ms: ~15 us per choice, most
# of them spent on the Function), so campaigns draw cases in groups: one Function and ``f`` under
# several transform stacks, each with its own dtype and input values. Entry 0 is drawn exactly as a
# lone case (stack first, then a base shape that fits it); later entries draw a stack for that shape and
# are dropped (None) when it does not fit. Each entry is still one whole case (one Function, one stack,
# one set of inputs); a group only shares the Function's decoding.


@st.composite
def _entry(draw: st.DrawFn, groups: st.SearchStrategy[tuple[Case | None, ...]], i: int) -> Case:
    case = draw(groups)[i]
    assume(case is not None)  # no overflowing chains (exp of exp of exp...), a stack that fits
    return case


@lru_cache(maxsize=8)
def _uses(n_out: int) -> st.SearchStrategy[list[int]]:
    """NOTE [cheap draws]: which outputs ``f`` uses."""
    return st.lists(st.integers(0, n_out - 1), min_size=1, max_size=n_out, unique=True)


@st.composite
def _group(
    draw: st.DrawFn,
    size: int,
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
    tags: frozenset[str] | None = None,
    ops: tuple[str, ...] | None = None,
) -> tuple[Case | None, ...]:
    n_inputs = draw(ints(1, max_inputs))
    stacks = _stacks(n_inputs, min_depth, max_depth, transforms, outer_autograd)
    stack = draw(stacks)
    fits = [s for s in SHAPES if reference_cost(stack, s, s) <= max_cost] or [()]
    shape = pick(draw, fits)
    fn = draw(_functions(shape, n_inputs, max_inputs, max_outputs, max_nodes, styles, vmap_rules, tags, ops))
    n_out = len(fn.outputs)
    uses = tuple(sorted(draw(_uses(n_out))))
    live = live_outputs(fn)
    if live and not set(uses) & set(live) and not rarely(draw):  # NOTE [live gradient] in strategies/functions.py
        uses = tuple(sorted({*uses, pick(draw, list(live))}))
    shapes = output_shapes(fn, shape)
    combine = pick(draw, ("add", "sum"))
    if len({shapes[j] for j in uses}) > 1:
        combine = "sum"
    in_place = tags is None or "inplace_on_output" in tags
    inplace = tuple(j for j, o in enumerate(fn.outputs) if o.kind == "node" and in_place and rarely(draw))
    inplace_no_grad = bool(inplace) and draw(BOOLS)
    # NOTE [aliased inputs]: 1 Function in 4 of several inputs gets one input in two of its arguments
    apply_args: tuple[int, ...] = ()
    if fn.n_inputs > 1 and not fn.dirty and (tags is None or "aliased_inputs" in tags) and rarely(draw):
        j = draw(ints(1, fn.n_inputs - 1))
        apply_args = tuple(draw(ints(0, j - 1)) if k == j else k for k in range(fn.n_inputs))
    f = FDef(uses, combine, inplace, inplace_no_grad, apply_args)
    group = [_variant(draw, fn, f, shape, stack, dtypes)]
    for _ in range(size - 1):
        stack = draw(stacks)
        fitting = shape == () or reference_cost(stack, shape, shape) <= max_cost  # () is every stack's fallback
        group.append(_variant(draw, fn, f, shape, stack, dtypes) if fitting else None)
    return tuple(group)


@lru_cache(maxsize=256)
def _stacks(
    n_inputs: int, min_depth: int, max_depth: int, transforms: tuple[str, ...], outer_autograd: bool | None
) -> st.SearchStrategy[tuple[Transform, ...]]:
    """NOTE [cheap draws]: one strategy object per parameter set (a new one validates itself on its
    first draw, and a group draws one per decoding)."""
    return transform_stacks(
        n_inputs=n_inputs,
        min_depth=min_depth,
        max_depth=max_depth,
        transforms=transforms,
        outer_autograd=outer_autograd,
    )


@lru_cache(maxsize=1024)
def _functions(
    shape: tuple[int, ...],
    n_inputs: int,
    max_inputs: int,
    max_outputs: int,
    max_nodes: int,
    styles: tuple[str, ...],
    vmap_rules: tuple[str, ...],
    tags: frozenset[str] | None,
    ops: tuple[str, ...] | None,
) -> st.SearchStrategy[FunctionDef]:
    """NOTE [cheap draws]: as :func:`_stacks`, for the Function."""
    return functions(
        shape=shape,
        n_inputs=n_inputs,
        max_inputs=max_inputs,
        max_outputs=max_outputs,
        max_nodes=max_nodes,
        styles=styles,
        vmap_rules=vmap_rules,
        features=tags,
        ops=ops,
    )


def _values(draw: st.DrawFn, n: int) -> tuple[float, ...]:
    """NOTE [cheap draws]: ``n`` values as :func:`strategies.tensor_values` draws them (the same choices,
    each an index into :data:`strategies.inputs.VALUES`), without a list strategy per tensor: the values
    are a third of a group's decoding."""
    index = ints(0, len(VALUES) - 1)
    return tuple(VALUES[draw(index)] for _ in range(n))


def _variant(
    draw: st.DrawFn,
    fn: FunctionDef,
    f: FDef,
    shape: tuple[int, ...],
    stack: tuple[Transform, ...],
    dtypes: tuple[str, ...],
) -> Case | None:
    """One case of a group: ``stack`` over the shared Function, with its own dtype and input values."""
    dtype = pick(draw, dtypes)
    draft = repair_vmap_dims(Case(fn, f, Inputs(shape, (), dtype), stack))
    values = tuple(_values(draw, numel(s)) for s in input_shapes(draft))
    case = replace(draft, inputs=Inputs(shape, values, dtype))
    return case if forward_bound(case) <= MAX_MAGNITUDE else None
