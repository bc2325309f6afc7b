"""Feature ablation: the same case with one feature tag taken away. Torch-free.

:func:`without` is how a signature learns which features *matter* (see NOTE [signatures] in
:mod:`fuzzer.triage.signature`), and the first set of IR reductions the shrinker builds on. Every variant is
repaired (saved tensors topped up, dead nodes pruned) and validated; a tag that cannot be taken away
without changing what the case is about returns None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..ir.case import Case, CaseError, Node, Output, View
from ..ir.dataflow import prune, repair_saved, value_provided_by_saved
from ..ir.features import feature, repeated_outputs, returns_none
from ..ir.shapes import output_shapes
from ..ir.validate import validate


def repaired(case: Case) -> Case | None:
    """``case`` after an edit, made whole again: saved values repaired, dead nodes pruned, ctx lists kept to
    what is saved; None when it is no longer a valid case."""
    fn = prune(repair_saved(case.function))
    saved = tuple(dict.fromkeys(fn.saved))
    fn = replace(
        fn,
        saved=saved,
        on_ctx=tuple(r for r in fn.on_ctx if r in saved),
        detached=tuple(r for r in fn.detached if r in saved),
    )
    try:
        return validate(replace(case, function=fn))
    except CaseError:
        return None


def drop_outputs(case: Case, drop: set[int]) -> Case | None:
    """Remove outputs ``drop``; renumbers references; None if ``f`` would use nothing."""
    fn = case.function
    keep = [j for j in range(len(fn.outputs)) if j not in drop]
    if not keep:
        return None
    new_index = {old: new for new, old in enumerate(keep)}
    kept_nodes = {fn.outputs[j].ref for j in keep if fn.outputs[j].kind == "node"}
    outputs = [fn.outputs[j] for j in keep]
    if any(o.kind == "view" and o.ref.startswith("t") and o.ref not in kept_nodes for o in outputs):
        return None  # a view of a dropped node output would no longer be a view of an output
    rename: dict[str, str | None] = {}
    for r in fn.saved:
        if r.startswith("o"):
            j = int(r[1:])
            rename[r] = value_provided_by_saved(fn, r) if j in drop else f"o{new_index[j]}"
        else:
            rename[r] = r
    saved = tuple(dict.fromkeys(v for r in fn.saved if (v := rename[r]) is not None))

    def keep_saved(refs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for r in refs if (v := rename.get(r)) is not None and v in saved))

    uses = tuple(new_index[j] for j in case.f.uses if j in new_index)
    if not uses:
        return None
    fn = replace(
        fn,
        outputs=tuple(outputs),
        saved=saved,
        on_ctx=keep_saved(fn.on_ctx),
        detached=keep_saved(fn.detached),
        unused_grads=tuple(new_index[j] for j in fn.unused_grads if j in new_index),
        non_differentiable=tuple(new_index[j] for j in fn.non_differentiable if j in new_index),
    )
    shapes = output_shapes(fn, tuple(case.inputs.shape))
    combine = case.f.combine if len({shapes[j] for j in uses}) == 1 else "sum"
    inplace = tuple(new_index[j] for j in case.f.inplace if j in new_index)
    f = replace(
        case.f, uses=uses, combine=combine, inplace=inplace, inplace_no_grad=case.f.inplace_no_grad and bool(inplace)
    )
    return repaired(replace(case, function=fn, f=f))


def _set(**fields: object) -> Callable[[Case], Case | None]:
    """The ablation that sets the Function's ``fields``."""
    return lambda case: repaired(replace(case, function=replace(case.function, **fields)))


def _without_input_output(case: Case) -> Case | None:
    fn = case.function
    outs = tuple(Output("view", o.ref, View("view_as")) if o.kind == "input" else o for o in fn.outputs)
    return repaired(replace(case, function=replace(fn, outputs=outs)))


