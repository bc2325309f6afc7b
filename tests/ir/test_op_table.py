"""NOTE [op table]: one row per op; the IR's op vocabulary is read from it."""

from __future__ import annotations

import functools

import pytest

from fuzzer.ir.case import INPLACE_OPS, OPS, SCALAR_OPS, STRAIGHT_THROUGH_OPS
from fuzzer.ir.ops import OP_KINDS, PLACEHOLDERS, OpKind, fill, op_kind, uses
from strategies.functions import OP_ORDER


def test_the_vocabulary_is_the_table() -> None:
    assert list(OPS) == [k.name for k in OP_KINDS] == ["pow", "mul", "add", "sin", "exp", "scale", "shift", "round"]
    assert OPS == {"pow": 1, "mul": 2, "add": 2, "sin": 1, "exp": 1, "scale": 1, "shift": 1, "round": 1}
    assert INPLACE_OPS == {k.name: k.inplace for k in OP_KINDS} and all(m.endswith("_") for m in INPLACE_OPS.values())
    assert SCALAR_OPS == ("scale", "shift") and STRAIGHT_THROUGH_OPS == ("round",)
    assert set(OP_ORDER) <= set(OPS)  # what the strategies draw always, the rest behind their own gates


def test_shrink_ranks_order_every_op() -> None:
    ranks = [k.shrink_rank for k in OP_KINDS]
    assert sorted(ranks) == list(range(len(OP_KINDS)))
    assert op_kind("pow").shrink_rank == 0  # x ** 2 is the simplest node a repro can have


def test_an_unknown_op_raises() -> None:
    with pytest.raises(KeyError, match="unknown op 'cos'"):
        op_kind("cos")


def test_every_row_writes_its_source_with_known_placeholders_only() -> None:
    """The forward, in-place, tangent and vjp templates of each op (NOTE [op table]): one vjp term per
    argument; nothing reads a placeholder that is not filled; a scalar op reads its float, pow its
    exponent, and no other op does."""
    for k in OP_KINDS:
        templates = (k.forward, k.inplace_args, k.tangent, *k.vjp)
        assert k.forward and k.tangent and len(k.vjp) == k.arity, k.name
        for t in templates:
            assert uses(t) <= set(PLACEHOLDERS), (k.name, t)
        read = set().union(*(uses(t) for t in templates))
        assert ("s" in read) == k.scalar and ("p" in read) == (k.name == "pow"), k.name
        assert ("a1" in read or "t1" in read) == (k.arity == 2), k.name
        assert all("g" in uses(t) for t in k.vjp) and {"t0"} <= uses(k.tangent), k.name


def test_the_templates_compute_the_derivative_they_claim() -> None:
    """Each op's forward, tangent and vjp, filled and evaluated on floats (``torch.*`` as ``math.*``),
    agree with a central difference of its forward."""
    import math
    import types

    env = {"torch": types.SimpleNamespace(sin=math.sin, cos=math.cos, exp=math.exp, round=lambda v: v)}
    x, y, s, p, h = 0.7, 1.3, 0.5, 3, 1e-6

    def forward(k: OpKind, a0: float, a1: float) -> float:
        return float(eval(fill(k.forward, a0=repr(a0), a1=repr(a1), p=str(p), s=repr(s)), env))

    for k in OP_KINDS:
        if k.straight_through:
            continue  # its rules pass the gradient through by design (NOTE [custom gradients])
        f = functools.partial(forward, k)

        self = f(x, y)
        vals = {"a0": repr(x), "a1": repr(y), "p": str(p), "pm1": f" ** {p - 1}", "s": repr(s), "self": repr(self)}
        d0 = (f(x + h, y) - f(x - h, y)) / (2 * h)
        d1 = (f(x, y + h) - f(x, y - h)) / (2 * h)
        jvp = eval(fill(k.tangent, **vals, t0="1.0", t1="0.0"), env)
        grads = [eval(fill(t, **vals, g="1.0"), env) for t in k.vjp]
        assert math.isclose(jvp, d0, rel_tol=1e-5) and math.isclose(grads[0], d0, rel_tol=1e-5), k.name
        if k.arity == 2:
            assert math.isclose(grads[1], d1, rel_tol=1e-5), k.name
        assert abs(self) <= k.bound([abs(x), abs(y)], s, p) + 1e-12, k.name
