"""Which comparisons are valid for a Function, and what each side of an oracle runs. Torch-free.

NOTE [valid comparisons]
When fuzzing, the system under test is torch: a disagreement is a finding only where PyTorch's
documentation says the two sides must agree *for this Function*. A generated Function may define rules
that disagree with each other on purpose (a backward that ignores a grad_output, returns None for an
input, saves a detached tensor...). Two sides that reach the Function's derivative through *the same
rules at every order* must agree whatever those rules say (that is how the seed's bug is found: both
sides differentiate the same backward twice). Two sides that reach it through *different* rules may
only be compared where those rules agree with each other. A side's *path* is the derivative mode of
each derivative level acting on the Function, innermost first: ``R`` (reverse: grad, vjp, jacrev,
autograd.grad, jacrev loops; hessian contributes ``R`` then ``F``), ``F`` (forward: jacfwd, jvp,
linearize, dual tensors). The first order uses the Function's ``backward`` (R) or ``jvp`` (F); a higher
order differentiates the formula of the rule below it.

The jvp rule affuzz generates is derived from the same *declared* derivative as the backward,
including its deliberately dropped terms (NOTE [declared derivative] in :mod:`fuzzer.codegen.fn_rules`), so the
two agree by construction except where forward AD forbids it: an output that is an input returned
as-is or a view must get a view of the input's tangent, which cannot drop the term the backward drops
("aliased drop").

    paths differ at    compares                     not applicable when (reason)
    ---------------    --------                     --------------------------------------------------
    any              the Function breaks a documented a tensor stored directly on ctx ("Tensors should
                     rule                            not be stored directly on ctx", Function.setup_context
                                                    docs, "to prevent incorrect gradients")
                                                    (tensor_saved_on_ctx)
    any              the Function contradicts itself  the same tensor returned twice with one copy's grad
                                                    ignored and the other's used: no single derivative
                                                    (repeated_output_contradicts)
    (same path)        nothing the Function decides -
    any, one side      the hand-written vmap rule vs    the rule stacks per-sample outputs anew, losing the
    vmapping the Fn    forward                          aliasing of a repeated output or a view of an
                                                    output, and f modifies an output in place
                                                    (vmap_rule_loses_aliasing)
    order 1            backward vs jvp              an aliased drop on an output f uses
                                                    (backward_vs_jvp_first_order); a clipped gradient
                                                    rule (nonlinear_gradient_rule; at any order also
                                                    where the sides split or sum its grads differently:
                                                    an output returned twice, vmap vs a per-sample
                                                    loop, or reach it through jvp vs backward); f
                                                    doubles an output
                                                    in place under no_grad, which forward AD sees and
                                                    reverse mode does not (inplace_under_no_grad);
                       and, with a higher order,    backward not differentiable as declared: detached
                       R/F over backward vs R/F     or no_grad-recomputed saved tensors, once_differen-
                       over jvp                     tiable, a saved output whose declared derivative
                                                    is not its true one (backward_second_order)
    order >= 2         R over backward vs F over    once_differentiable (R raises, F does not); a saved
                       backward (or over jvp)       output with an aliased drop (its tangent from jvp is
                                                    not its gradient from backward); in-place under
                                                    no_grad (backward_r_vs_f)

The vmap rules the generator draws agree with forward by construction (``custom`` applies the Function
per sample; ``generate`` is torch's own). The planted ``custom_wrong`` rule is never drawn: it is the
test suite's stand-in for a torch bug (a vmap that returns wrong values), so it is judged like one.

A comparison that is not applicable decides nothing and is counted as ``not_applicable`` with its
reason; it still runs, for torch's own bugs: an error PyTorch calls a bug is a finding whatever the
Function's rules are, and names the rule (NOTE [broken rules] in :mod:`fuzzer.judge.judge`, RULES).
When the Function itself is under test (``affuzz check``; ``subject="function"``), every comparison
runs and a disagreement of the rules is the Function's finding.

The known-limitations registry is applied per side by what that side actually runs (:class:`SideInfo`):
a side that runs torch.func vmap (or jacrev/jacfwd/hessian, which vmap) on a Function without a vmap
rule may raise "does not have vmap support"; a side with forward AD on a Function without jvp may raise
"must implement the jvp function"; a side under torch.func may reject a legacy forward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .case import CHECKPOINT_COMPILE, STRAIGHT_THROUGH_OPS, Case, Checkpoint, Compile, FunctionDef, Transform
from .oracles import alternate, oracle_kind
from .transforms import FUNCTORCH_REVERSE, TRANSFORM_KINDS, transform_kind

#: Forward-mode transforms (NOTE [transform table] in :mod:`fuzzer.ir.transforms`).
_F = tuple(k.name for k in TRANSFORM_KINDS if k.forward_mode)
#: torch.func transforms that run the Function under vmap (directly or through their own vmap).
_VMAPS = tuple(k.name for k in TRANSFORM_KINDS if k.vmaps)
REASONS = (
    "saved_tensor_modified_in_place",
    "tensor_saved_on_ctx",
    "jvp_returns_input_tangent",
    "repeated_output_contradicts",
    "vmap_rule_loses_aliasing",
    "backward_vs_jvp_first_order",
    "inplace_under_no_grad",
    "backward_second_order",
    "backward_r_vs_f",
    "nonlinear_gradient_rule",
)


#: Each reason in words, for a finding whose Function breaks the rule (NOTE [broken rules]).
RULES = {
    "saved_tensor_modified_in_place": "f modifies in place an output whose tensor the Function saved for"
    " backward or forward (the in-place correctness checks of the autograd docs); values computed from it"
    " are the corrupted ones",
    "tensor_saved_on_ctx": "the Function stores a tensor directly on ctx; the setup_context docs say to save"
    " tensors with ctx.save_for_backward / ctx.save_for_forward",
    "jvp_returns_input_tangent": "the Function's jvp returns an input's tangent itself for a new output;"
    " the forward-mode AD docs say the jvp must match forward's view/inplace behavior",
    "repeated_output_contradicts": "the Function returns one tensor twice and its backward ignores the"
    " gradient of one copy but not of the other",
    "vmap_rule_loses_aliasing": "the Function's hand-written vmap rule loses the aliasing of its outputs,"
    " which f modifies in place",
    "backward_vs_jvp_first_order": "the Function's backward and jvp define different first derivatives",
    "inplace_under_no_grad": "f modifies an output in place under no_grad, which forward AD sees and"
    " reverse mode does not",
    "backward_second_order": "the Function's backward is not differentiable as declared (once_differentiable,"
    " a detached or recomputed saved tensor, a saved output whose gradient it drops)",
    "backward_r_vs_f": "the Function's second derivative differs between reverse and forward mode over its backward",
    "nonlinear_gradient_rule": "the Function clips its gradients (backward clamps a gradient, jvp a tangent), so its"
    " backward and jvp define different first derivatives, and its backward's result depends on how the grads it"
    " gets are split (an output returned twice) or summed (vmap against a per-sample loop)",
}


@dataclass(frozen=True)
class SideInfo:
    """What one side of an oracle runs: its path (NOTE [valid comparisons]) and the machinery it uses."""

    path: tuple[str, ...]  # derivative modes acting on the Function, innermost first
    functorch: bool  # some level is a torch.func transform
    vmap: bool  # the Function runs under torch.func vmap (vmap, jacrev, jacfwd, hessian)
    forward_ad: bool  # some level uses forward-mode AD
    linearize_nested: bool = False  # torch.func.linearize with a vmap-ing or forward-mode level around or in it
    compiled: Compile | None = None  # NOTE [compiled mode]: how this side runs under torch.compile
    # the Function's forward runs on batched primals: an explicit torch.func vmap level (jacrev, jacfwd and
    # hessian vmap only tangents and cotangents, so the Function's forward sees unbatched inputs there)
    batched: bool = False
    checkpoint: Checkpoint | None = None  # NOTE [checkpoint mode]: how this side keeps what backward needs
    functorch_reverse: bool = False  # a reverse-mode torch.func level (grad, vjp, jacrev, hessian)
    custom_op: bool = False  # NOTE [custom op mode]: the side runs the custom op against its Function twin


def _path(transforms: tuple[Transform, ...], *, create_graph: bool = False) -> tuple[str, ...]:
    out: list[str] = []
    for t in reversed(transforms):  # NOTE [transform table]: an unknown name raises
        out += transform_kind(t.name).derivative_path(create_graph=create_graph)
    return tuple(out)


def _functorch_side(transforms: tuple[Transform, ...], *, loops: bool = False) -> SideInfo:
    names = [t.name for t in transforms]
    others = [n for n in names if n != "linearize" and not (loops and n == "vmap")]
    return SideInfo(
        path=_path(transforms),
        functorch=any(n not in ("autograd_grad",) and not (loops and n == "vmap") for n in names),
        vmap=any(n in _VMAPS and not (loops and n == "vmap") for n in names),
        forward_ad=any(n in _F or n == "hessian" for n in names),
        linearize_nested="linearize" in names and any(n in _VMAPS or n in _F for n in others),
        batched="vmap" in names and not loops,
        functorch_reverse=any(n in FUNCTORCH_REVERSE for n in names),
    )


def sides(case: Case, oracle: str) -> tuple[SideInfo, SideInfo]:
    """(side A, side B) of ``oracle`` on ``case`` (side A is the case's stack under torch.func, but for
    ``compiled_vs_eager`` with placement ``plain``: the create_graph side)."""
    return stack_sides(case.transforms, oracle, case.compile, case.checkpoint)


def _create_graph_side(stack: tuple[Transform, ...]) -> SideInfo:
    path = _path(stack, create_graph=True)
    return SideInfo(path, False, False, "F" in path)


def stack_sides(
    stack: tuple[Transform, ...],
    oracle: str,
    compiled: Compile | None = None,
    checkpoint: Checkpoint | None = None,
) -> tuple[SideInfo, SideInfo]:
    """:func:`sides` of a bare stack (``compiled``, ``checkpoint``: the case's mode fields, for the
    oracles that need them)."""
    kind = oracle_kind(oracle)  # NOTE [oracle table]: an unknown oracle raises
    return _SIDES[kind.side_b](stack, oracle, compiled, checkpoint)


def _twins_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    return _functorch_side(stack), _create_graph_side(stack)


def _loops_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    return _functorch_side(stack), _functorch_side(stack, loops=True)


def _alternate_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    alt = alternate(stack, oracle)
    return _functorch_side(stack), _functorch_side(alt if alt is not None else stack)


def _compiled_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    # NOTE [compiled mode]: the same rules of the same Function on both sides
    if compiled is None:
        raise ValueError(f"{oracle} needs a case with a compile")
    eager = _create_graph_side(stack) if compiled.placement == "plain" else _functorch_side(stack)
    return eager, replace(eager, compiled=compiled)


def _checkpointed_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    # NOTE [checkpoint mode]: the same rules of the same Function on both sides
    if checkpoint is None:
        raise ValueError(f"{oracle} needs a case with a checkpoint")
    plain = checkpoint.placement != "inside"
    a = _create_graph_side(stack) if plain else _functorch_side(stack)
    on = CHECKPOINT_COMPILE if checkpoint.placement == "compiled" else None
    return a, replace(a, checkpoint=checkpoint, compiled=on)


def _function_twin_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    # NOTE [custom op mode]: the same stack and rules, over the op and over its autograd.Function twin
    a = _create_graph_side(stack) if oracle_kind(oracle).side_a == "create_graph" else _functorch_side(stack)
    return replace(a, custom_op=True), a


def _opcheck_sides(
    stack: tuple[Transform, ...], oracle: str, compiled: Compile | None, checkpoint: Checkpoint | None
) -> tuple[SideInfo, SideInfo]:
    # NOTE [custom op mode]: the same side twice, opcheck only checks the op first
    a = _create_graph_side(stack)
    return a, a


#: NOTE [oracle table]: side B of each recipe, from side A's stack.
_SIDES = {
    "twins": _twins_sides,
    "loops": _loops_sides,
    "alternate": _alternate_sides,
    "compiled": _compiled_sides,
    "checkpointed": _checkpointed_sides,
    "function_twin": _function_twin_sides,
    "opcheck": _opcheck_sides,
}


# ------------------------------------------------------------------------------- the Function


def aliased_drops(fn: FunctionDef) -> set[int]:
    """Outputs whose declared derivative the jvp rule cannot share with the backward: an input returned
    as-is, or a view, whose grad the backward drops (unused grad_output, or None for its input)."""
    out = set()
    for j, o in enumerate(fn.outputs):
        if o.kind == "node" or j in fn.non_differentiable:
            continue
        dropped = j in fn.unused_grads
        if o.ref.startswith("x") and int(o.ref[1:]) in fn.none_grads:
            dropped = True
        if dropped:
            out.add(j)
    return out


def input_aliases(fn: FunctionDef) -> list[int]:
    """Outputs that are an input as-is or a view of one: the outputs whose tangent plain forward AD
    requires to be a view of the input's tangent (NOTE [promises] in :mod:`fuzzer.judge.compare`)."""
    return [
        j
        for j, o in enumerate(fn.outputs)
        if (o.kind == "input" and int(o.ref[1:]) not in fn.dirty) or (o.kind == "view" and o.ref.startswith("x"))
    ]  # a dirty input's tangent is updated in place instead (NOTE [declared derivative])


