"""The expressions and statements a rendered Function is built from: a node's value, a view, the returned
tuple, what a ctx keeps. Torch-free. Shared by :mod:`fuzzer.codegen.fn_rules` and
:mod:`fuzzer.codegen.function`.
"""

from __future__ import annotations

import re

from ..ir.case import FunctionDef, View
from ..ir.ops import fill, op_kind

CLASS_NAME = "Fn"


def tup(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else ", ".join(items)


def shape_text(shape: tuple[int, ...]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(map(str, shape))})"


# ------------------------------------------------------------------------------------ forward


def node_expr(fn: FunctionDef, k: int, val: dict[str, str] | None = None, *, forward: bool = False) -> str:
    """Node ``k``'s expression; ``forward`` (forward itself): in place where the node says so (NOTE [in-place
    forward]); everything that recomputes a value (setup_context, jvp, backward) does it out of place."""
    node = fn.nodes[k]
    a = [val.get(x, x) if val else x for x in node.args]
    kind = op_kind(node.op)  # NOTE [op table]
    values = {"a0": a[0], "a1": a[-1], "p": str(node.exponent), "s": f"s{node.scalar}"}
    if forward and node.inplace:
        return f"{a[0]}.{kind.inplace}({fill(kind.inplace_args, **values)})"
    return fill(kind.forward, **values)


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


def view_expr(base: str, v: View, shift: int = 0) -> str:
    """``base`` viewed by ``v``; ``shift`` = 1 inside a vmap rule, where dim 0 is the batch dim."""
    d = v.dim + shift
    if v.op == "view_as":
        return f"{base}.view_as({base})"
    if v.op == "reshape":
        shape = ((-1,) if shift else ()) + tuple(v.shape)
        return f"{base}.reshape({shape_text(shape) if shape else '()'})"
    if v.op in ("unsqueeze", "squeeze"):
        return f"{base}.{v.op}({d})"
    if v.op == "select":
        return f"{base}.select({d}, {v.index})"
    if v.op == "narrow":
        return f"{base}.narrow({d}, {v.index}, {v.length})"
    return f"{base}.transpose({d}, {v.dim1 + shift})"


def output_exprs(fn: FunctionDef, shift: int = 0) -> list[str]:
    return [view_expr(o.ref, o.view, shift) if o.kind == "view" and o.view else o.ref for o in fn.outputs]


def node_lines(fn: FunctionDef, nodes: set[int], indent: str, *, forward: bool = False) -> list[str]:
    return [f"{indent}t{k} = {node_expr(fn, k, forward=forward)}" for k in sorted(nodes)]


def deps_of(fn: FunctionDef, roots: list[str]) -> set[int]:
    seen: set[int] = set()
    stack = [r for r in roots if r.startswith("t")]
    while stack:
        k = int(stack.pop()[1:])
        if k not in seen:
            seen.add(k)
            stack.extend(a for a in fn.nodes[k].args if a.startswith("t"))
    return seen


def returns_expr(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else ", ".join(exprs)


def ctx_lines(fn: FunctionDef, name_of: dict[str, str], indent: str) -> list[str]:
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
        lines += [f"{indent}ctx.x{i}_shape = x{i}.shape" for i in dirty_zero_inputs(fn)]
    return lines


def dirty_zero_inputs(fn: FunctionDef) -> list[int]:
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


def arg_names(fn: FunctionDef) -> list[str]:
    """The Function's parameters: tensors x<i>, then non-tensor inputs s<i>."""
    return [f"x{i}" for i in range(fn.n_inputs)] + [f"s{i}" for i in range(len(fn.scalars))]
