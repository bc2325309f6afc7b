"""Shapes and magnitudes of a case: what each transform level sees and returns."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from .case import VIEW_OPS, Case, CaseError, FunctionDef, Transform, View
from .ops import op_kind
from .transforms import transform_kind


def batch_sizes(case: Case) -> tuple[int, ...]:
    return tuple(t.batch_size for t in case.transforms if t.name == "vmap")


def first_argnum(t: Transform) -> int:
    return t.argnums[0] if isinstance(t.argnums, tuple) else t.argnums


def in_dims_of(t: Transform, n_inputs: int) -> tuple[int | None, ...]:
    return t.in_dims if t.in_dims else (0,) * n_inputs


def level_input_shapes(case: Case) -> list[list[tuple[int, ...]]]:
    """Shapes of every input at each level, innermost (index 0: what ``f`` sees) to outermost.

    A vmap level with ``in_dims[i] = d`` inserts its batch size at dim ``d`` of input i; None leaves it.
    """
    n = case.function.n_inputs
    shapes = [[tuple(case.inputs.shape)] * n]
    for t in reversed(case.transforms):
        cur = list(shapes[-1])
        if t.name == "vmap":
            for i, d in enumerate(in_dims_of(t, n)):
                if d is not None:
                    cur[i] = cur[i][:d] + (t.batch_size,) + cur[i][d:]
        shapes.append(cur)
    return shapes


def input_shapes(case: Case) -> list[tuple[int, ...]]:
    """The full shape of each input tensor the outermost level receives."""
    return level_input_shapes(case)[-1]


def numel(shape: Iterable[int]) -> int:
    return math.prod(shape)


def view_shape(view: View, base: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of ``view`` applied to a tensor of shape ``base``; raises CaseError if ill-formed."""
    nd = len(base)
    op = view.op
    if op == "view_as":
        return base
    if op == "reshape":
        if numel(view.shape) != numel(base) or any(s < 1 for s in view.shape):
            raise CaseError(f"reshape to {view.shape} does not fit shape {base}")
        return tuple(view.shape)
    if op == "unsqueeze":
        if not 0 <= view.dim <= nd:
            raise CaseError(f"unsqueeze dim {view.dim} out of range for shape {base}")
        return base[: view.dim] + (1,) + base[view.dim :]
    if not 0 <= view.dim < nd:
        raise CaseError(f"{op} dim {view.dim} out of range for shape {base}")
    size = base[view.dim]
    if op == "squeeze":
        if size != 1:
            raise CaseError(f"squeeze dim {view.dim} has size {size}, not 1")
        return base[: view.dim] + base[view.dim + 1 :]
    if op == "select":
        if not 0 <= view.index < size:
            raise CaseError(f"select index {view.index} out of range for size {size}")
        return base[: view.dim] + base[view.dim + 1 :]
    if op == "narrow":
        if view.length < 1 or not 0 <= view.index <= size - view.length:
            raise CaseError(f"narrow({view.index}, {view.length}) out of range for size {size}")
        return base[: view.dim] + (view.length,) + base[view.dim + 1 :]
    if op == "transpose":
        if not 0 <= view.dim1 < nd or view.dim1 == view.dim:
            raise CaseError(f"transpose dims ({view.dim}, {view.dim1}) invalid for shape {base}")
        s = list(base)
        s[view.dim], s[view.dim1] = s[view.dim1], s[view.dim]
        return tuple(s)
    raise CaseError(f"unknown view op {op!r} (known: {', '.join(VIEW_OPS)})")


def output_shapes(fn: FunctionDef, base: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(view_shape(o.view, base) if o.kind == "view" and o.view else base for o in fn.outputs)


def f_output_shape(case: Case) -> tuple[int, ...]:
    shapes = output_shapes(case.function, tuple(case.inputs.shape))
    used = [shapes[j] for j in case.f.uses]
    if case.f.combine == "sum":
        return ()
    return used[0]


def level_output_shapes(case: Case) -> list[tuple[int, ...]]:
    """Output shape of each level, innermost (index 0 = ``f`` itself) to outermost.

    Also returns nothing about reductions: :func:`needs_sum` says where a ``grad`` level sums its inner output.
    """
    ins = level_input_shapes(case)
    out = f_output_shape(case)
    shapes = [out]
    for level, t in enumerate(reversed(case.transforms)):
        out = transform_output_shape(t, out, ins[level])
        shapes.append(out)
    return shapes


def transform_output_shape(t: Transform, out: tuple[int, ...], ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Output shape of level ``t`` whose inner function returns ``out`` and whose inputs have shapes ``ins``
    (as the inner function sees them)."""
    kind = transform_kind(t.name).output  # NOTE [transform table]: an unknown name raises
    if kind == "batched":
        return out[: t.out_dims] + (t.batch_size,) + out[t.out_dims :]
    if kind == "same":
        return out
    x = ins[first_argnum(t)]
    return {"input": x, "jacobian": out + x, "hessian": out + x + x}[kind]


def needs_sum(case: Case) -> list[bool]:
    """For each transform (outermost first): whether its inner function's output is summed to a scalar
    first (``torch.func.grad`` needs a scalar)."""
    shapes = level_output_shapes(case)  # innermost first, len = depth + 1
    depth = len(case.transforms)
    res = []
    for i, t in enumerate(case.transforms):
        inner = shapes[depth - 1 - i]
        res.append(t.name == "grad" and inner != ())
    return res


def reference_cost(transforms: Iterable[Transform], base: tuple[int, ...], f_out: tuple[int, ...]) -> int:
    """Rough number of innermost evaluations plus backward passes create_graph mode performs.

    vmap multiplies by its batch size, jacrev by its inner output's numel (one backward per row), jacfwd
    by its input's numel (one dual pass per column), hessian by both of jacrev-over-jacrev. Treats every
    input as batched at dim 0 (an upper bound). Used by the strategies to keep cases cheap.
    """
    in_shape = base
    out = f_out
    cost = 1
    for t in reversed(tuple(transforms)):
        if t.name == "vmap":
            cost *= t.batch_size
            in_shape = (t.batch_size,) + in_shape
        elif t.name == "jacrev":
            cost *= max(1, numel(out))
        elif t.name == "jacfwd":
            cost *= max(1, numel(in_shape))
        elif t.name == "hessian":
            cost *= max(1, numel(out)) ** 2 * max(1, numel(in_shape))
        else:
            cost *= 2
        out = transform_output_shape(replace(t, out_dims=0, in_dims=()), out, [in_shape] * (first_argnum(t) + 1))
    return cost


#: Forward values larger than this are avoided by the strategies: derivatives of chains such as
#: exp(exp(exp(x))) overflow, and a comparison of overflowed values (inf, 0 * inf = nan) says nothing.
MAX_MAGNITUDE = 1e6


def forward_bound(case: Case) -> float:
    """An upper bound of ``|value|`` over every forward intermediate of ``case`` on its inputs (interval
    arithmetic on each input's largest magnitude); ``inf`` where a bound overflows."""
    fn = case.function
    bound = {f"x{i}": max((abs(v) for v in vals), default=0.0) for i, vals in enumerate(case.inputs.values)}
    worst = max(bound.values(), default=0.0)
    for k, node in enumerate(fn.nodes):
        a = [bound[r] for r in node.args]
        try:
            s = fn.scalars[node.scalar] if op_kind(node.op).scalar else 0.0
            b = op_kind(node.op).bound(a, s, node.exponent)  # NOTE [op table]
        except OverflowError:
            return math.inf
        bound[f"t{k}"] = b
        worst = max(worst, b)
    return worst
