"""The inputs ``affuzz check`` gives a target: ``--inputs`` read, value ranges drawn, ``--inputs-from`` called.

NOTE [check inputs]
A target's inputs are found once, before anything is judged, in one of three ways:

- ``--inputs`` (:func:`parse_inputs`): one item per argument, split at commas outside brackets. ``3x4`` a
  float64 tensor ``f`` takes and differentiates, ``3x4:float32``; ``scalar`` (or ``()``) a 0-dim one;
  ``3x4:const`` (``3x4:float32:const``) a floating-point tensor passed as a constant, never differentiated;
  ``3:int64`` / ``3:bool`` an integer (values in [0, 2], small enough to index any dim of 3) or bool tensor,
  a constant; ``=LITERAL`` a Python literal passed as is (``=[[0], [1]]``, ``=(2, 3)``, ``=-1``);
  ``@pkg.module:name`` a name the script imports and passes (a callable, say);
- by trial (no ``--inputs``): the forward's positional parameters without a default all get one shape, tried
  in :data:`TRIAL_SHAPES` order, and the first call that returns a finite floating-point tensor (or a tuple
  holding some) wins;
- ``--inputs-from pkg.module:fn`` (:func:`given_samples`): ``fn()`` returns argument tuples, the way
  OpInfo's ``sample_inputs`` does, each one sample of the target. Where a sample has floating-point tensors
  that require grad, those are what ``f`` differentiates; where none does, every floating-point tensor is.
  Every other item (integer and bool tensors, tensors that must not require grad, callables, anything) is
  passed as ``fn()`` made it: the script imports ``fn`` and takes it from there (``GIVEN[i]``). These
  samples are the Function's domain: the shrinker never cuts their shapes.

Values: with ``--inputs`` or by trial, each target has the samples of :data:`VALUE_RANGES`, the shapes
found with the first: ``positive`` (uniform in [0.5, 1.5], where ``sqrt``/``log``-like forwards are
finite), ``mixed`` (uniform in [-2, 2]: negative arguments, sparse outputs of a sparsemax, clamp regions)
and ``special`` (a point list cycled: three elements are already a negative, a zero and a large value,
four a tie). A sample the forward rejects or maps to non-finite values
is outside the Function's domain: it is dropped, and the command says so. The rule oracles run on every
sample (:meth:`fuzzer.check.engine.Checker.rules`), the transform stacks on the first, so a table row
says the same on every run. torch's db brings its own samples (``OpInfo.sample_inputs``, float64).

A tensor argument whose gradient the Function's backward returns as None (on the sample) is one it does
not differentiate: ``f`` passes it as a constant, and the command says so (``Target.constants``), rather
than report its "gradient" as wrong.
"""

from __future__ import annotations

import ast
import random
import re
from typing import Any

from ..codegen.parts import nested
from ..ir.case import DTYPES
from ..ir.target import Arg, TargetError

TRIAL_SHAPES = ((3,), (2, 3), (), (4, 4))
#: NOTE [check inputs]: the value ranges of the samples, in order: (name, low, high) draws uniformly,
#: (name, points) cycles through the points (each argument from another offset).
VALUE_RANGES: tuple[tuple[Any, ...], ...] = (
    ("positive", 0.5, 1.5),
    ("mixed", -2.0, 2.0),
    ("special", (-1.0, 0.0, 10.0, -1.0, 2.0, -10.0, 0.5, 1.0, -0.5)),
)
INT_DTYPES = ("int64", "int32", "bool")
_ITEM = re.compile(
    r"^(?:(?P<shape>\(\)|scalar|\d+(?:x\d+)*)(?::(?P<dtype>float32|float64|int64|int32|bool))?(?P<const>:const)?"
    r"|=(?P<literal>.+)|@(?P<import>[A-Za-z_][\w.]*:[A-Za-z_]\w*))$"
)


def split_items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes (``=[[0], [1]],3x4``: two items)."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [s for s in items if s]


