"""What a Function written as a ``torch.library.custom_op`` can say, and its ``autograd.Function`` twin.
Torch-free.

NOTE [custom op mode]
PyTorch tells library authors to write a differentiable op as ``torch.library.custom_op`` with
``register_autograd`` (a ``setup_context`` and a ``backward`` with the Function's semantics),
``register_fake`` and ``register_vmap`` rather than as an ``autograd.Function``. A case whose Function
has ``style="custom_op"`` is that Function written so: forward is the op's implementation (its Python
floats schema arguments), ``setup_context`` and ``backward`` go to ``register_autograd``, a hand-written
vmap rule (which calls the op per sample) to ``register_vmap``, and a fake implementation returns empty
tensors of the base shape (every output is a node output: elementwise, so of the base shape). Every
oracle runs on such a case with the op in place of the Function; the oracle ``custom_op_vs_function``
(NOTE [oracles]) compares the op with its *twin*, the same Function as an ``autograd.Function``
(:func:`function_twin`), under the same plain-autograd stack.

The op must say exactly what the Function does, or the comparison would report differences affuzz made
itself. What the custom op API cannot say is one row each of :data:`UNSAYABLE`, with the reason; a
Function with any of them is never written as an op (validation refuses the case, the mode leaves it
out). A legacy ``forward(ctx, ...)`` Function is written as its ``setup_context`` form, which computes
the same with the same rules (the op has no style of its own).

The twin is the Function in ``setup_context`` style, with the op's rules and no others: no jvp rule
(the op cannot register one), so under forward-mode AD the twin raises the documented "must implement
the jvp function" error, which the op owes too (NOTE [custom op promises] in fuzzer/judge/compare.py);
and, where the op has no vmap rule and the stack vmaps, a hand-written rule that applies the Function per sample and stacks
the results: an op without ``register_vmap`` is batched by torch's fallback, a loop over the samples
that stacks what the op returns for each, which is what that rule does (fresh outputs included, so an
in-place change of one does not reach what the op saved, on either side).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .case import Case, FunctionDef
from .transforms import transform_kind


@dataclass(frozen=True)
class Unsayable:
    """One thing a Function can do that a custom op cannot say (NOTE [custom op mode])."""

    name: str
    holds: Callable[[FunctionDef], bool]
    reason: str


def _repeated(fn: FunctionDef) -> bool:
    refs = [o.ref for o in fn.outputs if o.kind == "node"]
    return len(refs) != len(set(refs))


#: NOTE [custom op mode]: one row per feature of a Function the custom op API has no way to say.
UNSAYABLE: tuple[Unsayable, ...] = (
    Unsayable(
        "output_aliases_input",
        lambda fn: any(o.kind == "input" or (o.kind == "view" and o.ref.startswith("x")) for o in fn.outputs),
        "a custom op's outputs may not alias its inputs (torch.library.custom_op: returning an input or a view of one is an error)",
    ),
    Unsayable(
        "output_is_view",
        lambda fn: any(o.kind == "view" for o in fn.outputs),
        "a custom op returns new tensors: an output that is a view of another output aliases it",
    ),
    Unsayable(
        "output_repeated", _repeated, "one tensor returned twice: two outputs of a custom op that alias each other"
    ),
    Unsayable(
        "mark_dirty",
        lambda fn: bool(fn.dirty),
        "mark_dirty returns the modified input: mutates_args ops return no input",
    ),
    Unsayable("jvp_rule", lambda fn: fn.jvp_rule, "torch.library registers no forward-mode (jvp) rule for a custom op"),
    Unsayable(
        "generate_vmap_rule",
        lambda fn: fn.vmap_rule == "generate",
        "register_vmap takes a hand-written rule; there is no generate_vmap_rule for a custom op",
    ),
    Unsayable(
        "once_differentiable",
        lambda fn: fn.once_differentiable,
        "register_autograd's backward has no once_differentiable form in the custom op API",
    ),
    Unsayable(
        "materialize_grads_false",
        lambda fn: not fn.materialize_grads,
        "set_materialize_grads is not part of register_autograd's documented ctx",
    ),
    Unsayable(
        "mark_non_differentiable",
        lambda fn: bool(fn.non_differentiable),
        "mark_non_differentiable is not part of register_autograd's documented ctx",
    ),
    Unsayable(
        "saved_on_ctx",
        lambda fn: bool(fn.on_ctx),
        "register_autograd's docs say tensors are saved with ctx.save_for_backward, not kept on ctx",
    ),
    Unsayable(
        "non_tensor_output",
        lambda fn: fn.non_tensor_output,
        "a custom op's schema returns tensors only",
    ),
)
UNSAYABLE_NAMES = tuple(u.name for u in UNSAYABLE)


def unsayable(fn: FunctionDef) -> tuple[str, ...]:
    """The rows of :data:`UNSAYABLE` that hold for ``fn`` (empty: ``fn`` can be written as a custom op)."""
    return tuple(u.name for u in UNSAYABLE if u.holds(fn))


def unsayable_reason(name: str) -> str:
    """The reason of row ``name``; an unknown name raises ``KeyError``."""
    for u in UNSAYABLE:
        if u.name == name:
            return u.reason
    raise KeyError(f"unknown custom-op limitation {name!r} (known: {', '.join(UNSAYABLE_NAMES)})")


def as_custom_op(case: Case) -> Case | None:
    """``case`` with its Function written as a custom op, or None where the op cannot say what the Function
    does (NOTE [custom op mode])."""
    fn = case.function
    if fn.style == "custom_op":
        return case
    if unsayable(fn):
        return None
    return replace(case, function=replace(fn, style="custom_op"))


def function_twin(case: Case) -> FunctionDef:
    """The ``autograd.Function`` twin of a custom-op case's Function (NOTE [custom op mode]): setup_context
    style, with a per-sample vmap rule where the op has none and the stack vmaps."""
    fn = case.function
    vmaps = any(transform_kind(t.name).vmaps for t in case.transforms)
    return replace(fn, style="setup_context", vmap_rule="custom" if fn.vmap_rule == "none" and vmaps else fn.vmap_rule)
