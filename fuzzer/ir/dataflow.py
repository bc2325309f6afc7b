"""Data flow inside a Function: which forward values backward needs, which it can get from saved
tensors, which gradients flow; repairs and pruning that keep a case valid."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from .case import INVERTIBLE_VIEWS, Case, FunctionDef, ref_kind
from .ops import derivative_reads, op_kind
from .shapes import in_dims_of, level_input_shapes, level_output_shapes

# NOTE [backward values]
# The backward needs some forward values (x for x**3, a and b for a*b, exp's result for exp). Inside
# backward only ctx.saved_tensors are available, so each needed value must come from a saved tensor:
# a saved input ``x<i>``; a saved intermediate ``t<k>``; a saved output ``o<j>`` that *is* the value (an
# input returned as-is, a node returned) or is an invertible view of it (view_as, reshape, ...), which
# backward undoes. Anything else is recomputed in backward from values that are available. Where the
# saved output is an alias of an input, backward's graph hangs off the *output*: exactly the seed bug's
# shape. :func:`available_values` computes the closure; :func:`missing_values` what still needs saving.


def grad_flows(fn: FunctionDef, outputs: Collection[int] | None = None) -> tuple[set[str], set[str]]:
    """(nodes whose gradient is non-zero in backward, inputs that receive a gradient term), from the
    grads of ``outputs`` (default: every output)."""
    live_nodes: set[str] = set()
    live_inputs: set[str] = set()
    for j, o in enumerate(fn.outputs):
        if j in fn.unused_grads or j in fn.non_differentiable or (outputs is not None and j not in outputs):
            continue
        if o.kind == "node" or (o.kind == "view" and o.ref.startswith("t")):
            live_nodes.add(o.ref)
        else:
            live_inputs.add(o.ref)
    for k in range(len(fn.nodes) - 1, -1, -1):
        name = f"t{k}"
        if name not in live_nodes:
            continue
        for a in fn.nodes[k].args:
            (live_nodes if a.startswith("t") else live_inputs).add(a)
    return live_nodes, live_inputs


def live_outputs(fn: FunctionDef) -> tuple[int, ...]:
    """The outputs whose gradient backward passes on to an input it returns a gradient for (NOTE [live
    gradient] in strategies/functions.py): ``f`` using none of them has a reverse-mode derivative that
    is zero by construction."""
    gets = {f"x{i}" for i in range(fn.n_inputs) if i not in fn.none_grads}
    return tuple(j for j in range(len(fn.outputs)) if grad_flows(fn, (j,))[1] & gets)


def needed_values(fn: FunctionDef) -> list[str]:
    """Values the backward reads (before recomputation), in a stable order."""
    live_nodes, _ = grad_flows(fn)
    need: list[str] = []
    for k, node in enumerate(fn.nodes):
        if f"t{k}" not in live_nodes:
            continue
        reads = derivative_reads(op_kind(node.op))  # NOTE [op table]
        vals = [f"t{k}"] if "self" in reads else [a for i, a in enumerate(node.args) if f"a{i}" in reads]
        for v in vals:
            if v not in need:
                need.append(v)
    return need


def value_provided_by_saved(fn: FunctionDef, ref: str) -> str | None:
    """Which value a saved ref provides (``o<j>`` resolves through aliases and invertible views)."""
    kind, idx = ref_kind(ref)
    if kind in "xt":
        return ref
    o = fn.outputs[idx]
    if o.kind in ("node", "input"):
        return o.ref
    if o.view is not None and o.view.op in INVERTIBLE_VIEWS:
        return o.ref
    return None


def available_values(fn: FunctionDef) -> set[str]:
    avail = {v for r in fn.saved if (v := value_provided_by_saved(fn, r)) is not None}
    changed = True
    while changed:
        changed = False
        for k, node in enumerate(fn.nodes):
            name = f"t{k}"
            if name not in avail and all(a in avail for a in node.args):
                avail.add(name)
                changed = True
    return avail


def missing_values(fn: FunctionDef) -> list[str]:
    """Inputs that must additionally be saved so every needed value can be obtained (recomputing nodes)."""
    avail = available_values(fn)
    missing: list[str] = []

    def require(v: str) -> None:
        if v in avail:
            return
        if v.startswith("x"):
            if v not in missing:
                missing.append(v)
            avail.add(v)
            return
        for a in fn.nodes[int(v[1:])].args:
            require(a)
        avail.add(v)

    for v in needed_values(fn):
        require(v)
    return missing


def repair_saved(fn: FunctionDef) -> FunctionDef:
    """Return ``fn`` with inputs appended to ``saved`` until backward can obtain every value it needs."""
    missing = missing_values(fn)
    if not missing:
        return fn
    return replace(fn, saved=tuple(fn.saved) + tuple(missing))


def live_nodes(fn: FunctionDef) -> set[int]:
    """Node indices the forward must compute (reachable from outputs or saved intermediates)."""
    roots = [o.ref for o in fn.outputs if o.ref.startswith("t")]
    roots += [r for r in fn.saved if r.startswith("t")]
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        k = int(stack.pop()[1:])
        if k in seen:
            continue
        seen.add(k)
        stack.extend(a for a in fn.nodes[k].args if a.startswith("t"))
    return seen


def forward_nodes(fn: FunctionDef) -> set[int]:
    """Node indices forward itself computes: those the outputs need (a legacy forward also computes what it
    saves; setup_context recomputes saved intermediates on its own)."""
    if fn.style == "legacy":
        return live_nodes(fn)
    seen: set[int] = set()
    stack = [o.ref for o in fn.outputs if o.ref.startswith("t")]
    while stack:
        k = int(stack.pop()[1:])
        if k not in seen:
            seen.add(k)
            stack.extend(a for a in fn.nodes[k].args if a.startswith("t"))
    return seen


def prune(fn: FunctionDef) -> FunctionDef:
    """Drop nodes nothing reads and renumber the rest (``t`` refs everywhere are rewritten)."""
    keep = sorted(live_nodes(fn))
    if len(keep) == len(fn.nodes):
        return fn
    mapping = {f"t{old}": f"t{new}" for new, old in enumerate(keep)}

    def m(r: str) -> str:
        return mapping.get(r, r)

    nodes = tuple(replace(fn.nodes[k], args=tuple(m(a) for a in fn.nodes[k].args)) for k in keep)
    outputs = tuple(replace(o, ref=m(o.ref)) for o in fn.outputs)
    return replace(
        fn,
        nodes=nodes,
        outputs=outputs,
        saved=tuple(m(r) for r in fn.saved),
        on_ctx=tuple(m(r) for r in fn.on_ctx),
        detached=tuple(m(r) for r in fn.detached),
    )


def repair_vmap_dims(case: Case) -> Case:
    """Clamp every vmap level's ``in_dims``/``out_dims`` to dims that exist at that level (to 0 where
    not), so a stack drawn before the shapes are known fits them."""
    n = case.function.n_inputs
    transforms = list(case.transforms)
    for _ in range(len(transforms)):
        c = replace(case, transforms=tuple(transforms))
        ins, outs = level_input_shapes(c), level_output_shapes(c)
        changed = False
        for level, t in enumerate(reversed(transforms)):
            if t.name != "vmap":
                continue
            i = len(transforms) - 1 - level
            dims = tuple(d if d is None or d <= len(ins[level][k]) else 0 for k, d in enumerate(in_dims_of(t, n)))
            out_dims = t.out_dims if t.out_dims <= len(outs[level]) else 0
            if dims != in_dims_of(t, n) or out_dims != t.out_dims:
                transforms[i] = replace(t, in_dims=dims, out_dims=out_dims)
                changed = True
        if not changed:
            break
    return replace(case, transforms=tuple(transforms))


# ----------------------------------------------------------------------------------- validation
