"""What ``affuzz check`` checks: the user's Functions (``pkg.module:Name`` or a whole module) or torch's own
``autograd_function_db``, each with the inputs ``f`` feeds it.

NOTE [check inputs]
A target's inputs are found once, before anything is judged: from ``--inputs`` (``3x4,4:float32,=2``: a
tensor per shape, ``=`` a Python literal passed as is), or by trial: the forward's positional parameters
(those without a default) all get one shape, tried in :data:`TRIAL_SHAPES` order, and the first call that
returns a finite floating-point tensor (or a tuple holding some) wins. A Function that modifies its input in
place (``mark_dirty``) cannot be applied to a leaf that requires grad, so a call that fails with autograd's
"leaf Variable ... in-place" error is retried with ``f`` passing clones. Samples are uniform in [0.5, 1.5]
(seeded): positive, so ``sqrt``/``log``-like forwards stay finite. torch's db brings its own samples
(``OpInfo.sample_inputs``, float64): its floating-point tensors are ``f``'s inputs, everything else (dims,
indices, index tensors) is a constant of ``f``. A tensor argument whose gradient the Function's backward
returns as None (on the sample) is one it does not differentiate: ``f`` passes it as a constant, and the
command says so (``Target.constants``), rather than report its "gradient" as wrong.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import random
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..codegen.parts import nested
from ..ir.case import DTYPES
from ..ir.target import Arg, Target, TargetError

TRIAL_SHAPES = ((3,), (2, 3), (), (4, 4))
DB_MODULE = "torch.testing._internal.autograd_function_db"
_SPEC_ITEM = re.compile(r"^(?:(?P<shape>\(\)|scalar|\d+(?:x\d+)*)(?::(?P<dtype>float32|float64))?|=(?P<literal>.+))$")


def function_rules(cls: type) -> tuple[str, ...]:
    """Which rules ``cls`` defines (``fuzzer.ir.target.RULES``)."""
    base = torch.autograd.Function
    rules = []
    if getattr(cls, "jvp", None) is not getattr(base, "jvp", None):
        rules.append("jvp")
    if getattr(cls, "vmap", None) is not getattr(base, "vmap", None):
        rules.append("vmap")
    if getattr(cls, "generate_vmap_rule", False):
        rules.append("generate_vmap_rule")
    if getattr(cls, "setup_context", None) is not getattr(base, "setup_context", None):
        rules.append("setup_context")
    if hasattr(getattr(cls, "backward", None), "__wrapped__"):  # functools.wraps of @once_differentiable
        rules.append("once_differentiable")
    return tuple(rules)


def _is_function(obj: Any) -> bool:
    return inspect.isclass(obj) and issubclass(obj, torch.autograd.Function) and obj is not torch.autograd.Function


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


def resolve(spec: str, inputs: str | None = None, *, seed: int = 0) -> list[Target]:
    """The targets ``spec`` names: ``pkg.module:Name`` (one Function) or ``pkg.module`` (every Function
    defined in it). Raises :class:`TargetError` (one line) when the module does not import, the name is
    not an ``autograd.Function``, or the forward rejects every input."""
    module, _, name = spec.partition(":")
    if not re.match(r"^[A-Za-z_][\w.]*$", module) or (name and not re.match(r"^[A-Za-z_]\w*$", name)):
        raise TargetError(f"{spec}: expected pkg.module:FunctionName or pkg.module")
    mod = _import(module, spec)
    if name:
        obj = getattr(mod, name, None)
        if obj is None:
            raise TargetError(f"{spec}: {module} has no attribute {name!r}")
        if not _is_function(obj):
            raise TargetError(f"{spec}: {name} is not a torch.autograd.Function subclass (it is {type(obj).__name__})")
        classes = [obj]
    else:
        classes = [v for v in vars(mod).values() if _is_function(v) and v.__module__ == mod.__name__]
        if not classes:
            raise TargetError(f"{spec}: no torch.autograd.Function subclass is defined in {module}")
    return [target_of(cls, module, spec=spec, inputs=inputs, seed=seed) for cls in classes]


def parse_inputs(text: str) -> list[Arg]:
    """``--inputs``: comma-separated ``3x4`` (a float64 tensor), ``3x4:float32``, ``()`` or ``scalar`` (a
    0-dim tensor), ``=LITERAL`` (a Python literal passed as is)."""
    args = []
    for item in [s.strip() for s in text.split(",")] if text.strip() else []:
        m = _SPEC_ITEM.match(item)
        if m is None:
            raise TargetError(f"--inputs: cannot read {item!r} (expected e.g. 3x4, 3x4:float32, scalar or =2)")
        if m.group("literal") is not None:
            try:
                ast.literal_eval(m.group("literal"))
            except (ValueError, SyntaxError):
                raise TargetError(f"--inputs: {item!r} is not a Python literal") from None
            args.append(Arg("const", literal=m.group("literal")))
            continue
        shape = () if m.group("shape") in ("()", "scalar") else tuple(int(s) for s in m.group("shape").split("x"))
        args.append(Arg("tensor", shape, m.group("dtype") or "float64"))
    if not any(a.kind == "tensor" for a in args):
        raise TargetError("--inputs: name at least one tensor (e.g. 3x4)")
    return args


def _sampled(args: list[Arg], rng: random.Random) -> list[Arg]:
    out = []
    for a in args:
        if a.kind == "tensor" and not a.values:
            n = 1
            for s in a.shape:
                n *= s
            a = Arg("tensor", a.shape, a.dtype, tuple(round(rng.uniform(0.5, 1.5), 4) for _ in range(n)))
        out.append(a)
    return out


def _positional(cls: type) -> tuple[int, int]:
    """(required, total) positional parameters of ``cls.forward``, ctx excluded for a legacy forward."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())
    except (TypeError, ValueError):
        return 1, 1
    if "setup_context" not in function_rules(cls) and params:
        params = params[1:]  # forward(ctx, ...)
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sum(p.default is p.empty for p in pos), len(pos)


