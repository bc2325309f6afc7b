"""The derivative rules of a rendered Function: ``backward``, the ``jvp`` rule and the hand-written ``vmap``
rule, each as the lines of its staticmethod. Torch-free. The invariants they keep are
:mod:`fuzzer.codegen.function`'s (the exact vector-Jacobian product less the terms dropped on purpose;
the jvp declaring the same derivative, NOTE [declared derivative]).
"""

from __future__ import annotations

import re

from ..ir.case import INVERTIBLE_VIEWS, FunctionDef, Node, View
from ..ir.dataflow import grad_flows, needed_values, value_provided_by_saved
from ..ir.ops import fill, op_kind, uses
from ..ir.shapes import output_shapes
from ..ir.validity import input_aliases, jvp_alias, jvp_not_view
from .fn_exprs import (
    CLASS_NAME,
    arg_names,
    deps_of,
    dirty_zero_inputs,
    grad_rule_expr,
    node_expr,
    node_lines,
    returns_expr,
    shape_text,
    tup,
    view_expr,
)


def _op_values(node: Node, args: list[str], self: str) -> dict[str, str]:
    """The placeholders of a node's templates but its tangents and gradient (NOTE [op table])."""
    pm1 = f" ** {node.exponent - 1}" if node.exponent > 2 else ""
    return {"a0": args[0], "a1": args[-1], "p": str(node.exponent), "pm1": pm1, "s": f"s{node.scalar}", "self": self}


def jvp_rule_lines(fn: FunctionDef) -> list[str]:
    """The jvp staticmethod, from the inputs saved with save_for_forward.

    NOTE [declared derivative]
    The backward declares a derivative: the exact one, less the terms it drops on purpose (grads of
    ``unused_grads`` outputs, every grad of a ``none_grads`` input). The jvp rule declares the same
    one: a ``none_grads`` input's tangent counts as zero, an ``unused_grads`` node output gets a zero
    tangent. So backward and jvp agree by construction, and a Function that ignores a grad on purpose
    (the seed) stays comparable under jacrev vs jacfwd. The one exception is forced by forward AD: an
    output that is an input as-is or a view must get a view of its base's tangent, so its dropped term
    cannot be dropped here (NOTE [valid comparisons] in :mod:`fuzzer.ir.validity` does not compare the two
    rules where that matters)."""
    n = fn.n_inputs
    xs = [f"x{i}" for i in range(n) if i not in fn.dirty]  # what save_for_forward saved
    lines = ["    @staticmethod", f"    def jvp(ctx, {', '.join('t' + x for x in arg_names(fn))}):"]
    if xs:
        lines.append(f"        {tup(xs)} = ctx.saved_tensors")
    lines += [f"        s{i} = ctx.s{i}" for i in range(len(fn.scalars))]
    if n > 1:
        lines += [f"        t{x} = torch.zeros_like({x}) if t{x} is None else t{x}" for x in xs]
    # mark_dirty: forward doubled the input in place, so its tangent is doubled in place and returned as
    # the output's tangent (the same tensor, as forward AD checks); no tangent stays none
    for i in fn.dirty:
        lines += [f"        if tx{i} is not None:", f"            tx{i}.mul_(2)"]
    live = deps_of(fn, [o.ref for o in fn.outputs])
    reads = {k: uses(op_kind(fn.nodes[k].op).tangent) for k in live}  # NOTE [op table]
    values = [f"t{k}" for k in live if "self" in reads[k]]
    values += [a for k in live for i, a in enumerate(fn.nodes[k].args) if f"a{i}" in reads[k]]
    lines += node_lines(fn, deps_of(fn, values), "        ")

    def tan(v: str) -> str:
        return f"t{v}" if v.startswith("x") else f"d{v}"

    def node_tan(v: str) -> str:  # the tangent a node reads: zero for a none_grads input (NOTE [declared derivative])
        return f"torch.zeros_like({v})" if v.startswith("x") and int(v[1:]) in fn.none_grads else tan(v)

    for k in sorted(live):
        node, a = fn.nodes[k], fn.nodes[k].args
        kind = op_kind(node.op)  # NOTE [op table]
        e = fill(kind.tangent, **_op_values(node, a, f"t{k}"), t0=node_tan(a[0]), t1=node_tan(a[-1]))
        # a new tensor, not the input's tangent itself: the jvp must match forward's view behaviour
        # (extending.html, forward mode AD), but where the rule-breaking jvp_alias returns it itself
        if kind.new_tangent and re.fullmatch(r"tx\d+", e) and not (kind.aliasable and jvp_alias(fn)):
            e = f"{e}.clone()"
        lines.append(f"        dt{k} = {e}")
    # NOTE [custom gradients]: a computed output's tangent as the rule treats it, once per node (a view
    # output of the node is a view of that tangent)
    out_tan: dict[str, str] = {}
    if fn.grad_rule != "exact":
        for r in dict.fromkeys(o.ref for o in fn.outputs if o.ref.startswith("t")):
            out_tan[r] = f"o{tan(r)}"
            lines.append(f"        {out_tan[r]} = {grad_rule_expr(tan(r), fn.grad_rule)}")
    # Forward AD requires the tangent of an output that is a view (or an input as-is) to be a view too.
    dirty = {f"x{i}" for i in fn.dirty}
    outs = [
        out_tan.get(o.ref, tan(o.ref))
        if o.kind == "node" or (o.kind == "input" and o.ref in dirty)
        else view_expr(out_tan.get(o.ref, tan(o.ref)), o.view or View("view_as"))
        for o in fn.outputs
    ]
    if jvp_not_view(fn):  # NOTE [promises]: the documented-illegal variant, the same values but no view
        outs = [f"{e}.clone()" if j in input_aliases(fn) else e for j, e in enumerate(outs)]
    outs = [
        "None"
        if j in fn.non_differentiable
        else f"torch.zeros_like({e})"
        if j in fn.unused_grads and o.kind == "node"
        else e
        for j, (o, e) in enumerate(zip(fn.outputs, outs, strict=True))
    ]  # no tangent for a non-differentiable output; zero for a dropped one (NOTE [declared derivative])
    outs += ["None"] if fn.non_tensor_output else []
    lines.append(f"        return {returns_expr(outs)}")
    return lines


