"""Feature ablation: the same case with one feature tag taken away. Torch-free.

:func:`without` is how a signature learns which features *matter* (see NOTE [signatures] in
:mod:`fuzzer.triage.signature`), and the first set of IR reductions the shrinker builds on. Every variant is
repaired (saved tensors topped up, dead nodes pruned) and validated; a tag that cannot be taken away
without changing what the case is about returns None.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.case import Case, CaseError, Node, Output, View
from ..ir.dataflow import prune, repair_saved, value_provided_by_saved
from ..ir.features import repeated_outputs, returns_none
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


def without(case: Case, tag: str) -> Case | None:
    """``case`` with feature ``tag`` removed, or None where no such variant exists."""
    fn = case.function
    if tag == "output_is_input":
        outs = tuple(Output("view", o.ref, View("view_as")) if o.kind == "input" else o for o in fn.outputs)
        return repaired(replace(case, function=replace(fn, outputs=outs)))
    if tag == "output_is_view":
        return drop_outputs(case, {j for j, o in enumerate(fn.outputs) if o.kind == "view"})
    if tag == "output_is_view_of_output":
        return drop_outputs(case, {j for j, o in enumerate(fn.outputs) if o.kind == "view" and o.ref.startswith("t")})
    if tag == "output_repeated":
        return drop_outputs(case, set(repeated_outputs(case)))
    if tag == "saved_output":

        def as_value(r: str) -> str | None:
            return value_provided_by_saved(fn, r) if r.startswith("o") else r

        def mapped(refs: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(v for r in refs if (v := as_value(r)) is not None)

        function = replace(fn, saved=mapped(fn.saved), on_ctx=mapped(fn.on_ctx), detached=mapped(fn.detached))
        return repaired(replace(case, function=function))
    if tag == "saved_intermediate":
        return repaired(replace(case, function=replace(fn, saved=tuple(r for r in fn.saved if not r.startswith("t")))))
    if tag == "grad_unused":
        return repaired(replace(case, function=replace(fn, unused_grads=())))
    if tag == "backward_returns_none":
        variant = repaired(replace(case, function=replace(fn, none_grads=())))
        return None if variant is None or returns_none(variant) else variant
    if tag == "legacy_forward":
        return repaired(replace(case, function=replace(fn, style="setup_context")))
    if tag == "generate_vmap_rule":
        return repaired(replace(case, function=replace(fn, vmap_rule="custom")))
    if tag == "custom_vmap":
        return repaired(replace(case, function=replace(fn, vmap_rule="generate")))
    off = {
        "custom_jvp": {"jvp_rule": False, "jvp_not_view": False, "jvp_alias": False},
        "jvp_not_view": {"jvp_not_view": False},
        "jvp_alias": {"jvp_alias": False},
        "once_differentiable": {"once_differentiable": False},
        "materialize_grads_false": {"materialize_grads": True},
        "mark_non_differentiable": {"non_differentiable": ()},
        "saved_on_ctx": {"on_ctx": ()},
        "saved_detached": {"detached": ()},
        "non_tensor_output": {"non_tensor_output": False},
        "mark_dirty": {"dirty": ()},
        "custom_gradient": {"grad_rule": "exact"},
    }
    if tag == "inplace_in_forward":  # NOTE [in-place forward]
        nodes = tuple(replace(n, inplace=False) for n in fn.nodes)
        return repaired(replace(case, function=replace(fn, nodes=nodes)))
    if tag == "aliased_inputs":  # NOTE [aliased inputs]
        return repaired(replace(case, f=replace(case.f, apply_args=())))
    if tag == "straight_through":  # NOTE [custom gradients]: a node with its own derivative in its place
        nodes = tuple(Node("mul", (n.args[0], n.args[0])) if n.op == "round" else n for n in fn.nodes)
        return repaired(replace(case, function=replace(fn, nodes=nodes)))
    if tag == "inplace_on_output":
        return repaired(replace(case, f=replace(case.f, inplace=(), inplace_no_grad=False)))
    if tag in off:
        return repaired(replace(case, function=replace(fn, **off[tag])))
    return None