def shifts_an_input(fn: FunctionDef) -> bool:
    """Whether a node of the Function is an input plus a constant (``x + s``): the output whose generated
    jvp tangent is that input's tangent unchanged (a clone, or the tangent itself under ``jvp_alias``)."""
    return any(n.op == "shift" and n.args[0].startswith("x") for n in fn.nodes)


def jvp_alias(fn: FunctionDef) -> bool:
    """Whether the Function's jvp rule returns an input's tangent itself as a new output's tangent: the
    forward mode AD docs (extending.html) require the jvp to "match the view/inplace behavior of
    forward()", and a shift node's output is a new tensor, not a view of the input."""
    return fn.jvp_rule and fn.jvp_alias and shifts_an_input(fn)


def jvp_not_view(fn: FunctionDef) -> bool:
    """Whether the Function's jvp rule returns a non-view tangent for such an output (documented-illegal)."""
    return fn.jvp_rule and fn.jvp_not_view and bool(input_aliases(fn))


def _saved_outputs(fn: FunctionDef) -> set[int]:
    return {int(r[1:]) for r in fn.saved if r.startswith("o")}


def backward_second_order_issues(fn: FunctionDef) -> list[str]:
    """Why differentiating the backward's formula does not give the derivative of the declared first
    derivative (empty when it does)."""
    why = []
    if fn.detached:
        why.append("detached saved tensor")
    if any(r.startswith("t") for r in fn.saved):
        why.append("saved intermediate (recomputed without grad)")
    if fn.style == "legacy":
        why.append("legacy forward (runs without grad)")
    if fn.once_differentiable:
        why.append("once_differentiable")
    saved_out = _saved_outputs(fn)
    if saved_out & (set(fn.unused_grads) | set(fn.non_differentiable)):
        why.append("saved output whose grad backward drops")
    if saved_out and fn.none_grads:
        why.append("saved output of a Function that returns None grads")
    # NOTE [custom gradients]: a saved computed output carries the rule's derivative, not its true one
    custom = fn.grad_rule != "exact" or any(n.op in STRAIGHT_THROUGH_OPS for n in fn.nodes)
    if custom and any(fn.outputs[j].ref.startswith("t") for j in saved_out):
        why.append("saved output whose derivative the Function's custom rule changes")
    if fn.dirty:
        why.append("mark_dirty")
    return why


