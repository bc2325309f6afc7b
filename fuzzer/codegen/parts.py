"""The pieces every rendered script is made of: the runtime library's sources, the inputs written as
literals, and what a published repro is expected to show. Torch-free.

Split from :mod:`fuzzer.codegen.render`, which assembles them.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..ir.case import Case
from ..ir.shapes import input_shapes
from .function import parse


@dataclass(frozen=True)
class Expect:
    """What a published repro shows (NOTE [repro styles]): which side raises, and which side runs last. The
    last side runs uncaught, so an error is the script's own traceback (its message and the torch frames
    it passed through); the other side runs first, its result or error printed. Neither raising: both
    results are printed and ``torch.testing.assert_close`` compares them."""

    a_raises: bool = False
    b_raises: bool = False
    last: int = 0  # 0: side A (torch.func) runs last, 1: side B
    # for an error finding: what the other side gave when the finding was made. The repro then runs only
    # the side that raises (the bug is its error) and states the other side's result in a comment, so
    # the twins of that side are not in the script
    other: str | None = None
    # NOTE [straight-line sides]: plain-autograd levels written out where that is shorter
    straight: bool = True
    # NOTE [plain forward]: the Function's forward as a plain function, no autograd.Function
    plain: bool = False
    # NOTE [promises] in fuzzer/judge/compare.py: one side raises the error the docs promise, the other
    # returns; both run, and the script fails while exactly one of them raises
    promise: bool = False


@functools.cache
def lib_sources(docstrings: bool = True) -> dict[str, str]:
    """Source of every function in repro_lib.py/repro_fd.py, ``# noqa`` comments dropped (and
    docstrings, unless ``docstrings``)."""
    out = {}
    for name in ("error_key.py", "repro_lib.py", "repro_fd.py", "repro_modes.py"):
        text = Path(__file__).with_name(name).read_text(encoding="utf-8")
        for node in parse(text).body:
            if isinstance(node, ast.FunctionDef):
                lines = (ast.get_source_segment(text, node) or "").splitlines()
                doc = node.body[0]
                if not docstrings and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                    assert doc.end_lineno is not None
                    del lines[doc.lineno - node.lineno : doc.end_lineno - node.lineno + 1]
                out[node.name] = re.sub(r"\s+# (noqa|fmt: skip)[^\n]*", "", "\n".join(lines))
    return out


def nested(values: list[float], shape: tuple[int, ...]) -> str:
    if not shape:
        return repr(float(values[0]))
    step = len(values) // shape[0]
    return "[" + ", ".join(nested(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def tensor_expr(values: list[float], shape: tuple[int, ...], dtype: str, extra: str = "") -> str:
    """The expression of one input tensor: ``torch.tensor([...])``, or ``torch.ones``/``torch.zeros``/
    ``torch.full`` where every element has one same finite value (the same tensor: contiguous, its
    dtype; a maintainer reads ``torch.ones(3, 3)`` at a glance). ``extra``: more keyword arguments."""
    dt = f"dtype=torch.{dtype}{extra}"
    v = float(values[0]) if values else 0.0
    if not shape or len(set(map(float, values))) != 1 or not math.isfinite(v) or len(values) < 2:
        return f"torch.tensor({nested(list(values), shape)}, {dt})"
    dims = ", ".join(map(str, shape))
    if v == 1.0:
        return f"torch.ones({dims}, {dt})"
    if v == 0.0 and math.copysign(1.0, v) > 0:
        return f"torch.zeros({dims}, {dt})"
    return f"torch.full(({dims}{',' if len(shape) == 1 else ''}), {v!r}, {dt})"


def input_exprs(case: Case, extra: str = "") -> list[str]:
    return [
        tensor_expr(list(v), shape, case.inputs.dtype, extra)
        for v, shape in zip(case.inputs.values, input_shapes(case), strict=True)
    ]


def input_lines(case: Case, *, requires_grad: bool = False) -> list[str]:
    """``inputs()``, the tuple of fresh inputs; ``requires_grad`` (published repros of a Function of several
    inputs): ``inputs(requires_grad=False)``, fresh for each side."""
    if requires_grad:
        head, ts = (
            "def inputs(requires_grad=False):  # fresh for each side",
            input_exprs(case, ", requires_grad=requires_grad"),
        )
    else:
        head, ts = "def inputs():", input_exprs(case)
    if len(ts) == 1:
        return [head, f"    return ({ts[0]},)"]
    return [head, "    return (", *[f"        {t}," for t in ts], "    )"]