def vmap_rule_lines(fn: FunctionDef) -> list[str]:
    """A hand-written vmap rule: move batch dims to the front, apply the Function per sample, stack.

    Calling ``apply`` inside the rule (as the torch docs' examples do) keeps the Function's backward in
    use under outer grad levels; a rule computing forward with plain ops would bypass it.

    NOTE [mark_dirty vmap rule]
    An input the Function modifies in place (``mark_dirty``) must come back as the very object the rule
    received (torch maps it back to the caller's tensor by identity: ``wrap_outputs_maintaining_identity``
    in torch/_functorch/autograd_function.py), with its own ``in_dims`` entry as out_dim, batched or not.
    Its update has to happen exactly once, through the Function (so its declared backward and jvp stay
    in use): sample 0's ``apply`` gets the whole input (forward only doubles it, which no other output
    reads; a backward that materializes its output's None grad takes the zeros' shape from ctx, recorded
    in ``setup_context``), every other sample a clone whose update is thrown away. A
    per-sample slice instead would be an in-place update of a view, which autograd refuses for a
    Function with several outputs; the input itself per sample would double an unbatched input B times.
    """
    xs = [f"x{i}" for i in range(fn.n_inputs)]
    moved = [x for i, x in enumerate(xs) if i not in fn.dirty]
    n_out = len(fn.outputs)
    if len(moved) == 1:  # the batch dim of the one input moved to the front, or the input expanded
        x, d = moved[0], f"in_dims[{moved[0][1:]}]"
        front = [f"        {x} = {x}.movedim({d}, 0) if {d} is not None else {x}.expand(info.batch_size, *{x}.shape)"]
    elif moved:
        dims = "in_dims" if not fn.dirty else f"({', '.join(f'in_dims[{x[1:]}]' for x in moved)})"
        front = [
            f"        {tup(moved)} = [",
            "            x.movedim(d, 0) if d is not None else x.expand(info.batch_size, *x.shape)",
            f"            for x, d in zip(({', '.join(moved)}), {dims})",
            "        ]",
        ]
    else:
        front = []
    per_sample = [f"({x} if i == 0 else {x}.clone())" if int(x[1:]) in fn.dirty else f"{x}[i]" for x in xs]
    if fn.dirty:  # NOTE [mark_dirty vmap rule]
        front.append("        # a dirty input is updated once (by sample 0) and returned as the object received")
    lines = [
        "    @staticmethod",
        f"    def vmap(info, in_dims, {', '.join(arg_names(fn))}):",
        *front,
        f"        outs = [{CLASS_NAME}.apply({', '.join(per_sample + arg_names(fn)[len(xs) :])}) for i in range(info.batch_size)]",
    ]
    scale = " * 2" if fn.vmap_rule == "custom_wrong" else ""
    if fn.vmap_rule == "custom_wrong":
        lines.append("        # planted bug: this rule contradicts forward (outputs doubled)")
    if fn.dirty:  # NOTE [mark_dirty vmap rule]
        rets, dims = [], []
        for j, o in enumerate(fn.outputs):
            if o.kind == "input" and int(o.ref[1:]) in fn.dirty:
                rets.append(o.ref)
                dims.append(f"in_dims[{o.ref[1:]}]")
            else:
                rets.append(f"torch.stack([out[{j}] for out in outs]){scale}")
                dims.append("0")
        if fn.non_tensor_output:
            rets.append("outs[0][-1]")
            dims.append("None")
        if len(rets) == 1:
            lines.append(f"        return {rets[0]}, {dims[0]}")
        else:
            lines.append(f"        return ({', '.join(rets)}), ({', '.join(dims)})")
    elif fn.non_tensor_output:
        dims = ", ".join(["0"] * n_out + ["None"])
        lines.append(f"        stacked = [torch.stack(o){scale} for o in zip(*[out[:-1] for out in outs])]")
        lines.append(f"        return (*stacked, outs[0][-1]), ({dims})")
    elif n_out == 1:
        lines.append(f"        return torch.stack(outs){scale}, 0")
    else:
        lines.append(f"        return tuple(torch.stack(o){scale} for o in zip(*outs)), ({', '.join(['0'] * n_out)})")
    return lines