def parse_inputs(text: str) -> list[Arg]:
    """``--inputs`` (NOTE [check inputs]); raises :class:`TargetError` (one line) for an item it cannot
    read."""
    args = []
    for item in split_items(text):
        m = _ITEM.match(item)
        if m is None:
            raise TargetError(
                f"--inputs: cannot read {item!r} (expected e.g. 3x4, 3x4:float32, 3x4:const, 3:int64, scalar, "
                "=LITERAL or @pkg.module:name)"
            )
        if m.group("literal") is not None:
            try:
                ast.literal_eval(m.group("literal"))
            except (ValueError, SyntaxError):
                raise TargetError(f"--inputs: {item!r} is not a Python literal") from None
            args.append(Arg("const", literal=m.group("literal")))
            continue
        if m.group("import") is not None:
            args.append(Arg("import", literal=m.group("import")))
            continue
        shape = () if m.group("shape") in ("()", "scalar") else tuple(int(s) for s in m.group("shape").split("x"))
        dtype = m.group("dtype") or "float64"
        if dtype in INT_DTYPES or m.group("const"):
            args.append(Arg("const", shape, dtype))  # values drawn by draw(); literal written then
        else:
            args.append(Arg("tensor", shape, dtype))
    if not any(a.kind == "tensor" for a in args):
        raise TargetError("--inputs: name at least one floating-point tensor to differentiate (e.g. 3x4)")
    return args


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def draw(args: list[Arg], rng: random.Random, value_range: tuple[Any, ...]) -> list[Arg]:
    """``args`` with values of ``value_range`` (one of :data:`VALUE_RANGES`) where they have none: tensors
    to differentiate, and constant tensors (written as literals)."""
    out = []
    for i, a in enumerate(args):
        n = _numel(a.shape)
        if a.kind == "tensor" and not a.values:
            a = Arg("tensor", a.shape, a.dtype, _values(n, rng, value_range, i), name=a.name)
        elif a.kind == "const" and not a.literal:
            if a.dtype == "bool":
                values: list[Any] = [rng.random() < 0.5 for _ in range(n)]
            elif a.dtype in INT_DTYPES:
                values = [rng.randint(0, 2) for _ in range(n)]
            else:
                values = list(_values(n, rng, value_range, i))
            text = nested(values, a.shape) if a.dtype not in INT_DTYPES else _ints(values, a.shape)
            a = Arg("const", literal=f"torch.tensor({text}, dtype=torch.{a.dtype})", name=a.name)
        out.append(a)
    return out


def _ints(values: list[Any], shape: tuple[int, ...]) -> str:
    """``values`` (ints or bools) nested as ``shape``, as a Python literal."""
    if not shape:
        return repr(values[0])
    step = len(values) // shape[0]
    return "[" + ", ".join(_ints(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def _values(n: int, rng: random.Random, value_range: tuple[Any, ...], offset: int) -> tuple[float, ...]:
    if len(value_range) == 2:
        points = value_range[1]
        return tuple(float(points[(offset * 2 + j) % len(points)]) for j in range(n))
    _, low, high = value_range
    # stratified: element j from the j-th of n equal parts of [low, high], in a shuffled order, so three
    # elements of [-2, 2] already reach below -1 and above 1
    width = (high - low) / max(n, 1)
    parts = list(range(n))
    rng.shuffle(parts)
    return tuple(round(low + width * (p + rng.random()), 4) for p in parts)


def given_samples(spec: str, call: Any) -> list[list[Arg]]:
    """NOTE [check inputs]: the samples ``--inputs-from spec`` gives, as argument lists (``call``: the
    function, already imported). Raises :class:`TargetError` (one line) where they are not argument
    tuples with a floating-point tensor."""
    import torch

    try:
        samples = list(call())
    except Exception as e:  # noqa: BLE001 (the user's function: say what it raised, in one line)
        raise TargetError(f"--inputs-from {spec}: calling it raised {type(e).__name__}: {e}") from None
    if not samples:
        raise TargetError(f"--inputs-from {spec}: returned no samples (expected a list of argument tuples)")
    out = []
    for k, sample in enumerate(samples):
        if not isinstance(sample, (tuple, list)):
            raise TargetError(
                f"--inputs-from {spec}: sample {k} is a {type(sample).__name__}, not a tuple of arguments"
            )
        floats = [isinstance(v, torch.Tensor) and v.is_floating_point() for v in sample]
        marked = [f and v.requires_grad for f, v in zip(floats, sample, strict=True)]
        diff = marked if any(marked) else floats
        args = []
        for i, (v, d) in enumerate(zip(sample, diff, strict=True)):
            if d:
                dtype = str(v.dtype).removeprefix("torch.")
                values = tuple(float(x) for x in v.detach().reshape(-1).tolist())
                args.append(Arg("tensor", tuple(v.shape), dtype if dtype in DTYPES else "float64", values))
            else:
                args.append(Arg("given", literal=str(i)))
        if not any(diff):
            raise TargetError(f"--inputs-from {spec}: sample {k} has no floating-point tensor to differentiate")
        out.append(args)
    return out
