"""Transform stacks: 1-3 torch.func levels, optionally under a plain autograd level.

Invariants: every drawn stack is well-formed for any case (``grad`` levels sum a non-scalar inner output,
see :func:`fuzzer.ir.case.needs_sum`; vmap ``in_dims``/``out_dims`` are clamped to the case's shapes by
:func:`fuzzer.ir.case.repair_vmap_dims`); ``autograd_grad`` only ever appears outermost; at most one
forward-mode level (jacfwd, jvp, linearize: extra ones become jacrev/vjp); vmap batch sizes are
1..``max_batch_size``, ``in_dims`` entries 0, 1 or None (never all None), ``out_dims`` 0 or 1.
Choices are ordered simplest first, so shrinking goes toward one ``grad`` level, no outer autograd
level, batch size 1, in/out dims 0 and argnums 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from hypothesis import strategies as st

from fuzzer.ir.case import (
    FORWARD_MODE_TRANSFORMS,
    FUNCTORCH_TRANSFORMS,
    MAX_BATCH,
    MAX_INPUTS,
    VMAP_IN_DIMS,
    VMAP_OUT_DIMS,
    Transform,
)

from ._validate import BOOLS, check_int_range, check_min_max, check_subset, ints, pick

__all__ = ["transform_stacks"]


def transform_stacks(
    *,
    n_inputs: int = 1,
    min_depth: int = 1,
    max_depth: int = 3,
    transforms: Sequence[str] = FUNCTORCH_TRANSFORMS,
    outer_autograd: bool | None = None,
    max_batch_size: int = 3,
) -> st.SearchStrategy[tuple[Transform, ...]]:
    """Stacks of ``min_depth..max_depth`` functorch levels, outermost first.

    ``outer_autograd``: True always puts a plain ``torch.autograd.grad`` level on top (the seed's shape),
    False never, None draws it. ``argnums`` are drawn below ``n_inputs``.
    """
    check_int_range("n_inputs", n_inputs, 1, MAX_INPUTS)
    check_int_range("min_depth", min_depth, 1, 3)
    check_int_range("max_depth", max_depth, 1, 3)
    check_min_max("min_depth", min_depth, "max_depth", max_depth)
    names = check_subset("transforms", transforms, FUNCTORCH_TRANSFORMS)
    check_int_range("max_batch_size", max_batch_size, 1, MAX_BATCH)

    return _stack(names, n_inputs, min_depth, max_depth, outer_autograd, max_batch_size)


@st.composite
def _level(draw: st.DrawFn, names: tuple[str, ...], n_inputs: int, max_batch_size: int) -> Transform:
    name = pick(draw, names)
    if name == "vmap":
        batch = draw(ints(1, max_batch_size))
        dims = VMAP_IN_DIMS if n_inputs > 1 else VMAP_IN_DIMS[:-1]
        in_dims = tuple(pick(draw, dims) for _ in range(n_inputs))
        if all(d is None for d in in_dims):
            in_dims = (0, *in_dims[1:])
        out_dims = pick(draw, VMAP_OUT_DIMS)
        return Transform("vmap", batch_size=batch, in_dims=in_dims, out_dims=out_dims)
    return Transform(name, argnums=draw(ints(0, n_inputs - 1)))


_REVERSE_TWIN = {"jacfwd": "jacrev", "jvp": "vjp", "linearize": "vjp"}


def _one_forward_mode(levels: list[Transform]) -> list[Transform]:
    seen = False
    out = []
    for t in levels:
        if t.name in FORWARD_MODE_TRANSFORMS:
            if seen:
                t = Transform(_REVERSE_TWIN[t.name], argnums=t.argnums)
            seen = True
        out.append(t)
    return out


@lru_cache(maxsize=256)
def _levels(
    names: tuple[str, ...], n_inputs: int, min_depth: int, max_depth: int, max_batch_size: int
) -> st.SearchStrategy[list[Transform]]:
    """NOTE [cheap draws]: one strategy object per parameter set."""
    return st.lists(_level(names, n_inputs, max_batch_size), min_size=min_depth, max_size=max_depth)


@lru_cache(maxsize=8)
def _unique_argnums(n_inputs: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, n_inputs - 1), min_size=2, max_size=n_inputs, unique=True)


@st.composite
def _stack(
    draw: st.DrawFn,
    names: tuple[str, ...],
    n_inputs: int,
    min_depth: int,
    max_depth: int,
    outer_autograd: bool | None,
    max_batch_size: int,
) -> tuple[Transform, ...]:
    levels = draw(_levels(names, n_inputs, min_depth, max_depth, max_batch_size))
    levels = _one_forward_mode(levels)
    outer = draw(BOOLS) if outer_autograd is None else outer_autograd
    if outer:
        levels.insert(0, Transform("autograd_grad", argnums=draw(ints(0, n_inputs - 1))))
    if n_inputs > 1 and levels[0].name != "vmap" and draw(ints(0, 3)) == 3:
        # tuple argnums, outermost level only (inner levels' outputs must stay single tensors)
        nums = draw(_unique_argnums(n_inputs))
        levels[0] = Transform(levels[0].name, argnums=tuple(sorted(nums)))
    return tuple(levels)