# ----------------------------------------------------------------------------------- backward


def _unview_value(name: str, v: View, base: tuple[int, ...]) -> str:
    if v.op == "view_as":
        return name
    if v.op == "reshape":
        return f"{name}.reshape({shape_text(base) if base else '()'})"
    if v.op == "unsqueeze":
        return f"{name}.squeeze({v.dim})"
    if v.op == "squeeze":
        return f"{name}.unsqueeze({v.dim})"
    assert v.op == "transpose"
    return f"{name}.transpose({v.dim}, {v.dim1})"


def _unview_grad(g: str, v: View, base: tuple[int, ...]) -> str:
    if v.op in INVERTIBLE_VIEWS:
        return _unview_value(g, v, base)
    zeros = f"{g}.new_zeros({shape_text(base) if base else '()'})"
    if v.op == "select":
        return f"{zeros}.select_scatter({g}, {v.dim}, {v.index})"
    return f"{zeros}.slice_scatter({g}, {v.dim}, {v.index}, {v.index + v.length})"


def backward_lines(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> list[str]:
    gs = [f"g{j}" for j in range(len(fn.outputs))] + (["_g_int"] if fn.non_tensor_output else [])
    lines = ["    @staticmethod"]
    if fn.once_differentiable:
        lines.append("    @once_differentiable")
    lines.append(f"    def backward(ctx, {', '.join(gs)}):")
    if fn.unused_grads:
        unused = ", ".join(f"g{j}" for j in fn.unused_grads)
        lines[-1] += f"  # NB: {unused} intentionally not used in computation"
    if fn.none_grads:
        nones = ", ".join(f"x{i}" for i in fn.none_grads)
        lines.append(f"        # NB: returns None for {nones} on purpose")
    from_saved = [r for r in fn.saved if r not in fn.on_ctx]
    if from_saved:
        lines.append(f"        {tup(from_saved)} = ctx.saved_tensors")
    lines += [f"        s{i} = ctx.s{i}" for i in range(len(fn.scalars))]
    lines += [f"        {r} = ctx.{r}" for r in fn.on_ctx]
    skipped = set(fn.unused_grads) | set(fn.non_differentiable)
    if not fn.materialize_grads:
        shapes = output_shapes(fn, base)
        dirty_zeros = dirty_zero_inputs(fn)
        for j, o in enumerate(fn.outputs):
            if j not in skipped:
                shape = shape_text(shapes[j]) if shapes[j] else "()"
                if o.kind == "input" and int(o.ref[1:]) in dirty_zeros:
                    shape = f"ctx.{o.ref}_shape"
                lines.append(f"        g{j} = torch.zeros({shape}, dtype=torch.{dtype}) if g{j} is None else g{j}")
    val: dict[str, str] = {}
    for r in fn.saved:
        v = value_provided_by_saved(fn, r)
        if v is None or v in val:
            continue
        o = fn.outputs[int(r[1:])] if r.startswith("o") else None
        if o is not None and o.kind == "view" and o.view is not None and o.view.op != "view_as":
            shape = base  # the base of a view output is an input or a node: both have the base shape
            lines.append(f"        {v} = {_unview_value(r, o.view, shape)}")
            val[v] = v
        else:
            val[v] = r

    def ensure(v: str) -> None:
        if v in val:
            return
        k = int(v[1:])
        for a in fn.nodes[k].args:
            ensure(a)
        lines.append(f"        {v} = {node_expr(fn, k, val)}")
        val[v] = v

    for v in needed_values(fn):
        ensure(v)

    terms: dict[str, list[str]] = {}
    for j, o in enumerate(fn.outputs):
        if j in skipped:
            continue
        g = f"g{j}"
        if o.kind == "input" and int(o.ref[1:]) in fn.dirty:
            g = f"{g} * 2"  # forward returned 2 * x, in place
        if o.kind == "view" and o.view is not None:
            g = _unview_grad(g, o.view, base)
        if o.ref.startswith("t"):  # NOTE [custom gradients]: a computed output's gradient, as the rule says
            g = grad_rule_expr(g, fn.grad_rule)
        terms.setdefault(o.ref, []).append(g)
    live, _ = grad_flows(fn)
    for k in range(len(fn.nodes) - 1, -1, -1):
        name = f"t{k}"
        if name not in live or name not in terms:
            continue
        ts = terms[name]
        if len(ts) == 1 and re.fullmatch(r"g\d+", ts[0]):
            g = ts[0]
        else:
            g = f"g{name}"
            lines.append(f"        {g} = {' + '.join(ts)}")
        node = fn.nodes[k]
        a = node.args

        def V(x: str) -> str:
            return val.get(x, x)

        values = _op_values(node, [V(x) for x in a], V(name))
        contrib = [(a[i], fill(t, **values, g=g)) for i, t in enumerate(op_kind(node.op).vjp)]  # NOTE [op table]
        for target, term in contrib:
            terms.setdefault(target, []).append(term)
    rets = []
    for i in range(fn.n_inputs):
        ts = terms.get(f"x{i}")
        rets.append(" + ".join(ts) if ts and i not in fn.none_grads else "None")
    rets += ["None"] * len(fn.scalars)  # non-tensor inputs get no gradient
    lines.append(f"        return {returns_expr(rets)}")
    return lines
