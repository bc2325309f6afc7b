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
from dataclasses import dataclass, field, replace
from typing import Any

from .case import DTYPES, Compile, Transform
from .errors import AffuzzError

#: The rules a Function may define, as ``Target.rules`` names them.
RULES = ("jvp", "vmap", "generate_vmap_rule", "setup_context", "once_differentiable")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class TargetError(AffuzzError, ValueError):
    """A target (``affuzz check`` command line or finding.json) is not usable; the message says why."""


#: What an argument of a target is (:class:`Arg`).
ARG_KINDS = ("tensor", "const", "import", "given")


@dataclass(frozen=True)
class Arg:
    """One argument of ``Function.apply`` (or of the custom op). ``tensor``: an input of ``f`` (floating
    point, differentiated), ``values`` its sample flattened row-major over ``shape``; ``const``: passed as
    is, ``literal`` is its Python source (``2``, ``(2,)``, ``torch.tensor([[0, 1]])``), written into the
    script; ``import``: a name the script imports (``literal`` is ``pkg.module:name``, e.g. a callable);
    ``given``: item ``literal`` (an int) of the sample the user's ``--inputs-from`` function returned
    (NOTE [check inputs]). ``name``: the forward's parameter it is passed as ('' where unknown)."""

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = "float64"
    values: tuple[float, ...] = ()
    literal: str = ""
    name: str = ""


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
    op: bool = False  # ``name`` is a torch.library custom op (``module.name(...)``), not a Function
    sample: str = ""  # which of the target's samples ``args`` is (NOTE [check inputs])
    not_derivative: tuple[str, ...] = ()  # rules (backward, jvp) declared not to be forward's derivative
    given: str = ""  # ``pkg.module:fn`` of --inputs-from, and which of its samples: ``pkg.module:fn[k]``
    more: tuple[Target, ...] = field(default=(), compare=False, repr=False)  # its other samples
    notes: tuple[str, ...] = field(default=(), compare=False)  # what the command says of its inputs

    @property
    def samples(self) -> tuple[Target, ...]:
        """This target and its other samples, each a target of one sample (NOTE [check inputs])."""
        return (replace(self, more=()), *self.more)

    @property
    def n_inputs(self) -> int:
        return sum(a.kind == "tensor" for a in self.args)

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [a.shape for a in self.args if a.kind == "tensor"]

    @property
    def title(self) -> str:
        return self.label or f"{self.module}:{self.name}"

    def arg_name(self, i: int) -> str:
        """How output names argument ``i`` of ``apply``: its parameter's name, else its position."""
        return self.args[i].name or f"argument {i + 1}"

    @property
    def input_names(self) -> list[str]:
        """The names of ``f``'s inputs (the tensor arguments), for output and repros."""
        return [self.arg_name(i) for i, a in enumerate(self.args) if a.kind == "tensor"]

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
            {"kind": "tensor", "shape": list(a.shape), "dtype": a.dtype, "values": list(a.values), "name": a.name}
            if a.kind == "tensor"
            else {"kind": a.kind, "literal": a.literal, "name": a.name}
            for a in t.args
        ],
        "outputs": None if t.outputs is None else list(t.outputs),
        "out_shape": list(t.out_shape),
        "rules": list(t.rules),
        "clone": t.clone,
        "constants": list(t.constants),
        "op": t.op,
        "sample": t.sample,
        "not_derivative": list(t.not_derivative),
        "given": t.given,
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
        if not isinstance(a, dict) or a.get("kind") not in ARG_KINDS:
            raise TargetError(f"{w}: expected {{'kind': {' | '.join(map(repr, ARG_KINDS))}, ...}}")
        name = a.get("name", "")
        if not isinstance(name, str) or (name and not _NAME.match(name)):
            raise TargetError(f"{w}.name: not a Python name: {name!r}")
        if a["kind"] != "tensor":
            if not isinstance(a.get("literal"), str) or not _ARG_LITERAL[a["kind"]](a["literal"]):
                raise TargetError(f"{w}.literal: expected {_ARG_LITERAL_TEXT[a['kind']]}")
            args.append(Arg(a["kind"], literal=a["literal"], name=name))
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
        args.append(Arg("tensor", shape, a["dtype"], tuple(float(v) for v in values), name=name))
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
        bool(d.get("op", False)),
        str(d.get("sample", "")),
        _names(d.get("not_derivative", []), NOT_DERIVATIVE, f"{where}.not_derivative"),
        _given(d.get("given", ""), f"{where}.given"),
    )


#: Rules a Function may declare deliberately not its forward's derivative (NOTE [check inputs]).
NOT_DERIVATIVE = ("backward", "jvp")
_GIVEN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*\[\d+\]$")


def _names(v: Any, allowed: tuple[str, ...], where: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not set(v) <= set(allowed):
        raise TargetError(f"{where}: expected a list of {', '.join(allowed)}")
    return tuple(v)


def _given(v: Any, where: str) -> str:
    if not isinstance(v, str) or (v and not _GIVEN.match(v)):
        raise TargetError(f"{where}: expected pkg.module:function[k] or ''")
    return v


def _import_ok(text: str) -> bool:
    module, _, name = text.partition(":")
    return bool(_NAME.match(module)) and bool(re.match(r"^[A-Za-z_]\w*$", name))


#: NOTE [check inputs]: what a non-tensor argument's ``literal`` may be, per kind: nothing else is ever
#: written into a script from JSON.
_ARG_LITERAL = {"const": literal_ok, "import": _import_ok, "given": lambda t: t.isdigit()}
_ARG_LITERAL_TEXT = {
    "const": "a Python literal or torch.tensor(<literal>, dtype=torch.<dtype>)",
    "import": "pkg.module:name",
    "given": "the index of an item of the --inputs-from sample",
}
