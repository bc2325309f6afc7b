"""Custom ``torch.autograd.Function`` definitions (:class:`fuzzer.ir.case.FunctionDef`).

Invariants of every drawn Function:

* 1..``max_inputs`` tensor inputs of one base ``shape``; 1..``max_outputs`` outputs, each computed by a
  chain of elementwise ops (pow, mul, add, sin, exp), an input returned as-is, or a view of an input or
  of a computed output (view_as, reshape, unsqueeze, select, narrow, transpose, squeeze).
* Saved tensors drawn from inputs, outputs and intermediates; inputs are added until the backward can
  obtain every value it needs (:func:`fuzzer.ir.case.repair_saved`); no dead intermediates (pruned).
* The backward is the exact VJP except for the deliberately unused grad_outputs and None input grads;
  the optional ``jvp`` staticmethod is the exact JVP. A backward that ignores every grad or returns None
  for every input is kept 1 time in 4 of the times it is drawn (NOTE [live gradient]).
* The rest of the API is drawn too, each for 1 Function in 4 (NOTE [rare features]):
  ``@once_differentiable``, ``set_materialize_grads(False)``, ``mark_non_differentiable`` on node
  outputs, saved tensors detached, None grads (1 in 8: saved tensors kept on ``ctx`` as attributes).

NOTE [rare features]
A rare feature is rare per *Function*: drawn for 1 Function in 4, then for each element it can apply to
(a saved tensor to detach, an output to mark non-differentiable, an input to return None for) 1 time in 2,
one at least.
Drawn 1 time in 4 per element instead, a Function with four saved tensors detached one of them 2 times in
3, and nearly every Function carried some rule that masks what the rest of it does.

NOTE [live gradient]
A backward that ignores every grad_output, or an ``f`` that uses only outputs whose gradient goes
nowhere, gives ``f`` a reverse-mode derivative that is zero by construction: every reverse comparison
of the case then compares zeros (and its second derivatives too). Drawn freely, ignoring each grad 1
time in 2 made that half the cases (57 % of 2,850 draws without swarm, 46 % with; a None grad for
every input, 1 Function in 4 of one input, added to it). Such a Function is still drawn, 1 time in 4
(zero-gradient plumbing has its own bugs: None grads, materialized zeros); otherwise one first copy
keeps its grad, one input at least gets a gradient, and ``f`` uses one output at least whose gradient
reaches an input (:func:`fuzzer.ir.dataflow.live_outputs`; :mod:`strategies.cases`).

NOTE [output kinds]
An output is a computed node twice as often as an input returned as-is or a view (of the kinds a swarm
configuration enables): uniform over the three, half the Functions computed nothing (every output an
input or a view of one) and three in four had no derivative to compute at all, only gradients to route.
* Custom gradient rules (NOTE [custom gradients]), each for 1 Function in 4: a straight-through
  rounding among the ops, a scaled, reversed, blocked or clipped gradient of the computed outputs;
  intermediates modified in place inside forward (NOTE [in-place forward]).
* It always passes :func:`fuzzer.ir.case.validate`.

Choices are ordered simplest first (one input, one ``pow`` output, setup_context style, no vmap rule),
so Hypothesis shrinks toward the seed's shape.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzzer.ir.case import (
    FUNCTION_STYLES,
    GRAD_RULES,
    INPLACE_OPS,
    MAX_DIM_SIZE,
    MAX_INPUTS,
    MAX_NDIM,
    MAX_NODES,
    MAX_OUTPUTS,
    OPS,
    POW_EXPONENTS,
    SCALAR_OPS,
    STRAIGHT_THROUGH_OPS,
    VMAP_RULES,
    FunctionDef,
    Node,
    Output,
    View,
)
from fuzzer.ir.dataflow import forward_nodes, prune, repair_saved, value_provided_by_saved
from fuzzer.ir.features import ALL_FEATURES
from fuzzer.ir.shapes import numel
from fuzzer.ir.validity import input_aliases, shifts_an_input

from ._validate import BOOLS, check_int_range, check_subset, ints, pick
from ._validate import rarely as one_in_four

__all__ = ["functions", "views"]

T = TypeVar("T")

ALL_TAGS = frozenset(ALL_FEATURES)
#: Simplest first.
OP_ORDER = ("pow", "mul", "add", "sin", "exp")
#: Non-tensor (Python float) inputs: none 3 times in 4, else one or two.
_n_scalars = st.integers(0, 7).map(lambda v: 0 if v < 6 else v - 5)
SCALAR_VALUES = (2.0, 0.5, -1.0, 3.0)
#: Drawn 1 time in 4 at most: a Function whose backward returns None for an input is wrong on purpose.


@st.composite
def _select(draw: st.DrawFn, shape: tuple[int, ...]) -> View:
    d = draw(ints(0, len(shape) - 1))
    return View("select", dim=d, index=draw(ints(0, shape[d] - 1)))


@st.composite
def _narrow(draw: st.DrawFn, shape: tuple[int, ...]) -> View:
    d = draw(ints(0, len(shape) - 1))
    length = draw(ints(1, shape[d]))
    return View("narrow", dim=d, index=draw(ints(0, shape[d] - length)), length=length)


def _drawn_order(draw: st.DrawFn, items: list[str]) -> tuple[str, ...]:
    """``items`` in a drawn order, shrinking toward the given one.

    NOTE [saved order]
    The backward reads each value it needs from the *first* saved tensor that provides it
    (:func:`fuzzer.ir.dataflow.value_provided_by_saved`): with ``x0`` and an output that is ``x0`` as-is
    both saved, the order decides whether backward's graph hangs off the input or off the output (the
    seed bug's shape). Saved in candidate order (inputs first), a saved input would always shadow the
    output, and a Function that saves both would read the output never; so the order of ``saved`` is
    drawn (a Fisher-Yates shuffle whose every swap shrinks to "none"), and which provider backward
    reads is part of the generated space, as the docs' own examples save either."""
    for i in range(len(items) - 1, 0, -1):
        j = i - draw(ints(0, i))
        items[i], items[j] = items[j], items[i]
    return tuple(items)