def _without_saved_output(case: Case) -> Case | None:
    fn = case.function

    def mapped(refs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v for r in refs if (v := value_provided_by_saved(fn, r) if r.startswith("o") else r) is not None)

    function = replace(fn, saved=mapped(fn.saved), on_ctx=mapped(fn.on_ctx), detached=mapped(fn.detached))
    return repaired(replace(case, function=function))


def _without_saved_intermediate(case: Case) -> Case | None:
    fn = case.function
    return repaired(replace(case, function=replace(fn, saved=tuple(r for r in fn.saved if not r.startswith("t")))))


def _without_none_grads(case: Case) -> Case | None:
    variant = repaired(replace(case, function=replace(case.function, none_grads=())))
    return None if variant is None or returns_none(variant) else variant


def _without_inplace_forward(case: Case) -> Case | None:  # NOTE [in-place forward]
    nodes = tuple(replace(n, inplace=False) for n in case.function.nodes)
    return repaired(replace(case, function=replace(case.function, nodes=nodes)))


def _without_straight_through(case: Case) -> Case | None:
    # NOTE [custom gradients]: a node with its own derivative in its place
    nodes = tuple(Node("mul", (n.args[0], n.args[0])) if n.op == "round" else n for n in case.function.nodes)
    return repaired(replace(case, function=replace(case.function, nodes=nodes)))


#: How a case loses each tag (NOTE [feature tags] in :mod:`fuzzer.ir.features`): every tag whose row has no
#: ``no_ablation`` reason, and no other (a test checks both ways).
ABLATIONS: dict[str, Callable[[Case], Case | None]] = {
    "output_is_input": _without_input_output,
    "output_is_view": lambda c: drop_outputs(c, {j for j, o in enumerate(c.function.outputs) if o.kind == "view"}),
    "output_is_view_of_output": lambda c: drop_outputs(
        c, {j for j, o in enumerate(c.function.outputs) if o.kind == "view" and o.ref.startswith("t")}
    ),
    "output_repeated": lambda c: drop_outputs(c, set(repeated_outputs(c))),
    "saved_output": _without_saved_output,
    "saved_intermediate": _without_saved_intermediate,
    "saved_on_ctx": _set(on_ctx=()),
    "saved_detached": _set(detached=()),
    "grad_unused": _set(unused_grads=()),
    "backward_returns_none": _without_none_grads,
    "legacy_forward": _set(style="setup_context"),
    "custom_op": _set(style="setup_context"),  # NOTE [custom op mode]: the op's autograd.Function form
    "generate_vmap_rule": _set(vmap_rule="custom"),
    "custom_vmap": _set(vmap_rule="generate"),
    "custom_jvp": _set(jvp_rule=False, jvp_not_view=False, jvp_alias=False),
    "mark_dirty": _set(dirty=()),
    "mark_non_differentiable": _set(non_differentiable=()),
    "once_differentiable": _set(once_differentiable=False),
    "materialize_grads_false": _set(materialize_grads=True),
    "non_tensor_output": _set(non_tensor_output=False),
    "inplace_on_output": lambda c: repaired(replace(c, f=replace(c.f, inplace=(), inplace_no_grad=False))),
    "jvp_not_view": _set(jvp_not_view=False),
    "jvp_alias": _set(jvp_alias=False),
    "custom_gradient": _set(grad_rule="exact"),
    "straight_through": _without_straight_through,
    "inplace_in_forward": _without_inplace_forward,
    "aliased_inputs": lambda c: repaired(replace(c, f=replace(c.f, apply_args=()))),  # NOTE [aliased inputs]
}


def without(case: Case, tag: str) -> Case | None:
    """``case`` with feature ``tag`` removed, or None where no such variant exists (the tag's row says why
    there is none, or this case's variant is not a valid case). An unknown tag raises ``KeyError``."""
    if feature(tag).no_ablation is not None:
        return None
    return ABLATIONS[tag](case)
