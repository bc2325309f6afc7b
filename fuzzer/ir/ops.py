"""The elementwise ops a Function's forward is made of: one row each. Torch-free.

NOTE [op table]
An op is a row of :data:`OP_KINDS` (:class:`OpKind`): its arity, the in-place method a node with
``inplace`` calls (NOTE [in-place forward] in :mod:`fuzzer.ir.case`), whether it reads one of the
Function's Python floats, whether the Function's rules pass the gradient straight through it (NOTE
[custom gradients]), and its rank for the shrinker (lower reads simpler in a repro: ``x ** 2`` before
``torch.exp(x)``). The case IR's vocabulary (``OPS``, ``INPLACE_OPS``, ``SCALAR_OPS``,
``STRAIGHT_THROUGH_OPS``) and the shrinker's ranks are read from it; an unknown name raises
(:func:`op_kind`). The row also holds the source an op becomes, as templates the renderer fills
(:func:`fill`): its forward expression, the arguments of its in-place method, its tangent (the jvp
rule's term), the vector-Jacobian product it contributes to each argument, and the bound of its value
that input generation keeps finite. Placeholders: ``{a0}``/``{a1}`` the arguments, ``{p}`` the exponent,
``{pm1}`` the power of a derivative (`` ** p-1``, empty for p = 2), ``{s}`` the Python float, ``{self}`` the
node's own value, ``{t0}``/``{t1}`` the arguments' tangents, ``{g}`` the gradient flowing back. Row order is
the order validation and reports list them in.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
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
    forward: str = ""  # the expression of its value
    inplace_args: str = ""  # the arguments of its in-place method
    tangent: str = ""  # the jvp rule's term
    vjp: tuple[str, ...] = ()  # the term it contributes to each argument's gradient, argument by argument
    # its value's magnitude bound from its arguments' (and the float's) bounds
    bound: Callable[[list[float], float, int], float] = lambda a, s, p: a[0]
    # the tangent is a new tensor, not the argument's tangent itself (forward AD's view rule, NOTE [promises]),
    # but where the rule-breaking variant ``jvp_alias`` returns the argument's tangent (``aliasable``)
    new_tangent: bool = False
    aliasable: bool = False


OP_KINDS: tuple[OpKind, ...] = (
    OpKind(
        "pow", 1, "pow_", shrink_rank=0, forward="{a0} ** {p}", inplace_args="{p}",
        tangent="{t0} * {p} * {a0}{pm1}", vjp=("{g} * {p} * {a0}{pm1}",), bound=lambda a, s, p: a[0] ** p,
    ),
    OpKind(
        "mul", 2, "mul_", shrink_rank=1, forward="{a0} * {a1}", inplace_args="{a1}",
        tangent="{t0} * {a1} + {a0} * {t1}", vjp=("{g} * {a1}", "{g} * {a0}"), bound=lambda a, s, p: a[0] * a[1],
    ),
    OpKind(
        "add", 2, "add_", shrink_rank=2, forward="{a0} + {a1}", inplace_args="{a1}",
        tangent="{t0} + {t1}", vjp=("{g}", "{g}"), bound=lambda a, s, p: a[0] + a[1],
    ),
    OpKind(
        "sin", 1, "sin_", shrink_rank=5, forward="torch.sin({a0})",
        tangent="{t0} * torch.cos({a0})", vjp=("{g} * torch.cos({a0})",), bound=lambda a, s, p: min(1.0, a[0]),
    ),
    OpKind(
        "exp", 1, "exp_", shrink_rank=6, forward="torch.exp({a0})",
        tangent="{t0} * {self}", vjp=("{g} * {self}",), bound=lambda a, s, p: math.exp(a[0]),
    ),
    OpKind(
        "scale", 1, "mul_", shrink_rank=3, scalar=True, forward="{a0} * {s}", inplace_args="{s}",
        tangent="{t0} * {s}", vjp=("{g} * {s}",), bound=lambda a, s, p: a[0] * abs(s),
    ),
    OpKind(
        "shift", 1, "add_", shrink_rank=4, scalar=True, forward="{a0} + {s}", inplace_args="{s}",
        tangent="{t0}", vjp=("{g}",), bound=lambda a, s, p: a[0] + abs(s), new_tangent=True, aliasable=True,
    ),
    OpKind(
        "round", 1, "round_", shrink_rank=7, straight_through=True, forward="torch.round({a0})",
        tangent="{t0}", vjp=("{g}",), bound=lambda a, s, p: a[0] + 0.5, new_tangent=True,
    ),
)  # fmt: skip
_BY_NAME = {k.name: k for k in OP_KINDS}


def op_kind(name: str) -> OpKind:
    """The row of op ``name`` (NOTE [op table]); an unknown name raises ``KeyError``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r} (known: {', '.join(_BY_NAME)})") from None


#: Every placeholder a template may use.
PLACEHOLDERS = ("a0", "a1", "p", "pm1", "s", "self", "t0", "t1", "g")


def fill(template: str, **values: str) -> str:
    """``template`` with its placeholders replaced; a placeholder it uses that ``values`` lacks raises."""
    return template.format(**values)


def uses(template: str) -> set[str]:
    """The placeholders ``template`` uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def derivative_reads(kind: OpKind) -> set[str]:
    """What an op's vector-Jacobian product reads besides the gradient: ``a0``/``a1`` (its arguments),
    ``self`` (its own value)..."""
    return set().union(*(uses(t) for t in kind.vjp)) - {"g"}