def rule_conflict(case: Case, a: SideInfo, b: SideInfo) -> str | None:
    """The reason two sides may see different rules of ``case``'s Function, or None (NOTE [valid
    comparisons])."""
    fn = case.function
    if fn.on_ctx:
        return "tensor_saved_on_ctx"
    if jvp_alias(fn):
        return "jvp_returns_input_tangent"
    refs = [o.ref for o in fn.outputs if o.kind in ("node", "input")]
    for ref in set(refs):
        copies = [j for j, o in enumerate(fn.outputs) if o.kind in ("node", "input") and o.ref == ref]
        if len(copies) > 1 and 0 < len(set(copies) & set(fn.unused_grads)) < len(copies):
            return "repeated_output_contradicts"
    if fn.vmap_rule == "custom" and case.f.inplace and a.batched != b.batched:
        views_of_outputs = any(o.kind == "view" and o.ref.startswith("t") for o in fn.outputs)
        stacked = [r for r in refs if r not in {f"x{i}" for i in fn.dirty}]  # NOTE [mark_dirty vmap rule]
        if len(stacked) != len(set(stacked)) or views_of_outputs:
            return "vmap_rule_loses_aliasing"
    if fn.grad_rule == "clipped" and any(fn.outputs[j].ref.startswith("t") for j in case.f.uses):
        # NOTE [custom gradients]: a clipped rule is not linear in the grads, so where the two sides may
        # hand backward differently split or summed grads, the values are implementation-defined: the
        # same tensor returned twice (autograd gives one copy the whole grad, torch.func splits it), or
        # vmap against a per-sample loop (vmap sums an unbatched output's grad over the batch before
        # backward sees it; the loop clips each sample's). Found by a hand check of an issue-22 run.
        # And at any order where one side differentiates through the jvp and the other through the
        # backward: the two rules clip different things (a hand check: hessian vs jacrev(jacrev)).
        node_refs = [o.ref for o in fn.outputs if o.kind == "node"]
        if len(node_refs) != len(set(node_refs)) or a.batched != b.batched or a.path != b.path:
            return "nonlinear_gradient_rule"
    if a.path == b.path:
        return None
    first = next((i for i, (p, q) in enumerate(zip(a.path, b.path, strict=False)) if p != q), 0)
    if case.f.inplace and case.f.inplace_no_grad:
        return "inplace_under_no_grad"
    if first == 0:
        if aliased_drops(fn) & set(case.f.uses):
            return "backward_vs_jvp_first_order"
        if fn.grad_rule == "clipped" and any(fn.outputs[j].ref.startswith("t") for j in case.f.uses):
            return "nonlinear_gradient_rule"  # NOTE [custom gradients]
        if max(len(a.path), len(b.path)) > 1 and backward_second_order_issues(fn):
            return "backward_second_order"
        return None
    if a.path[0] == "R" and (fn.once_differentiable or aliased_drops(fn) & _saved_outputs(fn)):
        return "backward_r_vs_f"
    # Both sides differentiate the backward's formula, one by reverse and one by forward mode: where it reads
    # a saved output, that output's derivative comes from the Function's backward on one side and from its jvp
    # on the other, and a further level differentiates those two formulas, which agree only where the
    # backward's own derivative is exact (a hand check of an issue-22 run: a reversed rule whose backward reads
    # exp's saved output and whose jvp recomputes exp from the input, jacrev vs jacfwd inside an outer grad:
    # -e vs e, both the Function's own rules).
    deeper = max(len(a.path), len(b.path)) > first + 1
    if a.path[0] == "R" and deeper and _saved_outputs(fn) and backward_second_order_issues(fn):
        return "backward_second_order"
    return None


