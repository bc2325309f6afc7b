"""Feature tags: which parts of the autograd.Function API and of the generated space a case exercises.

Tags are the vocabulary of ``finding.json`` ``features`` and of signatures. The full list is fixed here
so that later vocabulary (custom_jvp, mark_dirty, ...) is reserved and spelled one way; :func:`features`
returns only tags that apply to a case. Torch-free.
"""

from __future__ import annotations

from .case import STRAIGHT_THROUGH_OPS, Case
from .dataflow import forward_nodes, grad_flows
from .validity import backward_second_order_issues, jvp_alias, jvp_not_view, sides

#: Every tag affuzz knows, in report order. :data:`RESERVED` ones name vocabulary the case IR cannot
#: express yet; :func:`features` never returns them.
ALL_FEATURES = (
    "output_is_input",
    "output_is_view",
    "output_is_view_of_output",
    "output_repeated",
    "saved_input",
    "saved_output",
    "saved_intermediate",
    "saved_on_ctx",
    "saved_detached",
    "grad_unused",
    "backward_returns_none",
    "legacy_forward",
    "generate_vmap_rule",
    "custom_vmap",
    "custom_jvp",
    "mark_dirty",
    "mark_non_differentiable",
    "once_differentiable",
    "materialize_grads_false",
    "non_tensor_input",
    "non_tensor_output",
    "inplace_on_output",
    "jvp_not_view",
    "jvp_alias",
    "custom_gradient",
    "straight_through",
    "inplace_in_forward",
    "aliased_inputs",
)


RESERVED: tuple[str, ...] = ()


def features(case: Case) -> tuple[str, ...]:
    """All tags that apply to ``case``, in :data:`ALL_FEATURES` order."""
    fn = case.function
    tags: set[str] = set()
    node_outputs = {o.ref for o in fn.outputs if o.kind == "node"}
    if repeated_outputs(case):
        tags.add("output_repeated")
    for o in fn.outputs:
        if o.kind == "input":
            tags.add("output_is_input")
        elif o.kind == "view":
            tags.add("output_is_view")
            if o.ref in node_outputs:
                tags.add("output_is_view_of_output")
    for r in fn.saved:
        tags.add({"x": "saved_input", "o": "saved_output", "t": "saved_intermediate"}[r[0]])
    if fn.unused_grads:
        tags.add("grad_unused")
    if returns_none(case):
        tags.add("backward_returns_none")
    if fn.style == "legacy":
        tags.add("legacy_forward")
    if fn.vmap_rule == "generate":
        tags.add("generate_vmap_rule")
    elif fn.vmap_rule in ("custom", "custom_wrong"):
        tags.add("custom_vmap")
    flags = {
        "custom_jvp": fn.jvp_rule,
        "once_differentiable": fn.once_differentiable,
        "materialize_grads_false": not fn.materialize_grads,
        "mark_non_differentiable": bool(fn.non_differentiable),
        "saved_on_ctx": bool(fn.on_ctx),
        "saved_detached": bool(fn.detached),
        "non_tensor_output": fn.non_tensor_output,
        "non_tensor_input": bool(fn.scalars),
        "mark_dirty": bool(fn.dirty),
        "jvp_not_view": jvp_not_view(fn),
        "jvp_alias": jvp_alias(fn),
        # NOTE [custom gradients]: a rule only where a computed output exists for it to act on
        "custom_gradient": fn.grad_rule != "exact" and any(o.ref.startswith("t") for o in fn.outputs),
        "straight_through": any(n.op in STRAIGHT_THROUGH_OPS for n in fn.nodes),
        "inplace_in_forward": any(fn.nodes[k].inplace for k in forward_nodes(fn)),  # NOTE [in-place forward]
        # NOTE [aliased inputs]: one tensor in two arguments of apply
        "aliased_inputs": len(set(case.f.apply_args)) < len(case.f.apply_args),
    }
    tags.update(t for t, on in flags.items() if on)
    if case.f.inplace:
        tags.add("inplace_on_output")
    return tuple(t for t in ALL_FEATURES if t in tags)


def repeated_outputs(case: Case) -> list[int]:
    """Indices of outputs that return the very same tensor as an earlier output (same node or input)."""
    seen: set[str] = set()
    rep = []
    for j, o in enumerate(case.function.outputs):
        if o.kind in ("node", "input"):
            if o.ref in seen:
                rep.append(j)
            seen.add(o.ref)
    return rep


def input_gets_grad(case: Case) -> list[bool]:
    """Whether backward returns a tensor (not None) for each input."""
    fn = case.function
    _, live_inputs = grad_flows(fn)
    return [f"x{i}" in live_inputs and i not in fn.none_grads for i in range(fn.n_inputs)]


def returns_none(case: Case) -> bool:
    return not all(input_gets_grad(case))


def derivatives_exact(case: Case) -> bool:
    """Whether the Function's derivative rules are mathematically exact at every order for ``f``, so that
    finite differences of its forward are ground truth for triage: no dropped grad term of an output
    ``f`` uses (an output ``f`` ignores has zero gradient, so dropping it is exact, as in the seed), no
    None grads, no planted vmap bug, nothing detached, no once_differentiable, no output declared
    non-differentiable, and, from the second order on, a backward whose own derivative is exact."""
    fn = case.function
    _, live_inputs = grad_flows(fn)
    order = len(sides(case, "functorch_vs_create_graph")[0].path)
    return (
        # a second derivative differentiates the backward (or jvp): its saved values must carry their
        # true derivative (not an ignored grad of a saved output, nothing detached or recomputed without
        # grad: NOTE [valid comparisons] in fuzzer/ir/validity.py)
        (order < 2 or not backward_second_order_issues(fn))
        and not any(j in case.f.uses for j in fn.unused_grads)
        and not fn.none_grads
        and all(f"x{i}" in live_inputs for i in range(fn.n_inputs) if any(t.argnums == i for t in case.transforms))
        and fn.vmap_rule != "custom_wrong"
        and not fn.detached
        and not fn.once_differentiable
        and not fn.non_differentiable
        and not (case.f.inplace and case.f.inplace_no_grad)  # values change where gradients do not
        # NOTE [custom gradients]: rules that are not forward's derivative on purpose
        and fn.grad_rule == "exact"
        and not any(n.op in STRAIGHT_THROUGH_OPS for n in fn.nodes)
    )
