"""What ``affuzz check`` checks: the user's Functions (``pkg.module:Name`` or a whole module), custom ops
(NOTE [check custom ops] in :mod:`fuzzer.check.ops`) or torch's own ``autograd_function_db``, each with
the inputs ``f`` feeds it (NOTE [check inputs] in :mod:`fuzzer.check.inputs`).
"""

from __future__ import annotations

import importlib
import random
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..codegen.parts import nested
from ..ir.case import DTYPES
from ..ir.target import NOT_DERIVATIVE, Arg, Target, TargetError
from .inputs import TRIAL_SHAPES, VALUE_RANGES, draw, given_samples, parse_inputs
from .ops import Callee, callee_of, custom_op_class, defined_in, function_rules, is_custom_op, is_function, torch_op

DB_MODULE = "torch.testing._internal.autograd_function_db"
#: The class attribute by which a Function declares rules deliberately not its forward's derivative
#: (NOTE [check oracles] in fuzzer/codegen/check_render.py): a library need not import affuzz to say it.
NOT_DERIVATIVE_ATTRIBUTE = "affuzz_not_derivative"


def _import(module: str, where: str) -> Any:
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # `affuzz check mypkg.fns:Fn` from the project root, like pytest
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise TargetError(
            f"{where}: no module named {e.name!r}: run affuzz from the directory that holds it, or add it to PYTHONPATH"
        ) from None
    except Exception as e:  # noqa: BLE001 (the user's module failed to import: say so in one line)
        raise TargetError(f"{where}: importing {module} raised {type(e).__name__}: {e}") from None


def _attr(spec: str, what: str) -> Any:
    """``pkg.module:name`` imported."""
    module, _, name = spec.partition(":")
    if not re.match(r"^[A-Za-z_][\w.]*$", module) or not re.match(r"^[A-Za-z_]\w*$", name):
        raise TargetError(f"{what} {spec}: expected pkg.module:name")
    obj = getattr(_import(module, f"{what} {spec}"), name, None)
    if obj is None:
        raise TargetError(f"{what} {spec}: {module} has no attribute {name!r}")
    return obj


def resolve(
    spec: str,
    inputs: str | None = None,
    *,
    inputs_from: str | None = None,
    not_derivative: tuple[str, ...] = (),
    imports: tuple[str, ...] = (),
    seed: int = 0,
) -> list[Target]:
    """The targets ``spec`` names: ``pkg.module:Name`` (one Function or custom op), ``pkg.module`` (every
    Function and custom op defined in it) or ``torch.ops.ns.name`` (after ``imports``; NOTE [check custom
    ops]). Raises :class:`TargetError` (one line) when the module does not import, the name is neither,
    or the forward rejects every input."""
    kw: dict[str, Any] = {"inputs": inputs, "inputs_from": inputs_from, "not_derivative": not_derivative, "seed": seed}
    for module in imports:
        _import(module, f"--import {module}")
    if spec.startswith("torch.ops."):
        if not imports:
            raise TargetError(f"{spec}: say which module registers it with --import pkg.module")
        return [target_of(torch_op(spec), imports[0], spec=spec, label=spec, **kw)]
    module, _, name = spec.partition(":")
    if not re.match(r"^[A-Za-z_][\w.]*$", module) or (name and not re.match(r"^[A-Za-z_]\w*$", name)):
        raise TargetError(f"{spec}: expected pkg.module:Name, pkg.module or torch.ops.namespace.name")
    mod = _import(module, spec)
    if name:
        obj = getattr(mod, name, None)
        if obj is None:
            old = (
                "" if custom_op_class() is not None else f" (torch {torch.__version__} has no custom ops: torch >= 2.4)"
            )
            raise TargetError(f"{spec}: {module} has no attribute {name!r}{old}")
        return [target_of(callee_of(obj, name, spec), module, spec=spec, **kw)]
    found = [
        callee_of(v, k, spec)
        for k, v in vars(mod).items()
        if (is_function(v) and v.__module__ == mod.__name__) or (is_custom_op(v) and defined_in(v)[0] == mod.__name__)
    ]
    if not found:
        raise TargetError(f"{spec}: no torch.autograd.Function subclass or custom op is defined in {module}")
    return [target_of(c, module, spec=spec, **kw) for c in found]


def _named(args: list[Arg], callee: Callee) -> tuple[Arg, ...]:
    names = [n for n, _, _ in callee.params()]
    return tuple(replace(a, name=a.name or (names[i] if i < len(names) else "")) for i, a in enumerate(args))


def declared_not_derivative(obj: Any, where: str) -> tuple[str, ...]:
    """The rules ``obj`` declares not its forward's derivative (NOT_DERIVATIVE_ATTRIBUTE)."""
    v = getattr(obj, NOT_DERIVATIVE_ATTRIBUTE, ())
    v = (v,) if isinstance(v, str) else tuple(v)
    if not set(v) <= set(NOT_DERIVATIVE):
        raise TargetError(f"{where}: {NOT_DERIVATIVE_ATTRIBUTE} = {v!r}: expected names of {', '.join(NOT_DERIVATIVE)}")
    return v