@functools.cache
def _vmap_rule_st(rules: tuple[str, ...]) -> st.SearchStrategy[str]:
    """No rule is simplest (index 0) but makes every vmap level a documented error, so it gets one
    share in six; ``generate`` three, ``custom`` two (when all three are allowed)."""
    if set(rules) != {"none", "generate", "custom"}:
        return st.sampled_from(rules)
    table = ("none", "generate", "generate", "generate", "custom", "custom")
    return st.integers(0, len(table) - 1).map(table.__getitem__)


@functools.cache
def views(*, shape: tuple[int, ...]) -> st.SearchStrategy[View]:
    """Views that are well-formed for a tensor of ``shape`` (see :func:`fuzzer.ir.case.view_shape`)."""
    if not isinstance(shape, tuple) or len(shape) > MAX_NDIM:
        raise InvalidArgument(f"shape={shape!r} must be a tuple of at most {MAX_NDIM} dims")
    nd = len(shape)
    n = numel(shape)
    options: list[st.SearchStrategy[View]] = [st.just(View("view_as"))]
    targets = sorted({(n,), (1, n), (n, 1)} - {shape}, key=lambda s: (len(s), s)) + ([()] if n == 1 and shape else [])
    if targets:
        options.append(st.sampled_from(targets).map(lambda s: View("reshape", shape=s)))
    options.append(st.integers(0, nd).map(lambda d: View("unsqueeze", dim=d)))
    if nd >= 1:
        options += [_select(shape), _narrow(shape)]
    if nd == 2:
        options.append(st.just(View("transpose", dim=0, dim1=1)))
    ones = [d for d, s in enumerate(shape) if s == 1]
    if ones:
        options.append(st.sampled_from(ones).map(lambda d: View("squeeze", dim=d)))
    return st.one_of(options)


