"""Feature tags: which parts of the autograd.Function API and of the generated space a case exercises.

Tags are the vocabulary of ``finding.json`` ``features`` and of signatures. The full list is fixed here
so that later vocabulary (custom_jvp, mark_dirty, ...) is reserved and spelled one way; :func:`features`
returns only tags that apply to a case. Torch-free.

NOTE [feature tags]
One row per tag (:data:`FEATURE_TAGS`, :class:`FeatureTag`), read by every consumer: its detector on the
IR (:func:`features`), the words a draft's title uses for it (``fuzzer.publish.drafts``), the API word
an upstream search adds for it (``fuzzer.publish.filing``), and whether the ablation that makes it
*essential* exists (:func:`fuzzer.triage.ablate.without`; a tag without one can never be essential, so
its row says why). Swarm configurations (NOTE [swarm] in :mod:`fuzzer.gen.swarm`) turn each tag on or
off in the strategies; a row's ``derived`` says why a case may carry the tag though its configuration
left it out. An unknown tag name raises (:func:`feature`); a test checks every consumer covers every
row. Adding a tag: a row here (in report order: the swarm's draws follow it, so append at the end), its
gate in ``strategies/functions.py``, its ablation in :mod:`fuzzer.triage.ablate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .case import STRAIGHT_THROUGH_OPS, Case
from .dataflow import forward_nodes, grad_flows
from .validity import backward_second_order_issues, jvp_alias, jvp_not_view, sides


@dataclass(frozen=True)
class FeatureTag:
    """NOTE [feature tags]: one tag's row.

    ``detect(case)``: whether ``case`` exercises it. ``phrase``: what a draft title says after "a custom
    autograd.Function that". ``search_term``: the API word upstream searches add (None: no API name says
    it). ``no_ablation``: why no variant of a case can drop it (None: one can, and the tag can be
    essential). ``derived``: why a case can carry it with the tag off in its swarm configuration (None:
    only drawn). ``mode``: the mode that gives a case the tag (NOTE [modes] in fuzzer/gen/modes.py; None:
    drawn by the strategies), which never draw it."""

    name: str
    detect: Callable[[Case], bool]
    phrase: str
    search_term: str | None = None
    no_ablation: str | None = None
    derived: str | None = None
    mode: str | None = None


def _output_kinds(case: Case, kind: str) -> bool:
    return any(o.kind == kind for o in case.function.outputs)


def _view_of_output(case: Case) -> bool:
    fn = case.function
    node_outputs = {o.ref for o in fn.outputs if o.kind == "node"}
    return any(o.kind == "view" and o.ref in node_outputs for o in fn.outputs)


def _saved(prefix: str) -> Callable[[Case], bool]:
    return lambda case: any(r[0] == prefix for r in case.function.saved)


#: Every tag, in report order (NOTE [feature tags]).
FEATURE_TAGS: tuple[FeatureTag, ...] = (
    FeatureTag("output_is_input", lambda c: _output_kinds(c, "input"), "returns its input"),
    FeatureTag("output_is_view", lambda c: _output_kinds(c, "view"), "returns a view of its input"),
    FeatureTag("output_is_view_of_output", _view_of_output, "returns a view of an output"),
    FeatureTag("output_repeated", lambda c: bool(repeated_outputs(c)), "returns one output twice"),
    FeatureTag(
        "saved_input",
        _saved("x"),
        "saves its input",
        "save_for_backward",
        no_ablation="the backward needs the input it saves: repairing the saved tensors saves it again",
        derived="saved wherever the backward needs an input nothing else provides",
    ),
    FeatureTag("saved_output", _saved("o"), "saves an output", "save_for_backward"),
    FeatureTag("saved_intermediate", _saved("t"), "saves an intermediate", "save_for_backward"),
    FeatureTag("saved_on_ctx", lambda c: bool(c.function.on_ctx), "keeps a tensor on ctx"),
    FeatureTag("saved_detached", lambda c: bool(c.function.detached), "saves a detached tensor", "detach"),
    FeatureTag("grad_unused", lambda c: bool(c.function.unused_grads), "ignores an output's gradient"),
    FeatureTag(
        "backward_returns_none",
        lambda c: returns_none(c),  # defined below
        "returns None from backward",
        derived="None wherever an input reaches no output",
    ),
    FeatureTag("legacy_forward", lambda c: c.function.style == "legacy", "uses the legacy forward(ctx, ...)"),
    FeatureTag(
        "custom_op",
        lambda c: c.function.style == "custom_op",
        "is written as a torch.library.custom_op",
        "custom_op",
        mode="custom_op",
    ),
    FeatureTag(
        "generate_vmap_rule",
        lambda c: c.function.vmap_rule == "generate",
        "uses generate_vmap_rule",
        "generate_vmap_rule",
    ),
    FeatureTag(
        "custom_vmap",
        lambda c: c.function.vmap_rule in ("custom", "custom_wrong"),
        "has its own vmap rule",
        "vmap",
    ),
    FeatureTag("custom_jvp", lambda c: c.function.jvp_rule, "has a jvp rule", "jvp"),
    FeatureTag("mark_dirty", lambda c: bool(c.function.dirty), "modifies an input in place (mark_dirty)", "mark_dirty"),
    FeatureTag(
        "mark_non_differentiable",
        lambda c: bool(c.function.non_differentiable),
        "marks an output non-differentiable",
        "mark_non_differentiable",
    ),
    FeatureTag(
        "once_differentiable",
        lambda c: c.function.once_differentiable,
        "has a @once_differentiable backward",
        "once_differentiable",
    ),
    FeatureTag(
        "materialize_grads_false",
        lambda c: not c.function.materialize_grads,
        "sets materialize_grads(False)",
        "set_materialize_grads",
    ),
    FeatureTag(
        "non_tensor_input",
        lambda c: bool(c.function.scalars),
        "takes a Python float",
        no_ablation="the float is an argument of the forward's formula: no variant computes the same without it",
    ),
    FeatureTag("non_tensor_output", lambda c: c.function.non_tensor_output, "returns a Python int"),
    FeatureTag("inplace_on_output", lambda c: bool(c.f.inplace), "has its output modified in place after apply"),
    FeatureTag(
        "jvp_not_view",
        lambda c: jvp_not_view(c.function),
        "has a jvp rule whose tangent of a view output is not a view",
    ),
    FeatureTag(
        "jvp_alias",
        lambda c: jvp_alias(c.function),
        "has a jvp rule that returns an input's tangent as a new output's",
    ),
    # NOTE [custom gradients]: a rule only where a computed output exists for it to act on
    FeatureTag(
        "custom_gradient",
        lambda c: c.function.grad_rule != "exact" and any(o.ref.startswith("t") for o in c.function.outputs),
        "has a gradient rule that is not its forward's derivative on purpose",
    ),
    FeatureTag(
        "straight_through",
        lambda c: any(n.op in STRAIGHT_THROUGH_OPS for n in c.function.nodes),
        "passes the gradient straight through a rounding",
    ),
    FeatureTag(  # NOTE [in-place forward]
        "inplace_in_forward",
        lambda c: any(c.function.nodes[k].inplace for k in forward_nodes(c.function)),
        "modifies a tensor in place in its forward",
    ),
    FeatureTag(  # NOTE [aliased inputs]: one tensor in two arguments of apply
        "aliased_inputs",
        lambda c: len(set(c.f.apply_args)) < len(c.f.apply_args),
        "is given one tensor as two arguments",
    ),
)

#: Every tag affuzz knows, in report order (:data:`FEATURE_TAGS`). :data:`RESERVED` ones name vocabulary
#: the case IR cannot express yet; :func:`features` never returns them.
ALL_FEATURES = tuple(t.name for t in FEATURE_TAGS)
#: The tags the strategies draw (a mode's tag is given by the mode: FeatureTag.mode).
DRAWN_FEATURES = tuple(t.name for t in FEATURE_TAGS if t.mode is None)
_BY_NAME = {t.name: t for t in FEATURE_TAGS}


RESERVED: tuple[str, ...] = ()


def feature(name: str) -> FeatureTag:
    """The row of tag ``name`` (NOTE [feature tags]); an unknown name raises ``KeyError``."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown feature tag {name!r} (known: {', '.join(ALL_FEATURES)})") from None


def features(case: Case) -> tuple[str, ...]:
    """All tags that apply to ``case``, in :data:`ALL_FEATURES` order."""
    return tuple(t.name for t in FEATURE_TAGS if t.detect(case))


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