def target_of(
    callee: Callee | type,
    module: str,
    *,
    spec: str = "",
    inputs: str | None = None,
    inputs_from: str | None = None,
    not_derivative: tuple[str, ...] = (),
    seed: int = 0,
    label: str = "",
) -> Target:
    """The target of ``callee`` (a Function class is taken as its own callee; importable from ``module``)
    on its samples (NOTE [check inputs])."""
    if not isinstance(callee, Callee):
        callee = callee_of(callee, callee.__name__, spec or f"{module}:{callee.__name__}")
    where = spec or f"{module}:{callee.name}"
    declared = tuple(not_derivative) or declared_not_derivative(callee.obj, where)
    base = Target(module, callee.name, (), None, (), callee.rules, label=label, op=callee.op, not_derivative=declared)
    if inputs_from is not None:
        return _given_target(callee, base, inputs_from, where)
    rng = random.Random(f"{seed}:{module}:{callee.name}")
    if inputs is not None:
        candidates = [parse_inputs(inputs)]
    else:
        if not any(required for _, _, required in callee.params()):
            raise TargetError(f"{where}: forward takes no positional inputs; say which with --inputs")
        candidates = [callee.trial_args(s) for s in TRIAL_SHAPES]
    errors = []
    for template in candidates:
        first = replace(base, args=_named(draw(template, rng, VALUE_RANGES[0]), callee), sample=VALUE_RANGES[0][0])
        try:
            first = undifferentiated_as_constants(callee, probe(callee, first))
        except TargetError as e:
            errors.append(str(e))
            continue
        more, notes = [], []
        for value_range in VALUE_RANGES[1:]:
            args = list(_named(draw(template, rng, value_range), callee))
            for i in first.constants:  # NOTE [check inputs]: not differentiated in any sample
                args[i] = _as_constant(args[i])
            try:
                more.append(probe(callee, replace(first, args=tuple(args), sample=value_range[0])))
            except TargetError as e:
                notes.append(f"sample {value_range[0]} left out (outside the forward's domain: {e})")
        return replace(first, more=tuple(more), notes=tuple(notes))
    shapes = "; ".join(errors[:2])
    raise TargetError(
        f"{where}: forward rejects every input tried ({shapes}); say which with --inputs, e.g. --inputs 3x4"
    )


def _given_target(callee: Callee, base: Target, inputs_from: str, where: str) -> Target:
    """NOTE [check inputs]: the target on the samples of ``--inputs-from``."""
    fn = _attr(inputs_from, "--inputs-from")
    targets, notes = [], []
    for k, args in enumerate(given_samples(inputs_from, fn)):
        t = replace(base, args=_named(args, callee), sample=f"inputs-from[{k}]", given=f"{inputs_from}[{k}]")
        try:
            targets.append(probe(callee, t))
        except TargetError as e:
            notes.append(f"sample {k} left out ({e})")
    if not targets:
        raise TargetError(
            f"{where}: forward rejects every sample of --inputs-from {inputs_from} ({'; '.join(notes[:2])})"
        )
    return replace(targets[0], more=tuple(targets[1:]), notes=tuple(notes))


def _as_constant(a: Arg) -> Arg:
    if a.kind != "tensor":
        return a
    return Arg("const", literal=f"torch.tensor({nested(list(a.values), a.shape)}, dtype=torch.{a.dtype})", name=a.name)


_GIVEN: dict[str, list[Any]] = {}  # --inputs-from spec -> its samples, called once per process


def _value(a: Arg, target: Target) -> Any:
    if a.kind == "tensor":
        return torch.tensor(a.values, dtype=getattr(torch, a.dtype)).reshape(a.shape)
    if a.kind == "import":
        return _attr(a.literal, "--inputs")
    if a.kind == "given":
        spec, _, k = target.given.partition("[")
        if spec not in _GIVEN:
            _GIVEN[spec] = list(_attr(spec, "--inputs-from")())
        return _GIVEN[spec][int(k.rstrip("]"))][int(a.literal)]
    return eval(a.literal, {"torch": torch})  # noqa: S307 (a literal from --inputs or repr of torch's own sample)