def functions(
    *,
    shape: tuple[int, ...] = (),
    n_inputs: int | None = None,
    max_inputs: int = 3,
    max_outputs: int = 3,
    max_nodes: int = 4,
    styles: Sequence[str] = FUNCTION_STYLES,
    vmap_rules: Sequence[str] = ("none", "generate", "custom"),
    features: Collection[str] | None = None,
    ops: Collection[str] | None = None,
) -> st.SearchStrategy[FunctionDef]:
    """Function definitions over inputs of base ``shape``.

    ``n_inputs`` fixes the input count (else drawn in ``1..max_inputs``). ``styles`` and ``vmap_rules``
    restrict the API styles drawn; legacy-style Functions never get a vmap rule. ``custom_wrong`` (a
    planted, contradicting vmap rule) may be listed explicitly; it is not drawn by default.

    ``features`` (feature tags of :data:`fuzzer.ir.features.ALL_FEATURES`; None: all): the only ones
    drawn (a swarm configuration, NOTE [swarm] in :mod:`fuzzer.gen.swarm`). A tag left out is never
    drawn; ``saved_input`` may still appear where the backward needs an input that nothing else provides
    (:func:`fuzzer.ir.case.repair_saved`), and ``backward_returns_none`` where an input reaches no output.
    With every tag in, the draws are exactly those of None.

    ``ops`` (elementwise ops of :data:`OP_ORDER`, at least one; None: all): the only ones forward's
    intermediates use (a swarm configuration); ``scale``/``shift`` stay gated by ``non_tensor_input``.
    With every op in, the draws are exactly those of None.
    """
    if not isinstance(shape, tuple) or len(shape) > MAX_NDIM or any(not 1 <= s <= MAX_DIM_SIZE for s in shape):
        raise InvalidArgument(f"shape={shape!r} must be a tuple of at most {MAX_NDIM} sizes in 1..{MAX_DIM_SIZE}")
    check_int_range("max_inputs", max_inputs, 1, MAX_INPUTS)
    if n_inputs is not None:
        check_int_range("n_inputs", n_inputs, 1, max_inputs)
    check_int_range("max_outputs", max_outputs, 1, MAX_OUTPUTS)
    check_int_range("max_nodes", max_nodes, 1, MAX_NODES)
    op_order = OP_ORDER if ops is None else tuple(o for o in OP_ORDER if o in check_subset("ops", ops, OP_ORDER))
    styles = check_subset("styles", styles, FUNCTION_STYLES)
    vmap_rules = check_subset("vmap_rules", vmap_rules, VMAP_RULES)
    # Legacy-style Functions always raise under torch.func transforms (a documented limitation), so
    # they are drawn 1 time in 16 when both styles are allowed: enough to keep that path exercised.
    allow = ALL_TAGS if features is None else frozenset(check_subset("features", features, ALL_TAGS, empty=True))
    if "legacy_forward" not in allow:
        styles = tuple(x for x in styles if x != "legacy") or styles
    style_st = (
        st.integers(0, 15).map(lambda v: "legacy" if v == 15 else "setup_context")
        if set(styles) == set(FUNCTION_STYLES)
        else st.sampled_from(styles)
    )
    if "generate_vmap_rule" not in allow or "custom_vmap" not in allow:
        gone = ({"generate"} if "generate_vmap_rule" not in allow else set()) | (
            {"custom", "custom_wrong"} if "custom_vmap" not in allow else set()
        )
        vmap_rules = tuple(r for r in vmap_rules if r not in gone) or ("none",)

    return _function(
        shape,
        n_inputs,
        max_inputs,
        max_outputs,
        max_nodes,
        styles,
        vmap_rules,
        style_st,
        allow,
        op_order,
    )


