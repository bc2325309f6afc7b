"""Render a case's custom ``torch.autograd.Function`` (the class ``Fn``) as Python source. Torch-free.

:func:`render_function` writes the class itself: ``forward`` (with ``setup_context``, or the legacy
``forward(ctx, ...)``), ``backward``, and the optional ``jvp`` and ``vmap`` staticmethods the
:class:`~fuzzer.ir.case.FunctionDef` asks for. :mod:`fuzzer.codegen.render` puts it into the script.

Invariants of the source it writes:

* Only vocabulary items of the case IR become code; names follow the IR's references: tensor inputs
  ``x<i>``, then non-tensor inputs ``s<i>`` (the Function's parameters, in that order), forward
  intermediates ``t<k>``, outputs ``o<j>``, grad_outputs ``g<j>``.
* The backward computes the exact vector-Jacobian product of the forward, less the terms it drops on
  purpose (``unused_grads``, ``none_grads``); every value it needs comes from what forward saved
  (``saved``, on ctx or through save_for_backward), recomputed from there where needed.
* The jvp rule declares the same derivative as the backward (NOTE [declared derivative]).
* A hand-written vmap rule calls ``Fn.apply`` per sample, so the Function's backward stays in use under
  outer levels; the planted ``custom_wrong`` rule doubles the outputs, and says so in a comment.
"""

from __future__ import annotations

import ast
import functools
import re
import threading
from typing import Any

from ..ir.case import INPLACE_OPS, INVERTIBLE_VIEWS, NON_TENSOR_OUTPUT, FunctionDef, View
from ..ir.dataflow import grad_flows, live_nodes, needed_values, value_provided_by_saved
from ..ir.shapes import output_shapes
from ..ir.validity import input_aliases, jvp_alias, jvp_not_view

CLASS_NAME = "Fn"


def _tup(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else ", ".join(items)


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(map(str, shape))})"


# ------------------------------------------------------------------------------------ forward


def _node_expr(fn: FunctionDef, k: int, val: dict[str, str] | None = None, *, forward: bool = False) -> str:
    """Node ``k``'s expression; ``forward`` (forward itself): in place where the node says so (NOTE [in-place
    forward]); everything that recomputes a value (setup_context, jvp, backward) does it out of place."""
    node = fn.nodes[k]
    a = [val.get(x, x) if val else x for x in node.args]
    if forward and node.inplace:
        rest = {"pow": [str(node.exponent)], "scale": [f"s{node.scalar}"], "shift": [f"s{node.scalar}"]}
        rest |= {"mul": [a[1]] if len(a) > 1 else [], "add": [a[1]] if len(a) > 1 else []}
        return f"{a[0]}.{INPLACE_OPS[node.op]}({', '.join(rest.get(node.op, []))})"
    if node.op == "pow":
        return f"{a[0]} ** {node.exponent}"
    if node.op == "mul":
        return f"{a[0]} * {a[1]}"
    if node.op == "add":
        return f"{a[0]} + {a[1]}"
    if node.op == "scale":
        return f"{a[0]} * s{node.scalar}"
    if node.op == "shift":
        return f"{a[0]} + s{node.scalar}"
    return f"torch.{node.op}({a[0]})"


def grad_rule_expr(expr: str, rule: str) -> str:
    """A computed output's gradient (or tangent) ``expr`` as the Function's ``grad_rule`` treats it (NOTE
    [custom gradients] in fuzzer/ir/case.py)."""
    simple = re.fullmatch(r"[\w.]+", expr) is not None
    if rule == "scaled":
        return f"{expr} * 0.5"
    if rule == "reversed":
        return f"-{expr}" if simple else f"-({expr})"
    if rule == "blocked":
        return f"{expr} * 0"
    if rule == "clipped":
        return f"{expr}.clamp(-1, 1)" if simple else f"({expr}).clamp(-1, 1)"
    return expr


def _view_expr(base: str, v: View, shift: int = 0) -> str:
    """``base`` viewed by ``v``; ``shift`` = 1 inside a vmap rule, where dim 0 is the batch dim."""
    d = v.dim + shift
    if v.op == "view_as":
        return f"{base}.view_as({base})"
    if v.op == "reshape":
        shape = ((-1,) if shift else ()) + tuple(v.shape)
        return f"{base}.reshape({_shape_text(shape) if shape else '()'})"
    if v.op in ("unsqueeze", "squeeze"):
        return f"{base}.{v.op}({d})"
    if v.op == "select":
        return f"{base}.select({d}, {v.index})"
    if v.op == "narrow":
        return f"{base}.narrow({d}, {v.index}, {v.length})"
    return f"{base}.transpose({d}, {v.dim1 + shift})"