def probe(callee: Callee | type, target: Target) -> Target:
    """``target`` with what calling the callee on its sample says: which outputs ``f`` keeps (floating-point
    ones that are differentiable: NOTE [check oracles], an output marked non-differentiable is not compared
    with finite differences), their shape, and whether ``f`` must pass clones (NOTE [check inputs]).
    Raises :class:`TargetError` if it fails."""
    if not isinstance(callee, Callee):
        callee = callee_of(callee, callee.__name__, target.title)
    shapes = ", ".join("x".join(map(str, a.shape)) or "scalar" for a in target.args if a.kind == "tensor")
    for clone in (False, True):
        xs = [_value(a, target).requires_grad_() if a.kind == "tensor" else _value(a, target) for a in target.args]
        try:
            out = callee(*[x.clone() if clone and isinstance(x, torch.Tensor) else x for x in xs])
        except Exception as e:  # noqa: BLE001 (the user's forward: any error means "not these inputs")
            if not clone and re.search(r"leaf Variable that requires grad .* in-place|in-place operation", str(e)):
                continue
            raise TargetError(
                f"{shapes}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            ) from None
        if isinstance(out, torch.Tensor):
            kept, outputs = ([out], None) if out.requires_grad else ([], None)
        elif isinstance(out, (tuple, list)):
            outputs = tuple(
                j
                for j, o in enumerate(out)
                if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad
            )
            kept = [out[j] for j in outputs]
        else:
            kept, outputs = [], None
        if not kept:
            raise TargetError(
                f"{shapes}: forward returned no differentiable floating-point tensor ({type(out).__name__})"
            )
        if not all(bool(torch.isfinite(o).all()) for o in kept):
            raise TargetError(f"{shapes}: forward returned non-finite values")
        out_shape = tuple(kept[0].shape) if len(kept) == 1 else (sum(o.numel() for o in kept),)
        return replace(target, outputs=outputs, out_shape=out_shape, clone=clone)
    raise TargetError(f"{shapes}: forward modifies its input in place and fails on a clone too")


def undifferentiated_as_constants(callee: Callee, target: Target) -> Target:
    """NOTE [check inputs]: a tensor argument whose gradient the backward returns as None is not one the
    Function differentiates (the autograd.Function docs: None for inputs that need no gradient), so ``f``
    passes it as a constant instead of differentiating it; unless that would leave ``f`` no input, or the
    backward raises (the rule oracles will show that)."""
    xs = [_value(a, target).requires_grad_() if a.kind == "tensor" else _value(a, target) for a in target.args]
    tensors = [x for a, x in zip(target.args, xs, strict=True) if a.kind == "tensor"]
    try:
        out = callee(*[x.clone() if target.clone and isinstance(x, torch.Tensor) else x for x in xs])
        outs = [out] if isinstance(out, torch.Tensor) else [out[j] for j in target.outputs or ()]
        total = sum(o.sum() for o in outs if o.requires_grad)
        grads = torch.autograd.grad(total, tensors, allow_unused=True) if isinstance(total, torch.Tensor) else []
    except Exception:  # noqa: BLE001 (the user's backward: the rule oracles report it)
        return target
    unused = {i for i, g in enumerate(grads) if g is None}
    if not unused or len(unused) == len(tensors):
        return target
    args, k, dropped = [], 0, []
    for i, a in enumerate(target.args):
        if a.kind == "tensor":
            if k in unused:
                a = _as_constant(a)
                dropped.append(i)
            k += 1
        args.append(a)
    return replace(target, args=tuple(args), constants=tuple(dropped))


def torch_db(*, where: str = "--torch-db") -> list[Target]:
    """Every Function of torch's ``autograd_function_db`` with its first sample (float64)."""
    try:
        db = importlib.import_module(DB_MODULE)
    except ModuleNotFoundError as e:
        package = {"yaml": "pyyaml"}.get(str(e.name), e.name)
        raise TargetError(
            f"{where}: importing {DB_MODULE} needs {e.name!r}, which is not installed: "
            f"pip install {package} (or pip install 'affuzz[torchdb]')"
        ) from None
    targets = []
    for op in db.autograd_function_db:
        cls = getattr(op.op, "__self__", None)
        if not is_function(cls):  # a lambda around apply: the Function it names
            names = getattr(getattr(op.op, "__code__", None), "co_names", ())
            cls = next((getattr(db, n) for n in names if is_function(getattr(db, n, None))), None)
        if cls is None:
            continue
        sample = next(iter(op.sample_inputs("cpu", torch.float64, requires_grad=False)))
        args = [_arg(v) for v in (sample.input, *sample.args)]
        base = Target(DB_MODULE, cls.__name__, tuple(args), None, (), function_rules(cls), label=op.name)
        targets.append(probe(cls, base))
    return targets


def _arg(v: Any) -> Arg:
    if isinstance(v, torch.Tensor) and v.is_floating_point():
        dtype = str(v.dtype).removeprefix("torch.")
        dtype = dtype if dtype in DTYPES else "float64"
        return Arg("tensor", tuple(v.shape), dtype, tuple(float(x) for x in v.detach().reshape(-1).tolist()))
    if isinstance(v, torch.Tensor):
        return Arg("const", literal=f"torch.tensor({v.tolist()!r}, dtype=torch.{str(v.dtype).removeprefix('torch.')})")
    return Arg("const", literal=repr(v))
