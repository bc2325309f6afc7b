"""The elementwise ops a Function's forward is made of: one row each. Torch-free.

NOTE [op table]
An op is a row of :data:`OP_KINDS` (:class:`OpKind`): its arity, the in-place method a node with
``inplace`` calls (NOTE [in-place forward] in :mod:`fuzzer.ir.case`), whether it reads one of the
Function's Python floats, whether the Function's rules pass the gradient straight through it (NOTE
[custom gradients]), and its rank for the shrinker (lower reads simpler in a repro: ``x ** 2`` before
``torch.exp(x)``). The case IR's vocabulary (``OPS``, ``INPLACE_OPS``, ``SCALAR_OPS``,
``STRAIGHT_THROUGH_OPS``) and the shrinker's ranks are read from it; an unknown name raises
(:func:`op_kind`). The source an op becomes (its forward expression, its tangent, its vector-Jacobian
product) is still written per op in :mod:`fuzzer.codegen.fn_exprs` and :mod:`fuzzer.codegen.fn_rules`.
Row order is the order validation and reports list them in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpKind:
    """NOTE [op table]: one op's row."""

    name: str
    arity: int
    inplace: str  # the in-place method: ``t.<inplace>(...)``
    shrink_rank: int
    scalar: bool = False  # reads a Python float input of the Function (``a * s``, ``a + s``)
    straight_through: bool = False  # the rules pass gradient and tangent through unchanged


OP_KINDS: tuple[OpKind, ...] = (
    OpKind("pow", 1, "pow_", shrink_rank=0),
    OpKind("mul", 2, "mul_", shrink_rank=1),
    OpKind("add", 2, "add_", shrink_rank=2),
    OpKind("sin", 1, "sin_", shrink_rank=5),
    OpKind("exp", 1, "exp_", shrink_rank=6),
    OpKind("scale", 1, "mul_", shrink_rank=3, scalar=True),
    OpKind("shift", 1, "add_", shrink_rank=4, scalar=True),
    OpKind("round", 1, "round_", shrink_rank=7, straight_through=True),
)
_BY_NAME = {k.name: k for k in OP_KINDS}


def op_kind(name: str) -> OpKind:
    """The row of op ``name`` (NOTE [op table]); an unknown name raises ``KeyError``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r} (known: {', '.join(_BY_NAME)})") from None