def _output_exprs(fn: FunctionDef, shift: int = 0) -> list[str]:
    return [_view_expr(o.ref, o.view, shift) if o.kind == "view" and o.view else o.ref for o in fn.outputs]


def _node_lines(fn: FunctionDef, nodes: set[int], indent: str, *, forward: bool = False) -> list[str]:
    return [f"{indent}t{k} = {_node_expr(fn, k, forward=forward)}" for k in sorted(nodes)]


def _deps(fn: FunctionDef, roots: list[str]) -> set[int]:
    seen: set[int] = set()
    stack = [r for r in roots if r.startswith("t")]
    while stack:
        k = int(stack.pop()[1:])
        if k not in seen:
            seen.add(k)
            stack.extend(a for a in fn.nodes[k].args if a.startswith("t"))
    return seen


def _returns(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else ", ".join(exprs)


def _ctx_lines(fn: FunctionDef, name_of: dict[str, str], indent: str) -> list[str]:
    """What forward/setup_context tells ctx: saved tensors (save_for_backward, or ctx attributes; some
    detached), tensors saved for jvp, non-differentiable outputs, materialize_grads."""
    lines = [f"{indent}ctx.s{i} = s{i}" for i in range(len(fn.scalars))]
    if fn.dirty:
        lines.append(f"{indent}ctx.mark_dirty({', '.join(f'x{i}' for i in fn.dirty)})")

    def value(r: str) -> str:
        v = name_of.get(r, r)
        return f"{v}.detach()" if r in fn.detached else v

    for r in fn.on_ctx:
        lines.append(f"{indent}ctx.{r} = {value(r)}")
    on_saved = [value(r) for r in fn.saved if r not in fn.on_ctx]
    if on_saved:
        lines.append(f"{indent}ctx.save_for_backward({', '.join(on_saved)})")
    if fn.jvp_rule:  # every input but a dirty one (modified in place, it may not be saved)
        fwd = [f"x{i}" for i in range(fn.n_inputs) if i not in fn.dirty]
        lines.append(f"{indent}ctx.save_for_forward({', '.join(fwd)})" if fwd else f"{indent}pass")
    if fn.non_differentiable:
        lines.append(
            f"{indent}ctx.mark_non_differentiable({', '.join(name_of.get(f'o{j}', f'o{j}') for j in fn.non_differentiable)})"
        )
    if not fn.materialize_grads:
        lines.append(f"{indent}ctx.set_materialize_grads(False)")
        lines += [f"{indent}ctx.x{i}_shape = x{i}.shape" for i in _dirty_zeros(fn)]
    return lines


def _dirty_zeros(fn: FunctionDef) -> list[int]:
    """Dirty inputs whose output's None grad backward materializes, under a hand-written vmap rule: its
    sample 0 passes the whole batched input (NOTE [mark_dirty vmap rule]), so the zeros take the shape
    ``setup_context`` recorded, not the per-sample one."""
    if fn.vmap_rule not in ("custom", "custom_wrong") or fn.materialize_grads:
        return []
    skipped = set(fn.unused_grads) | set(fn.non_differentiable)
    return sorted(
        {
            int(o.ref[1:])
            for j, o in enumerate(fn.outputs)
            if o.kind == "input" and int(o.ref[1:]) in fn.dirty and j not in skipped
        }
    )


def _args(fn: FunctionDef) -> list[str]:
    """The Function's parameters: tensors x<i>, then non-tensor inputs s<i>."""
    return [f"x{i}" for i in range(fn.n_inputs)] + [f"s{i}" for i in range(len(fn.scalars))]


def _forward(fn: FunctionDef) -> list[str]:
    args = ", ".join(_args(fn))
    exprs = _output_exprs(fn)
    extra = [str(NON_TENSOR_OUTPUT)] if fn.non_tensor_output else []
    if fn.style == "legacy":
        lines = ["    @staticmethod", f"    def forward(ctx, {args}):"]
        lines += _node_lines(fn, live_nodes(fn), "        ", forward=True)
        name_of: dict[str, str] = {}
        needed = {r for r in fn.saved if r.startswith("o")} | {f"o{j}" for j in fn.non_differentiable}
        for j in range(len(fn.outputs)):
            r = f"o{j}"
            if r in needed:
                if not re.fullmatch(r"[xt]\d+", exprs[j]):
                    lines.append(f"        {r} = {exprs[j]}")
                    exprs[j] = r
                name_of[r] = exprs[j]
        lines += [f"        x{i}.mul_(2)" for i in fn.dirty]
        lines += _ctx_lines(fn, name_of, "        ")
        lines.append(f"        return {_returns(exprs + extra)}")
        return lines
    lines = ["    @staticmethod", f"    def forward({args}):"]
    computed = _deps(fn, [o.ref for o in fn.outputs])
    # a node that only one node output reads is computed in the return statement itself
    reads = [a for k in computed for a in fn.nodes[k].args] + [o.ref for o in fn.outputs]
    inline = {k for k in computed if reads.count(f"t{k}") == 1 and f"t{k}" in exprs}
    exprs = [
        _node_expr(fn, int(e[1:]), forward=True) if re.fullmatch(r"t\d+", e) and int(e[1:]) in inline else e
        for e in exprs
    ]
    lines += _node_lines(fn, computed - inline, "        ", forward=True)
    lines += [f"        x{i}.mul_(2)" for i in fn.dirty]
    lines.append(f"        return {_returns(exprs + extra)}")
    lines += ["", "    @staticmethod", "    def setup_context(ctx, inputs, output):"]
    recompute = _deps(fn, [r for r in fn.saved if r.startswith("t")])
    used = set(fn.saved) | {f"o{j}" for j in fn.non_differentiable} | {f"x{i}" for i in fn.dirty}
    if fn.jvp_rule:
        used |= {f"x{i}" for i in range(fn.n_inputs)}
    for k in recompute:
        used.update(fn.nodes[k].args)
    xs = [f"x{i}" if f"x{i}" in used else "_" for i in range(fn.n_inputs)] + [f"s{i}" for i in range(len(fn.scalars))]
    os_ = [f"o{j}" if f"o{j}" in used else "_" for j in range(len(fn.outputs))] + (["_"] if extra else [])
    if any(x != "_" for x in xs):
        lines.append(f"        {_tup(xs)} = inputs")
    used_outputs = [j for j, o in enumerate(os_) if o != "_"]
    name_of: dict[str, str] = {}
    if len(used_outputs) == 1 and not recompute and len(os_) > 1:
        name_of[os_[used_outputs[0]]] = f"output[{used_outputs[0]}]"  # one output read: no unpacking
    elif used_outputs:
        lines.append(f"        {os_[0] if len(os_) == 1 else _tup(os_)} = output")
    lines += _node_lines(fn, recompute, "        ")
    lines += _ctx_lines(fn, name_of, "        ") or ["        pass"]
    return lines


def _jvp_rule(fn: FunctionDef) -> list[str]:
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
    lines = ["    @staticmethod", f"    def jvp(ctx, {', '.join('t' + x for x in _args(fn))}):"]
    if xs:
        lines.append(f"        {_tup(xs)} = ctx.saved_tensors")
    lines += [f"        s{i} = ctx.s{i}" for i in range(len(fn.scalars))]
    if n > 1:
        lines += [f"        t{x} = torch.zeros_like({x}) if t{x} is None else t{x}" for x in xs]
    # mark_dirty: forward doubled the input in place, so its tangent is doubled in place and returned as
    # the output's tangent (the same tensor, as forward AD checks); no tangent stays none
    for i in fn.dirty:
        lines += [f"        if tx{i} is not None:", f"            tx{i}.mul_(2)"]
    live = _deps(fn, [o.ref for o in fn.outputs])
    values = [f"t{k}" for k in live if fn.nodes[k].op == "exp"]
    values += [a for k in live if fn.nodes[k].op in ("mul", "pow", "sin") for a in fn.nodes[k].args]
    lines += _node_lines(fn, _deps(fn, values), "        ")

    def tan(v: str) -> str:
        return f"t{v}" if v.startswith("x") else f"d{v}"

    def node_tan(v: str) -> str:  # the tangent a node reads: zero for a none_grads input (NOTE [declared derivative])
        return f"torch.zeros_like({v})" if v.startswith("x") and int(v[1:]) in fn.none_grads else tan(v)

    for k in sorted(live):
        node, a = fn.nodes[k], fn.nodes[k].args
        if node.op == "add":
            e = f"{node_tan(a[0])} + {node_tan(a[1])}"
        elif node.op == "mul":
            e = f"{node_tan(a[0])} * {a[1]} + {a[0]} * {node_tan(a[1])}"
        elif node.op == "pow":
            e = f"{node_tan(a[0])} * {node.exponent} * {a[0]}" + (
                f" ** {node.exponent - 1}" if node.exponent > 2 else ""
            )
        elif node.op == "sin":
            e = f"{node_tan(a[0])} * torch.cos({a[0]})"
        elif node.op == "scale":
            e = f"{node_tan(a[0])} * s{node.scalar}"
        elif node.op == "shift":  # a new tensor, not the input's tangent itself: the jvp must match
            e = node_tan(a[0])  # forward's view behaviour (extending.html, forward mode AD)
            e = f"{e}.clone()" if re.fullmatch(r"tx\d+", e) and not jvp_alias(fn) else e
        elif node.op == "round":  # NOTE [custom gradients]: straight through, a new tensor as for shift
            e = node_tan(a[0])
            e = f"{e}.clone()" if re.fullmatch(r"tx\d+", e) else e
        else:
            e = f"{node_tan(a[0])} * t{k}"
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
        else _view_expr(out_tan.get(o.ref, tan(o.ref)), o.view or View("view_as"))
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
    lines.append(f"        return {_returns(outs)}")
    return lines


def _vmap_rule(fn: FunctionDef) -> list[str]:
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
            f"        {_tup(moved)} = [",
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
        f"    def vmap(info, in_dims, {', '.join(_args(fn))}):",
        *front,
        f"        outs = [{CLASS_NAME}.apply({', '.join(per_sample + _args(fn)[len(xs) :])}) for i in range(info.batch_size)]",
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
        return f"{name}.reshape({_shape_text(base) if base else '()'})"
    if v.op == "unsqueeze":
        return f"{name}.squeeze({v.dim})"
    if v.op == "squeeze":
        return f"{name}.unsqueeze({v.dim})"
    assert v.op == "transpose"
    return f"{name}.transpose({v.dim}, {v.dim1})"


def _unview_grad(g: str, v: View, base: tuple[int, ...]) -> str:
    if v.op in INVERTIBLE_VIEWS:
        return _unview_value(g, v, base)
    zeros = f"{g}.new_zeros({_shape_text(base) if base else '()'})"
    if v.op == "select":
        return f"{zeros}.select_scatter({g}, {v.dim}, {v.index})"
    return f"{zeros}.slice_scatter({g}, {v.dim}, {v.index}, {v.index + v.length})"


def _backward(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> list[str]:
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
        lines.append(f"        {_tup(from_saved)} = ctx.saved_tensors")
    lines += [f"        s{i} = ctx.s{i}" for i in range(len(fn.scalars))]
    lines += [f"        {r} = ctx.{r}" for r in fn.on_ctx]
    skipped = set(fn.unused_grads) | set(fn.non_differentiable)
    if not fn.materialize_grads:
        shapes = output_shapes(fn, base)
        dirty_zeros = _dirty_zeros(fn)
        for j, o in enumerate(fn.outputs):
            if j not in skipped:
                shape = _shape_text(shapes[j]) if shapes[j] else "()"
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
        lines.append(f"        {v} = {_node_expr(fn, k, val)}")
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

        if node.op == "add":
            contrib = [(a[0], g), (a[1], g)]
        elif node.op == "mul":
            contrib = [(a[0], f"{g} * {V(a[1])}"), (a[1], f"{g} * {V(a[0])}")]
        elif node.op == "pow":
            p = node.exponent
            contrib = [(a[0], f"{g} * {p} * {V(a[0])}" + (f" ** {p - 1}" if p > 2 else ""))]
        elif node.op == "sin":
            contrib = [(a[0], f"{g} * torch.cos({V(a[0])})")]
        elif node.op == "scale":
            contrib = [(a[0], f"{g} * s{node.scalar}")]
        elif node.op in ("shift", "round"):  # round: straight through (NOTE [custom gradients])
            contrib = [(a[0], g)]
        else:  # exp
            contrib = [(a[0], f"{g} * {V(name)}")]
        for target, term in contrib:
            terms.setdefault(target, []).append(term)
    rets = []
    for i in range(fn.n_inputs):
        ts = terms.get(f"x{i}")
        rets.append(" + ".join(ts) if ts and i not in fn.none_grads else "None")
    rets += ["None"] * len(fn.scalars)  # non-tensor inputs get no gradient
    lines.append(f"        return {_returns(rets)}")
    return lines


def render_function(
    fn: FunctionDef, base: tuple[int, ...], dtype: str = "float64", *, compact: bool = False
) -> list[str]:
    """The lines of the class ``Fn`` for ``fn``, whose tensor inputs have the base shape ``base`` and
    dtype ``dtype`` (torch's name for it). ``compact`` (a published repro): a value assigned on the line
    before a ``return`` of just that name is returned directly."""
    lines = list(_class_lines_of(fn, base, dtype))
    if not compact:
        return lines
    return _inputs_directly(_return_directly(_drop_unused(lines)))


@functools.lru_cache(maxsize=64)
def _class_lines_of(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> tuple[str, ...]:
    """:func:`_class_lines`, once per Function: a campaign's group of cases shares one (NOTE [case groups]
    in strategies/cases.py), and the shrinker and ablation render one Function many times."""
    return tuple(_class_lines(fn, base, dtype))


def render_plain_forward(fn: FunctionDef) -> list[str] | None:
    """The Function's ``forward`` as a plain function ``forward`` (NOTE [plain forward] in
    fuzzer/codegen/render.py), written compactly; None for a legacy ``forward(ctx, ...)``, whose body
    uses ``ctx``."""
    if fn.style == "legacy":
        return None
    lines = _forward(fn)
    body = lines[1 : lines.index("")]  # up to setup_context, @staticmethod dropped
    return _return_directly([line[4:] for line in body])


# NOTE [ast lock]
# CPython 3.11's ast module keeps its constructor's recursion depth in interpreter-wide state, so two
# threads parsing at once (a garbage-collection callback may switch threads mid-conversion) can raise
# "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). A campaign renders repros on
# its driver thread and on its verification threads (NOTE [one staging folder per bucket] in
# fuzzer/publish/verify.py), so every ast.parse of the renderer holds this lock.
AST_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> Any:
    """``ast.parse`` under :data:`AST_LOCK` (NOTE [ast lock]): an ``ast.Module`` (an ``ast.Expression`` for
    ``mode="eval"``)."""
    with AST_LOCK:
        return ast.parse(source, mode=mode)


_ASSIGN = re.compile(r"(\s+)(\w+) = (.+)")


#: A tangent's None-default in a jvp rule: ``tx1 = torch.zeros_like(x1) if tx1 is None else tx1``.
_TANGENT_DEFAULT = re.compile(r"(\s+)(tx\d+) = torch\.zeros_like\(\w+\) if \2 is None else \2")


def _drop_unused(lines: list[str]) -> list[str]:
    """A jvp rule's tangent None-defaults that nothing after them in the rule reads. Only those: any other
    line, even one whose value is unused, can raise (undoing a view of a saved output under vmap does in
    real torch bugs), and raising may be the bug."""
    out = list(lines)
    changed = True
    while changed:
        changed = False
        for i, line in enumerate(out):
            m = _TANGENT_DEFAULT.fullmatch(line)
            if not m:
                continue
            end = next((j for j in range(i + 1, len(out)) if out[j].startswith(("    def ", "    @"))), len(out))
            if not any(re.search(rf"\b{m.group(2)}\b", later) for later in out[i + 1 : end]):
                del out[i]
                changed = True
                break
    return out


#: Longest line :func:`_return_directly` writes by substituting a value into a ``return``.
_RETURN_WIDTH = 100


def _inputs_directly(lines: list[str]) -> list[str]:
    """In setup_context, ``x0, x1 = inputs`` and ``o0 = output`` read only by ``ctx`` calls: the calls read
    ``inputs[1]``, ``output`` (``output[j]`` of several outputs) instead, the unpacking dropped, and a
    call given every input in order gets ``*inputs`` (``ctx.save_for_backward(*inputs)``). ``inputs`` is
    what apply got, so ``*inputs`` only where those are exactly the names unpacked (no ``_``). Left as
    it is where any other line reads the names or a call would pass :data:`_RETURN_WIDTH`."""
    try:
        start = lines.index("    def setup_context(ctx, inputs, output):")
    except ValueError:
        return lines
    end = next((j for j in range(start + 1, len(lines)) if not lines[j].startswith("        ")), len(lines))
    body = lines[start + 1 : end]
    expr: dict[str, str] = {}
    every_input: list[str] | None = None
    k = 0
    for line in body:
        tree = parse(line.strip())
        stmt = tree.body[0] if len(tree.body) == 1 else None
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id in ("inputs", "output")
        ):
            break
        src, target = stmt.value.id, stmt.targets[0]
        if isinstance(target, ast.Name):
            expr[target.id] = src
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            names = [e.id for e in target.elts if isinstance(e, ast.Name)]
            expr.update({n: f"{src}[{i}]" for i, n in enumerate(names) if n != "_"})
            if src == "inputs" and "_" not in names:
                every_input = names
        else:
            break
        k += 1
    rest = body[k:]
    if not expr or not rest or not all(line.strip().startswith("ctx.") for line in rest):
        return lines
    reads = re.compile(r"(?<![.\w])(?:" + "|".join(map(re.escape, expr)) + r")\b")
    new = []
    for line in rest:
        m = re.fullmatch(r"(\s+ctx\.\w+)\((.*)\)", line)
        if every_input and m and m.group(2) == ", ".join(every_input):
            line = f"{m.group(1)}(*inputs)"
        line = reads.sub(lambda w: expr[w.group(0)], line)  # not ctx.x0, an attribute of that name
        if len(line) > _RETURN_WIDTH:
            return lines
        new.append(line)
    return [*lines[: start + 1], *new, *lines[end:]]


def _return_directly(lines: list[str]) -> list[str]:
    """``x = e`` followed by a ``return`` that reads ``x`` once: ``e`` written into the return (``x = e``
    then ``return x``: ``return e``), again while the line before is such an assignment and the return
    fits in :data:`_RETURN_WIDTH`. Only where nothing of either line calls an in-place method (``*_``),
    so evaluating ``e`` later changes nothing, and neither line has a comment."""
    out: list[str] = []
    for line in lines:
        m = re.fullmatch(r"(\s+)return (.+)", line)
        while m and out and "#" not in line:
            prev = _ASSIGN.fullmatch(out[-1])
            if not prev or prev.group(1) != m.group(1) or "#" in prev.group(3):
                break
            merged = _substitute(m.group(2), prev.group(2), prev.group(3))
            if merged is None or len(m.group(1)) + 7 + len(merged) > _RETURN_WIDTH:
                break
            out.pop()
            line = f"{m.group(1)}return {merged}"
            m = re.fullmatch(r"(\s+)return (.+)", line)
        out.append(line)
    return out


def _substitute(expr: str, name: str, value: str) -> str | None:
    """``expr`` with its one read of ``name`` replaced by ``value`` (parenthesized as needed), or None
    where ``name`` is read more or less than once, or either side calls an in-place method."""
    try:
        tree, val = parse(expr, mode="eval"), parse(value, mode="eval")
    except SyntaxError:
        return None
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    inplace = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
        for t in (tree, val)
        for n in ast.walk(t)
    )
    if len(reads) != 1 or inplace:
        return None
    if isinstance(tree.body, ast.Name):  # return x: return e, as written
        return value

    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return val.body if node.id == name else node

    text = ast.unparse(Put().visit(tree))
    return text[1:-1] if isinstance(tree.body, ast.Tuple) and text.startswith("(") else text


def _class_lines(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> list[str]:
    lines = [f"class {CLASS_NAME}(torch.autograd.Function):"]
    if fn.vmap_rule == "generate":
        lines += ["    generate_vmap_rule = True", ""]
    lines += _forward(fn)
    lines.append("")
    lines += _backward(fn, base, dtype)
    if fn.jvp_rule:
        lines.append("")
        lines += _jvp_rule(fn)
    if fn.vmap_rule in ("custom", "custom_wrong"):
        lines.append("")
        lines += _vmap_rule(fn)
    return lines