def _base(fn: FunctionDef, ref: str) -> str:
    """The tensor ``ref`` (``x``/``t``/``o`` name) is, or views: an input or intermediate name."""
    if ref.startswith("o"):
        return _base(fn, fn.outputs[int(ref[1:])].ref)
    return ref


#: Reasons of :func:`rule_conflict` that make only the *values* of a comparison meaningless: a restacking vmap
#: rule or a clipped gradient rule changes what a side computes, never whether torch raises, so an error
#: pair is still judged as usual (corpus G8, a vmap in-place error of forward AD under a restacking rule,
#: stays a finding).
VALUES_ONLY_RULES = frozenset({"vmap_rule_loses_aliasing", "nonlinear_gradient_rule"})

#: NOTE [repaired rules]: the reasons of :func:`rule_conflict` whose Function has a nearest clean twin.
REPAIRABLE = ("tensor_saved_on_ctx", "jvp_returns_input_tangent")


def repair(case: Case, reason: str) -> Case | None:
    """NOTE [repaired rules]: ``case`` with the broken rule ``reason`` mended the way the docs say
    (tensors kept on ctx saved with ``save_for_backward`` instead; a jvp that returns a new tensor, not
    its input's tangent), everything else the same; None where the reason has no such repair.

    NOTE [repaired rules]
    A Function that breaks a documented rule makes its comparisons meaningless (NOTE [valid
    comparisons]), but the rule is often not what the disagreement is about: a hand check of the old
    corpus found that none of its six disagreements of Functions keeping a tensor on ctx changed when the
    tensor was saved properly. Where such a comparison disagrees, the judge (NOTE [broken rules] in
    :mod:`fuzzer.judge.judge`) runs the repaired twin; a finding there is a finding of a clean Function,
    and it is that case that is reported, shrunk and published."""
    fn = case.function
    if reason == "tensor_saved_on_ctx" and fn.on_ctx:
        return replace(case, function=replace(fn, on_ctx=()))
    if reason == "jvp_returns_input_tangent" and fn.jvp_alias:
        return replace(case, function=replace(fn, jvp_alias=False))
    return None


