"""What ``affuzz check`` calls: a Function's ``apply`` or a custom op, with what it defines and its parameters.

NOTE [check custom ops]
Library authors now write ``torch.library.custom_op`` where they used to write an ``autograd.Function``,
so a custom op is a target too: ``affuzz check mypkg.ops:my_op`` (the ``CustomOpDef`` the decorator made;
a module target includes every custom op defined in it), or ``affuzz check torch.ops.ns.name --import
mypkg.ops`` (any op with an autograd kernel, once the module that registers it is imported; the script
then imports that module and calls ``torch.ops.ns.name``). Its inputs come from its schema: every required
``Tensor`` argument a float64 tensor (shapes by trial, NOTE [check inputs]), a ``float`` 0.5, an ``int`` 2,
a ``bool`` False, an optional argument None; ``--inputs`` says otherwise. It is checked like a Function
whose ``setup_context`` is ``register_autograd``'s and which has no jvp rule (the op API has none: forward
AD of an op is torch's to get right), a vmap staticmethod where ``register_vmap`` gave one, and one more
rule oracle, ``opcheck``: ``torch.library.opcheck`` on the op and the sample's arguments (its schema, fake
and autograd registrations against its implementation). A torch without ``torch.library.custom_op``
(before 2.4) cannot say an op: one line, exit 2.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from ..ir.target import Arg, TargetError

#: Schema argument types affuzz check can make a value for, and that value (NOTE [check custom ops]).
SCHEMA_VALUES = {"float": "0.5", "int": "2", "bool": "False", "SymInt": "2", "SymFloat": "0.5"}


def custom_op_class() -> type | None:
    """torch's ``CustomOpDef`` (None on a torch without ``torch.library.custom_op``)."""
    try:
        from torch._library.custom_ops import CustomOpDef
    except ImportError:
        return None
    return CustomOpDef


def is_function(obj: Any) -> bool:
    return inspect.isclass(obj) and issubclass(obj, torch.autograd.Function) and obj is not torch.autograd.Function


def is_custom_op(obj: Any) -> bool:
    cls = custom_op_class()
    return cls is not None and isinstance(obj, cls)


def defined_in(obj: Any) -> tuple[str, str]:
    """(module, name) where a Function class or a custom op is defined: a ``CustomOpDef`` is named after
    the function it decorates (its own ``__module__`` is torch's)."""
    init = getattr(obj, "_init_fn", None) if is_custom_op(obj) else None
    src = init if init is not None else obj
    return str(getattr(src, "__module__", "")), str(getattr(src, "__name__", ""))


@dataclass(frozen=True)
class Callee:
    """A target's callable: ``obj.apply`` of a Function, or a custom op (``obj``: its ``CustomOpDef`` or
    ``torch.ops`` packet); ``name``: how the script names it."""

    obj: Any
    name: str
    op: bool

    def __call__(self, *args: Any) -> Any:
        return self.obj(*args) if self.op else self.obj.apply(*args)

    @property
    def rules(self) -> tuple[str, ...]:
        if not self.op:
            return function_rules(self.obj)
        return ("setup_context", *(("vmap",) if _has_vmap(self) else ()))

    def params(self) -> list[tuple[str, str, bool]]:
        """(name, type, required) of each positional parameter (a Function's forward without ctx)."""
        if self.op:
            return [
                (a.name, str(a.type), not a.has_default_value() and not _optional(a))
                for a in _schema(self).arguments
                if not a.kwarg_only
            ]
        try:
            ps = list(inspect.signature(self.obj.forward).parameters.values())
        except (TypeError, ValueError):
            return [("x", "Tensor", True)]
        if "setup_context" not in self.rules and ps:
            ps = ps[1:]  # forward(ctx, ...)
        pos = [p for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return [(p.name, "Tensor", p.default is p.empty) for p in pos]

    def trial_args(self, shape: tuple[int, ...]) -> list[Arg]:
        """NOTE [check inputs]: one trial's arguments: ``shape`` for every tensor parameter without a
        default; for an op, the schema's values for its other required parameters."""
        out = []
        for name, kind, required in self.params():
            if not required:
                continue
            if kind == "Tensor":
                out.append(Arg("tensor", shape, name=name))
            elif kind in SCHEMA_VALUES:
                out.append(Arg("const", literal=SCHEMA_VALUES[kind], name=name))
            else:
                raise TargetError(f"{self.name}: cannot make a {kind} for parameter {name!r}; say which with --inputs")
        return out


def _optional(a: Any) -> bool:
    return str(a.type).endswith("?")


def _schema(callee: Callee) -> Any:
    obj = callee.obj
    overload = getattr(obj, "_opoverload", None) or getattr(obj, "default", None) or obj
    return overload._schema


def _qualname(callee: Callee) -> str:
    return str(_schema(callee).name)


def _has_vmap(callee: Callee) -> bool:
    if getattr(callee.obj, "_vmap_fn", None) is not None:
        return True
    has = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    return bool(has and has(_qualname(callee), "FuncTorchBatched"))


def has_autograd(callee: Callee) -> bool:
    """Whether the op has an autograd formula (``register_autograd``, or an Autograd kernel)."""
    if getattr(callee.obj, "_backward_fn", None) is not None:
        return True
    has = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    return bool(has and has(_qualname(callee), "Autograd"))


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


def callee_of(obj: Any, name: str, where: str) -> Callee:
    """The callee of ``obj`` (a Function class or a custom op), named ``name`` in scripts; raises
    :class:`TargetError` for anything else, or an op without an autograd formula."""
    if is_function(obj):
        return Callee(obj, name, False)
    if is_custom_op(obj) or isinstance(obj, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        callee = Callee(obj, name, True)
        if not has_autograd(callee):
            raise TargetError(
                f"{where}: the op has no autograd formula (torch.library.register_autograd): nothing to differentiate"
            )
        return callee
    raise TargetError(
        f"{where}: {name} is not a torch.autograd.Function subclass or a torch.library custom op "
        f"(it is {type(obj).__name__})"
    )


def torch_op(spec: str) -> Callee:
    """``torch.ops.ns.name`` (its module imported already, NOTE [check custom ops])."""
    if custom_op_class() is None:
        raise TargetError(
            f"{spec}: torch {torch.__version__} has no torch.library.custom_op (custom ops need torch >= 2.4)"
        )
    _, _, ns, name = (spec.split(".") + ["", "", "", ""])[:4]
    try:
        packet = getattr(getattr(torch.ops, ns), name)
    except (AttributeError, RuntimeError):
        raise TargetError(f"{spec}: no such op: import the module that registers it with --import pkg.module") from None
    return callee_of(packet, spec, spec)