@st.composite
def _function(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    n_inputs: int | None,
    max_inputs: int,
    max_outputs: int,
    max_nodes: int,
    styles: tuple[str, ...],
    vmap_rules: tuple[str, ...],
    style_st: st.SearchStrategy[str],
    allow: frozenset[str],
    op_order: tuple[str, ...] = OP_ORDER,
) -> FunctionDef:
    def rarely(tag: str) -> bool:  # a gated one_in_four draw: no choice is made for a tag left out
        return tag in allow and one_in_four(draw)

    def some(tag: str, items: Sequence[T]) -> tuple[T, ...]:
        """NOTE [rare features]: ``tag`` for 1 Function in 4 (of those it can apply to), and then each of
        ``items`` 1 time in 2, one at least."""
        if not items or not rarely(tag):
            return ()
        chosen = tuple(x for x in items if draw(BOOLS))
        return chosen or (pick(draw, list(items)),)

    n_in = n_inputs if n_inputs is not None else draw(ints(1, max_inputs))
    xs = [f"x{i}" for i in range(n_in)]
    n_scalars = draw(_n_scalars) if "non_tensor_input" in allow else 0
    scalars = tuple(pick(draw, SCALAR_VALUES) for _ in range(n_scalars))
    # NOTE [custom gradients]: a straight-through rounding among the ops of 1 Function in 4
    ops = op_order + (SCALAR_OPS if scalars else ()) + (STRAIGHT_THROUGH_OPS if rarely("straight_through") else ())
    nodes: list[Node] = []
    for k in range(draw(ints(1, max_nodes))):
        op = pick(draw, ops)
        avail = xs + [f"t{j}" for j in range(k)]
        arity = OPS[op]  # NOTE [op table]
        args = tuple(pick(draw, avail) for _ in range(arity))
        exponent = pick(draw, POW_EXPONENTS) if op == "pow" else 2
        scalar = draw(ints(0, len(scalars) - 1)) if op in SCALAR_OPS else 0
        nodes.append(Node(op, args, exponent, scalar))
    node_refs = [f"t{k}" for k in reversed(range(len(nodes)))]  # latest (longest chain) first
    outputs: list[Output] = []
    repeat = "output_repeated" in allow
    for _ in range(draw(ints(1, max_outputs))):
        taken = {o.ref for o in outputs if o.kind != "view"}
        nodes_left = node_refs if repeat else [r for r in node_refs if r not in taken]
        inputs_left = xs if repeat else [x for x in xs if x not in taken]
        kinds = [
            k
            for k, on in (
                ("node", bool(nodes_left)),
                ("input", "output_is_input" in allow and bool(inputs_left)),
                ("view", "output_is_view" in allow),
            )
            if on
        ]
        if not kinds:
            break
        # NOTE [output kinds]: a computed output twice as often as an input as-is or a view
        kind = pick(draw, [k for k in kinds for _ in range(2 if k == "node" else 1)])
        if kind == "node":
            outputs.append(Output("node", pick(draw, nodes_left)))
        elif kind == "input":
            outputs.append(Output("input", pick(draw, inputs_left)))
        else:
            of_outputs = [o.ref for o in outputs if o.kind == "node"] if "output_is_view_of_output" in allow else []
            outputs.append(Output("view", pick(draw, xs + of_outputs), draw(views(shape=shape))))
    kinds_saved = {"x": "saved_input", "o": "saved_output", "t": "saved_intermediate"}
    candidates = xs + [f"o{j}" for j in range(len(outputs))] + [f"t{k}" for k in range(len(nodes))]
    saved = _drawn_order(draw, [r for r in candidates if kinds_saved[r[0]] in allow and draw(BOOLS)])
    unused = [j for j in range(len(outputs)) if "grad_unused" in allow and draw(BOOLS)]
    # The same tensor returned twice gets one declared derivative: its copies' grads are all used or all
    # ignored, as the first copy's (NOTE [valid comparisons] in fuzzer/ir/validity.py).
    same = [(o.kind, o.ref) if o.kind != "view" else j for j, o in enumerate(outputs)]  # views are distinct
    firsts = sorted({same.index(key) for key in same})
    if set(firsts) <= set(unused) and not one_in_four(draw):  # NOTE [live gradient]: one grad at least is used
        unused.remove(pick(draw, firsts))
    unused = tuple(j for j, key in enumerate(same) if same.index(key) in unused)
    nones = some("backward_returns_none", range(n_in))
    if nones and len(nones) == n_in and not one_in_four(draw):  # NOTE [live gradient]: one input at least gets one
        keep = pick(draw, list(nones))
        nones = tuple(i for i in nones if i != keep)
    style = draw(style_st)
    rules = [r for r in vmap_rules if r == "none"] if style == "legacy" else list(vmap_rules)
    rule = draw(_vmap_rule_st(tuple(rules))) if rules else "none"
    jvp_rule = "custom_jvp" in allow and draw(BOOLS)
    grad_rule = pick(draw, GRAD_RULES[1:]) if rarely("custom_gradient") else "exact"  # NOTE [custom gradients]
    once = rarely("once_differentiable")
    materialize = not rarely("materialize_grads_false")
    refs = [o.ref for o in outputs]
    nondiff = some(
        "mark_non_differentiable", [j for j, o in enumerate(outputs) if o.kind == "node" and refs.count(o.ref) == 1]
    )
    fn = prune(repair_saved(FunctionDef(n_in, tuple(nodes), tuple(outputs), saved, unused, nones, style, rule)))
    # Tensors kept on ctx break a documented rule (NOTE [valid comparisons] in fuzzer/ir/validity.py): no
    # comparison of such a Function is a torch finding, so it is drawn for 1 Function in 8 only.
    ctx = "saved_on_ctx" in allow and draw(ints(0, 7)) == 7
    on_ctx = tuple(r for r in fn.saved if one_in_four(draw)) if ctx else ()
    detached = some("saved_detached", fn.saved)
    dirty = tuple(
        i
        for i in range(n_in)
        if Output("input", f"x{i}") in fn.outputs
        and not any(f"x{i}" in n.args for n in fn.nodes)
        and not any(o.kind == "view" and o.ref == f"x{i}" for o in fn.outputs)
        and rarely("mark_dirty")
    )
    if dirty:  # the dirty input must not be saved (a jvp rule updates its tangent in place; a hand-written
        # vmap rule returns it as received, NOTE [mark_dirty vmap rule] in fuzzer/codegen/fn_rules.py)
        gone = {r for r in fn.saved if value_provided_by_saved(fn, r) in {f"x{i}" for i in dirty}}
        fn = replace(fn, saved=tuple(r for r in fn.saved if r not in gone))
        on_ctx = tuple(r for r in on_ctx if r not in gone)
        detached = tuple(r for r in detached if r not in gone)
    # NOTE [promises] in fuzzer/judge/compare.py: the documented-illegal jvp (no view for an aliasing
    # output), whose error plain forward AD promises, drawn rarely
    not_view = jvp_rule and bool(input_aliases(fn)) and rarely("jvp_not_view")
    # the documented-illegal jvp that returns an input's tangent itself for a new output (x + s), drawn
    # rarely: values are then not compared (validity.RULES), torch's own errors still are findings
    alias = jvp_rule and shifts_an_input(fn) and rarely("jvp_alias")
    # NOTE [in-place forward]: a node computed in place on an intermediate nothing else reads
    reads = [a for n in fn.nodes for a in n.args] + [o.ref for o in fn.outputs] + list(fn.saved)

    def own(a: str) -> bool:  # an intermediate nothing but this node reads
        return a[0] == "t" and reads.count(a) == 1

    def target(n: Node) -> Node | None:  # the node in place on its first argument (mul, add: either one)
        if n.op not in INPLACE_OPS:
            return None
        if own(n.args[0]):
            return replace(n, inplace=True)
        if n.op in ("mul", "add") and own(n.args[1]):
            return replace(n, args=n.args[::-1], inplace=True)
        return None

    in_place = set(some("inplace_in_forward", [k for k in sorted(forward_nodes(fn)) if target(fn.nodes[k])]))
    nodes = tuple(target(n) or n if k in in_place else n for k, n in enumerate(fn.nodes))
    return replace(
        fn,
        nodes=nodes,
        dirty=dirty,
        jvp_rule=jvp_rule,
        jvp_not_view=not_view,
        jvp_alias=alias,
        once_differentiable=once,
        materialize_grads=materialize,
        non_differentiable=nondiff,
        on_ctx=on_ctx,
        detached=detached,
        non_tensor_output=rarely("non_tensor_output"),
        scalars=scalars,
        grad_rule=grad_rule,
    )