def target_of(
    cls: type, module: str, *, spec: str = "", inputs: str | None = None, seed: int = 0, label: str = ""
) -> Target:
    """The target of Function ``cls`` (importable as ``module``.``cls.__name__``) on its inputs (NOTE [check
    inputs])."""
    rng = random.Random(f"{seed}:{module}:{cls.__name__}")
    where = spec or f"{module}:{cls.__name__}"
    if inputs is not None:
        candidates = [_sampled(parse_inputs(inputs), rng)]
    else:
        required, _ = _positional(cls)
        if required == 0:
            raise TargetError(f"{where}: forward takes no positional inputs; say which with --inputs")
        candidates = [_sampled([Arg("tensor", s)] * required, rng) for s in TRIAL_SHAPES]
    errors = []
    for args in candidates:
        base = Target(module, cls.__name__, tuple(args), None, (), function_rules(cls), label=label)
        try:
            return undifferentiated_as_constants(cls, probe(cls, base))
        except TargetError as e:
            errors.append(str(e))
    shapes = "; ".join(errors[:2])
    raise TargetError(
        f"{where}: forward rejects every input tried ({shapes}); say which with --inputs, e.g. --inputs 3x4"
    )


def _value(a: Arg) -> Any:
    if a.kind == "tensor":
        return torch.tensor(a.values, dtype=getattr(torch, a.dtype)).reshape(a.shape)
    return eval(a.literal, {"torch": torch})  # noqa: S307 (a literal from --inputs or repr of torch's own sample)


def probe(cls: type, target: Target) -> Target:
    """``target`` with what calling ``cls`` on its sample says: which outputs ``f`` keeps, their shape,
    and whether ``f`` must pass clones (NOTE [check inputs]). Raises :class:`TargetError` if it fails."""
    shapes = ", ".join("x".join(map(str, a.shape)) or "scalar" for a in target.args if a.kind == "tensor")
    for clone in (False, True):
        args = [_value(a) for a in target.args]
        xs = [a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        try:
            out = cls.apply(*[x.clone() if clone and isinstance(x, torch.Tensor) else x for x in xs])
        except Exception as e:  # noqa: BLE001 (the user's forward: any error means "not these inputs")
            if not clone and re.search(r"leaf Variable that requires grad .* in-place|in-place operation", str(e)):
                continue
            raise TargetError(
                f"{shapes}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            ) from None
        if isinstance(out, torch.Tensor):
            kept, outputs = [out], None
        elif isinstance(out, (tuple, list)):
            outputs = tuple(j for j, o in enumerate(out) if isinstance(o, torch.Tensor) and o.is_floating_point())
            kept = [out[j] for j in outputs]
        else:
            kept, outputs = [], None
        if not kept:
            raise TargetError(f"{shapes}: forward returned no floating-point tensor ({type(out).__name__})")
        if not all(bool(torch.isfinite(o).all()) for o in kept):
            raise TargetError(f"{shapes}: forward returned non-finite values")
        out_shape = tuple(kept[0].shape) if len(kept) == 1 else (sum(o.numel() for o in kept),)
        return replace(target, outputs=outputs, out_shape=out_shape, clone=clone)
    raise TargetError(f"{shapes}: forward modifies its input in place and fails on a clone too")


def undifferentiated_as_constants(cls: type, target: Target) -> Target:
    """NOTE [check inputs]: a tensor argument whose gradient the backward returns as None is not one the
    Function differentiates (the autograd.Function docs: None for inputs that need no gradient), so ``f``
    passes it as a constant instead of differentiating it; unless that would leave ``f`` no input, or the
    backward raises (the rule oracles will show that)."""
    xs = [_value(a).requires_grad_() if a.kind == "tensor" else _value(a) for a in target.args]
    tensors = [x for a, x in zip(target.args, xs, strict=True) if a.kind == "tensor"]
    try:
        out = cls.apply(*[x.clone() if target.clone and isinstance(x, torch.Tensor) else x for x in xs])
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
                a = Arg("const", literal=f"torch.tensor({nested(list(a.values), a.shape)}, dtype=torch.{a.dtype})")
                dropped.append(i)
            k += 1
        args.append(a)
    return replace(target, args=tuple(args), constants=tuple(dropped))


def reprobe(target: Target) -> Target:
    """``target`` after its sample changed (shrinking): the output shape again."""
    cls = getattr(_import(target.module, target.title), target.name)
    return probe(cls, target)


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
        if not _is_function(cls):  # a lambda around apply: the Function it names
            names = getattr(getattr(op.op, "__code__", None), "co_names", ())
            cls = next((getattr(db, n) for n in names if _is_function(getattr(db, n, None))), None)
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
