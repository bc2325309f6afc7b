"""A Function that is not a case: the user's own ``autograd.Function``, checked by ``affuzz check``. Torch-free.

A :class:`Target` says how to import the Function, how ``f`` calls it (its arguments: tensors ``f`` takes
and differentiates, and constants written into ``f``), which of its outputs ``f`` returns, and what it
defines (its rules). A :class:`CheckCase` is a target under a transform stack and one oracle
(NOTE [check oracles] in :mod:`fuzzer.codegen.check_render`). Both have JSON forms (``finding.json`` of
``affuzz check``), written and read here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from .case import DTYPES, Compile, Transform
from .errors import AffuzzError

#: The rules a Function may define, as ``Target.rules`` names them.
RULES = ("jvp", "vmap", "generate_vmap_rule", "setup_context", "once_differentiable")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class TargetError(AffuzzError, ValueError):
    """A target (``affuzz check`` command line or finding.json) is not usable; the message says why."""


@dataclass(frozen=True)
class Arg:
    """One argument of ``Function.apply``. ``tensor``: an input of ``f`` (floating point, differentiated),
    ``values`` its sample flattened row-major over ``shape``; ``const``: passed as is, ``literal`` is its
    Python source (``2``, ``(2,)``, ``torch.tensor([[0, 1]])``), written into the script."""

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = "float64"
    values: tuple[float, ...] = ()
    literal: str = ""


@dataclass(frozen=True)
class Target:
    module: str  # imported by the script: ``from <module> import <name>``
    name: str  # the Function's class
    args: tuple[Arg, ...]
    outputs: tuple[int, ...] | None  # indices of the tuple outputs f returns; None: one tensor output
    out_shape: tuple[int, ...]  # what f returns on the sample (several outputs: flattened and concatenated)
    rules: tuple[str, ...] = ()  # of RULES: what the Function defines
    clone: bool = False  # f passes clones of its tensors (the Function modifies its inputs in place)
    label: str = ""  # how reports name it (torch's autograd_function_db: the OpInfo's name)
    constants: tuple[int, ...] = ()  # arguments given as tensors that the backward does not differentiate

    @property
    def n_inputs(self) -> int:
        return sum(a.kind == "tensor" for a in self.args)

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [a.shape for a in self.args if a.kind == "tensor"]

    @property
    def title(self) -> str:
        return self.label or f"{self.module}:{self.name}"

    def conditions(self) -> dict[str, bool]:
        """The Function's side of the known-limitations conditions (``fuzzer.judge.compare``)."""
        return {
            "no_vmap_rule": not ({"vmap", "generate_vmap_rule"} & set(self.rules)),
            "no_jvp_rule": "jvp" not in self.rules,
            "legacy_forward": "setup_context" not in self.rules,
            # the error names exactly this; torch raises it only where it holds
            "saves_input_returned_as_is": "setup_context" in self.rules,
            "f_modifies_output_in_place": False,
            # unknown for a user's forward: an error it could explain stays the user's to see
            "inplace_in_forward": False,
            "custom_vmap_rule": "vmap" in self.rules,
        }


@dataclass(frozen=True)
class CheckCase:
    target: Target
    transforms: tuple[Transform, ...]  # outermost first; () for the rule oracles of order 1
    oracle: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    compile: Compile | None = None  # NOTE [compiled mode]: how the compiled oracle compiles the stack


_TENSOR_LITERAL = re.compile(r"^torch\.tensor\((?P<lit>.*), dtype=torch\.(?P<dtype>[a-z0-9]+)\)$", re.S)


def literal_ok(text: str) -> bool:
    """Whether a const argument's source is a Python literal or a tensor of one: nothing else is ever
    written into a script from JSON."""
    m = _TENSOR_LITERAL.match(text)
    try:
        ast.literal_eval(m.group("lit") if m else text)
    except (ValueError, SyntaxError):
        return False
    return True


def target_to_json(t: Target) -> dict[str, Any]:
    return {
        "module": t.module,
        "name": t.name,
        "label": t.label,
        "args": [
            {"kind": "tensor", "shape": list(a.shape), "dtype": a.dtype, "values": list(a.values)}
            if a.kind == "tensor"
            else {"kind": "const", "literal": a.literal}
            for a in t.args
        ],
        "outputs": None if t.outputs is None else list(t.outputs),
        "out_shape": list(t.out_shape),
        "rules": list(t.rules),
        "clone": t.clone,
        "constants": list(t.constants),
    }


def _ints(v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v):
        raise TargetError(f"{where}: expected a list of non-negative ints")
    return tuple(v)


def target_from_json(d: Any, where: str = "target") -> Target:
    if not isinstance(d, dict) or not {"module", "name", "args", "outputs", "out_shape"} <= set(d):
        raise TargetError(f"{where}: needs module, name, args, outputs and out_shape")
    for key in ("module", "name"):
        if not isinstance(d[key], str) or not _NAME.match(d[key]):
            raise TargetError(f"{where}.{key}: not a dotted Python name: {d[key]!r}")
    args = []
    for i, a in enumerate(d["args"] if isinstance(d["args"], list) else [None]):
        w = f"{where}.args[{i}]"
        if not isinstance(a, dict) or a.get("kind") not in ("tensor", "const"):
            raise TargetError(f"{w}: expected {{'kind': 'tensor' | 'const', ...}}")
        if a["kind"] == "const":
            if not isinstance(a.get("literal"), str) or not literal_ok(a["literal"]):
                raise TargetError(
                    f"{w}.literal: expected a Python literal or torch.tensor(<literal>, dtype=torch.<dtype>)"
                )
            args.append(Arg("const", literal=a["literal"]))
            continue
        shape = _ints(a.get("shape"), f"{w}.shape")
        values = a.get("values")
        n = 1
        for s in shape:
            n *= s
        if not isinstance(values, list) or len(values) != n or not all(isinstance(v, (int, float)) for v in values):
            raise TargetError(f"{w}.values: expected {n} numbers (the shape's size)")
        if a.get("dtype") not in DTYPES:
            raise TargetError(f"{w}.dtype: expected one of {', '.join(DTYPES)}")
        args.append(Arg("tensor", shape, a["dtype"], tuple(float(v) for v in values)))
    rules = d.get("rules", [])
    if not isinstance(rules, list) or not set(rules) <= set(RULES):
        raise TargetError(f"{where}.rules: expected a list of {', '.join(RULES)}")
    outputs = None if d["outputs"] is None else _ints(d["outputs"], f"{where}.outputs")
    return Target(
        d["module"],
        d["name"],
        tuple(args),
        outputs,
        _ints(d["out_shape"], f"{where}.out_shape"),
        tuple(rules),
        bool(d.get("clone", False)),
        str(d.get("label", "")),
        _ints(d.get("constants", []), f"{where}.constants"),
    )