def values_meaningless(case: Case) -> str | None:
    """Why no value that ``case`` computes means anything, whatever the oracle (None: they do).

    ``f`` modifying in place an output whose tensor the Function saved (the very tensor, a view of it,
    or the same tensor returned twice) corrupts what the rules read: plain autograd refuses it ("one of
    the variables needed for gradient computation has been modified by an inplace operation", a
    documented check that torch.func makes too, except where it loses the tensor's version counter (a
    tensor returned twice): there it computes from the modified value, so two torch.func sides may
    disagree by how often they read it (that lost check is a promise_broken finding of its own, NOTE
    [promises] in :mod:`fuzzer.judge.compare`). Unlike :func:`rule_conflict`, errors
    stay meaningful: an unexplained error of such a case is still a finding (NOTE [broken rules] in
    :mod:`fuzzer.judge.judge`)."""
    fn = case.function
    changed = {_base(fn, fn.outputs[j].ref) for j in case.f.inplace}
    # a saved intermediate is recomputed in setup_context (a new tensor); a legacy forward saves its own
    saved = {_base(fn, r) for r in fn.saved if not r.startswith("t") or fn.style == "legacy"}
    if changed & saved:
        return "saved_tensor_modified_in_place"
    return None


def not_applicable(case: Case, oracle: str) -> str | None:
    """Why ``oracle`` must not be run on ``case`` when torch is under test, or None."""
    a, b = sides(case, oracle)
    return rule_conflict(case, a, b)
