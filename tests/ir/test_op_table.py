"""NOTE [op table]: one row per op; the IR's op vocabulary is read from it."""

from __future__ import annotations

import pytest

from fuzzer.ir.case import INPLACE_OPS, OPS, SCALAR_OPS, STRAIGHT_THROUGH_OPS
from fuzzer.ir.ops import OP_KINDS, op_kind
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
