"""The case IR: a closed, torch-free description of one fuzz case.

A case is a custom ``torch.autograd.Function`` (:class:`FunctionDef`), the function ``f`` that calls
``Function.apply`` and combines its outputs (:class:`FDef`), the input tensors (:class:`Inputs`) and a
transform stack (:class:`Transform`, outermost first).

Invariants (checked by :func:`validate`, which :func:`case_from_json` always runs):

* The IR is a closed vocabulary. Every string is drawn from a fixed set (ops, view ops, transforms,
  styles...), every number is range-checked, and value references are ``x<i>`` (input), ``t<k>``
  (forward intermediate), ``o<j>`` (output). No code string from JSON is ever executed; the renderer
  only ever emits code for vocabulary items.
* All tensor inputs share one *base* shape (what ``f`` sees); each ``vmap`` level adds one leading batch
  dimension to every input, outermost level first.
* Forward intermediates are elementwise (they keep the base shape); only outputs may be views.
* The backward computes the exact vector-Jacobian product of the forward, except where the case says
  otherwise on purpose (``unused_grads``, ``none_grads``, and the planted ``custom_wrong`` vmap rule).
  Every value the backward needs is obtainable from ``saved`` (see NOTE [backward values]).

This module imports nothing from the rest of affuzz and nothing from torch.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SCHEMA_VERSION = 2
#: Versions :func:`case_from_json` reads. Version 1 lacks the fields version 2 added, all of which have
#: defaults that mean "not used", so a v1 case loads unchanged.
READABLE_SCHEMA_VERSIONS = (1, 2)

#: Elementwise forward ops: name -> arity.
OPS: dict[str, int] = {"pow": 1, "mul": 2, "add": 2, "sin": 1, "exp": 1, "scale": 1, "shift": 1}
#: Ops that read a non-tensor (Python float) input of the Function: ``a * s`` and ``a + s``.
SCALAR_OPS = ("scale", "shift")
MAX_SCALARS = 2
POW_EXPONENTS = (2, 3)
VIEW_OPS = (
    "view_as",
    "reshape",
    "unsqueeze",
    "select",
    "narrow",
    "transpose",
    "squeeze",
)
#: Views whose base can be recovered from the view alone (used when a saved output stands in for its base).
INVERTIBLE_VIEWS = ("view_as", "reshape", "unsqueeze", "transpose", "squeeze")
#: functorch transforms the stack may hold, plus the plain-autograd outer level.
FUNCTORCH_TRANSFORMS = ("grad", "vmap", "jacrev", "jacfwd", "jvp", "vjp", "hessian", "linearize")
#: Levels whose create_graph twin uses forward-mode AD (torch.autograd.forward_ad). Plain autograd has no
#: nested dual levels, so a stack holds at most one of them (see NOTE [mode equivalence]).
FORWARD_MODE_TRANSFORMS = ("jacfwd", "jvp", "linearize")
VMAP_IN_DIMS = (0, 1, None)
VMAP_OUT_DIMS = (0, 1)
OUTER_TRANSFORMS = ("autograd_grad",)
TRANSFORMS = FUNCTORCH_TRANSFORMS + OUTER_TRANSFORMS
STYLES = ("setup_context", "legacy")
#: ``custom_wrong`` is a hand-written vmap rule that contradicts forward (outputs doubled): a planted
#: bug used by tests and quality checks. The default strategies never draw it.
VMAP_RULES = ("none", "generate", "custom", "custom_wrong")
DTYPES = ("float64", "float32")
COMBINES = ("add", "sum")
OUTPUT_KINDS = ("node", "input", "view")
#: The Python int a Function with ``non_tensor_output`` returns last; ``f`` scales its result by it.
NON_TENSOR_OUTPUT = 2
MAX_INPUTS = 3
MAX_OUTPUTS = 3
MAX_NODES = 8
MAX_DEPTH = 4
MAX_BATCH = 4
MAX_DIM_SIZE = 4
MAX_NDIM = 2

_REF = re.compile(r"^([xto])(\d+)$")


class CaseError(ValueError):
    """A case (usually loaded from JSON) is not valid. ``str(err)`` names the field and the problem."""


# --------------------------------------------------------------------------------------------- IR


@dataclass(frozen=True)
class Node:
    """``t<k> = op(args...)``: one elementwise forward intermediate. ``args`` are ``x<i>``/``t<j>`` refs (j < k)."""

    op: str
    args: tuple[str, ...]
    exponent: int = 2  # only meaningful for ``pow``
    scalar: int = 0  # scale/shift: index into FunctionDef.scalars


@dataclass(frozen=True)
class View:
    """A view op applied to an output's base. Fields not used by ``op`` stay at their defaults."""

    op: str
    dim: int = 0
    index: int = 0  # select: index; narrow: start
    length: int = 1  # narrow: length
    shape: tuple[int, ...] = ()  # reshape: target shape
    dim1: int = 1  # transpose: second dim


@dataclass(frozen=True)
class Output:
    """One Function output. ``node``: ref is ``t<k>``; ``input``: ref is ``x<i>`` returned as-is;
    ``view``: ``view`` applied to ref (an input, or an intermediate that is itself returned as an output)."""

    kind: str
    ref: str
    view: View | None = None


@dataclass(frozen=True)
class FunctionDef:
    n_inputs: int
    nodes: tuple[Node, ...]
    outputs: tuple[Output, ...]
    saved: tuple[str, ...] = ()  # refs saved for backward, in order
    unused_grads: tuple[int, ...] = ()  # output indices whose grad_output backward ignores
    none_grads: tuple[int, ...] = ()  # input indices for which backward returns None
    style: str = "setup_context"
    vmap_rule: str = "none"
    jvp_rule: bool = False  # a jvp staticmethod (correct by construction), inputs via ctx.save_for_forward
    once_differentiable: bool = False  # backward decorated with @once_differentiable
    materialize_grads: bool = True  # False: ctx.set_materialize_grads(False); backward handles None grads
    non_differentiable: tuple[int, ...] = ()  # node outputs passed to ctx.mark_non_differentiable
    on_ctx: tuple[str, ...] = ()  # saved refs kept as ctx attributes instead of save_for_backward
    detached: tuple[str, ...] = ()  # saved refs saved as .detach()
    non_tensor_output: bool = False  # forward also returns a Python int (NON_TENSOR_OUTPUT), last
    scalars: tuple[float, ...] = ()  # non-tensor inputs s<i>, passed to apply after the tensors
    dirty: tuple[int, ...] = ()  # inputs forward doubles in place (x.mul_(2)), returns, and marks dirty


@dataclass(frozen=True)
class FDef:
    """``f(*inputs)``: applies the Function, keeps ``uses`` outputs and combines them.

    ``add``: elementwise sum (all used outputs have one shape); ``sum``: sum of each output's ``.sum()``.
    ``inplace``: node outputs ``f`` doubles in place (``o.mul_(2)``) right after ``apply``, under
    ``torch.no_grad()`` when ``inplace_no_grad``.
    """

    uses: tuple[int, ...] = (0,)
    combine: str = "add"
    inplace: tuple[int, ...] = ()
    inplace_no_grad: bool = False


@dataclass(frozen=True)
class Inputs:
    """Tensor inputs: ``values[i]`` is input i flattened (row-major) over its full shape, which is the
    vmap batch sizes (outermost first) followed by ``shape`` (the base shape)."""

    shape: tuple[int, ...]
    values: tuple[tuple[float, ...], ...]
    dtype: str = "float64"


@dataclass(frozen=True)
class Transform:
    name: str
    argnums: int | tuple[int, ...] = 0  # every level but vmap; a tuple only on the outermost level
    batch_size: int = 0  # vmap only
    in_dims: tuple[int | None, ...] = ()  # vmap only: one entry per input; () means all 0
    out_dims: int = 0  # vmap only


@dataclass(frozen=True)
class Case:
    function: FunctionDef
    f: FDef
    inputs: Inputs
    transforms: tuple[Transform, ...]  # outermost first
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


# ------------------------------------------------------------------------------------ helpers


def ref_kind(ref: str) -> tuple[str, int]:
    m = _REF.match(ref)
    if not m:
        raise CaseError(f"bad value reference {ref!r} (expected x<i>, t<k> or o<j>)")
    return m.group(1), int(m.group(2))


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
    if t.name == "vmap":
        return out[: t.out_dims] + (t.batch_size,) + out[t.out_dims :]
    x = ins[first_argnum(t)]
    if t.name in ("jacrev", "jacfwd"):
        return out + x
    if t.name == "hessian":
        return out + x + x
    if t.name in ("jvp", "linearize"):
        return out
    return x  # grad, vjp, autograd_grad


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
            if node.op == "pow":
                b = a[0] ** node.exponent
            elif node.op == "mul":
                b = a[0] * a[1]
            elif node.op == "add":
                b = a[0] + a[1]
            elif node.op == "sin":
                b = min(1.0, a[0])
            elif node.op == "exp":
                b = math.exp(a[0])
            elif node.op == "scale":
                b = a[0] * abs(fn.scalars[node.scalar])
            else:  # shift
                b = a[0] + abs(fn.scalars[node.scalar])
        except OverflowError:
            return math.inf
        bound[f"t{k}"] = b
        worst = max(worst, b)
    return worst


# NOTE [backward values]
# The backward needs some forward values (x for x**3, a and b for a*b, exp's result for exp). Inside
# backward only ctx.saved_tensors are available, so each needed value must come from a saved tensor:
# a saved input ``x<i>``; a saved intermediate ``t<k>``; a saved output ``o<j>`` that *is* the value (an
# input returned as-is, a node returned) or is an invertible view of it (view_as, reshape, ...), which
# backward undoes. Anything else is recomputed in backward from values that are available. Where the
# saved output is an alias of an input, backward's graph hangs off the *output*: exactly the seed bug's
# shape. :func:`available_values` computes the closure; :func:`missing_values` what still needs saving.


def grad_flows(fn: FunctionDef) -> tuple[set[str], set[str]]:
    """(nodes whose gradient is non-zero in backward, inputs that receive a gradient term)."""
    live_nodes: set[str] = set()
    live_inputs: set[str] = set()
    for j, o in enumerate(fn.outputs):
        if j in fn.unused_grads or j in fn.non_differentiable:
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


def needed_values(fn: FunctionDef) -> list[str]:
    """Values the backward reads (before recomputation), in a stable order."""
    live_nodes, _ = grad_flows(fn)
    need: list[str] = []
    for k, node in enumerate(fn.nodes):
        if f"t{k}" not in live_nodes:
            continue
        if node.op == "mul" or node.op in ("pow", "sin"):
            vals = list(node.args)
        elif node.op == "exp":
            vals = [f"t{k}"]
        else:
            vals = []
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


def _check(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise CaseError(f"{where}: {msg}")


def _one_of(value: Any, allowed: Iterable[str], where: str, what: str) -> None:
    allowed = tuple(allowed)
    _check(
        isinstance(value, str) and value in allowed,
        where,
        f"unknown {what} {value!r} (known: {', '.join(allowed)})",
    )


def validate(case: Case) -> Case:
    """Check every invariant in the module docstring; return ``case`` or raise :class:`CaseError`."""
    fn = case.function
    _check(
        isinstance(fn.n_inputs, int) and 1 <= fn.n_inputs <= MAX_INPUTS,
        "function.n_inputs",
        f"must be 1..{MAX_INPUTS}",
    )
    _check(len(fn.nodes) <= MAX_NODES, "function.nodes", f"at most {MAX_NODES} nodes")
    for k, node in enumerate(fn.nodes):
        w = f"function.nodes[{k}]"
        _one_of(node.op, OPS, f"{w}.op", "op")
        _check(
            len(node.args) == OPS[node.op],
            f"{w}.args",
            f"{node.op} takes {OPS[node.op]} argument(s)",
        )
        for a in node.args:
            kind, idx = _ref(a, f"{w}.args")
            _check(kind in "xt", f"{w}.args", f"{a!r} must be an input or an earlier node")
            _check(
                idx < (fn.n_inputs if kind == "x" else k),
                f"{w}.args",
                f"{a!r} is not defined before t{k}",
            )
        if node.op == "pow":
            _check(
                node.exponent in POW_EXPONENTS,
                f"{w}.exponent",
                f"must be one of {POW_EXPONENTS}",
            )
        if node.op in SCALAR_OPS:
            _check(
                isinstance(node.scalar, int) and 0 <= node.scalar < len(fn.scalars),
                f"{w}.scalar",
                "must index function.scalars",
            )
    _check(
        1 <= len(fn.outputs) <= MAX_OUTPUTS,
        "function.outputs",
        f"must have 1..{MAX_OUTPUTS} outputs",
    )
    node_outputs = {o.ref for o in fn.outputs if o.kind == "node"}
    base = tuple(case.inputs.shape)
    for j, o in enumerate(fn.outputs):
        w = f"function.outputs[{j}]"
        _one_of(o.kind, OUTPUT_KINDS, f"{w}.kind", "output kind")
        kind, idx = _ref(o.ref, f"{w}.ref")
        if o.kind == "node":
            _check(
                kind == "t" and idx < len(fn.nodes),
                f"{w}.ref",
                f"{o.ref!r} is not a node",
            )
        elif o.kind == "input":
            _check(
                kind == "x" and idx < fn.n_inputs,
                f"{w}.ref",
                f"{o.ref!r} is not an input",
            )
        else:
            _check(o.view is not None, f"{w}.view", "a view output needs a view")
            _check(
                (kind == "x" and idx < fn.n_inputs) or (kind == "t" and o.ref in node_outputs),
                f"{w}.ref",
                f"{o.ref!r} must be an input or a node that is itself an output",
            )
            assert o.view is not None
            _one_of(o.view.op, VIEW_OPS, f"{w}.view.op", "view op")
            try:
                view_shape(o.view, base)
            except CaseError as e:
                raise CaseError(f"{w}.view: {e}") from None
        if o.kind != "view":
            _check(o.view is None, f"{w}.view", f"a {o.kind} output has no view")
    for r in fn.saved:
        kind, idx = _ref(r, "function.saved")
        limit = {"x": fn.n_inputs, "t": len(fn.nodes), "o": len(fn.outputs)}[kind]
        _check(idx < limit, "function.saved", f"{r!r} does not exist")
    _check(len(set(fn.saved)) == len(fn.saved), "function.saved", "duplicate entries")
    _check(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) for j in fn.unused_grads),
        "function.unused_grads",
        "output index out of range",
    )
    _check(
        all(isinstance(i, int) and 0 <= i < fn.n_inputs for i in fn.none_grads),
        "function.none_grads",
        "input index out of range",
    )
    _one_of(fn.style, STYLES, "function.style", "style")
    _one_of(fn.vmap_rule, VMAP_RULES, "function.vmap_rule", "vmap rule")
    _check(
        fn.style == "setup_context" or fn.vmap_rule == "none",
        "function.vmap_rule",
        "a legacy-style Function cannot have a vmap rule",
    )
    for i in fn.dirty:
        x = f"x{i}"
        _check(isinstance(i, int) and 0 <= i < fn.n_inputs, "function.dirty", "input index out of range")
        _check(
            any(o.kind == "input" and o.ref == x for o in fn.outputs), "function.dirty", f"{x} must be returned as-is"
        )
        _check(
            not any(x in n.args for n in fn.nodes) and not any(o.kind == "view" and o.ref == x for o in fn.outputs),
            "function.dirty",
            f"{x} is modified in place, so no intermediate or view may read it",
        )
        _check(all(value_provided_by_saved(fn, r) != x for r in fn.saved), "function.dirty", f"{x} must not be saved")
    _check(len(set(fn.dirty)) == len(fn.dirty), "function.dirty", "duplicate entries")
    _check(not (fn.dirty and fn.jvp_rule), "function.dirty", "a jvp rule for in-place Functions is not generated")
    _check(
        not fn.dirty or fn.vmap_rule in ("none", "generate"),
        "function.dirty",
        "a hand-written vmap rule for in-place Functions is not generated",
    )
    _check(len(fn.scalars) <= MAX_SCALARS, "function.scalars", f"at most {MAX_SCALARS}")
    _check(
        all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in fn.scalars),
        "function.scalars",
        "must be finite numbers",
    )
    for name in ("jvp_rule", "once_differentiable", "materialize_grads", "non_tensor_output"):
        _check(isinstance(getattr(fn, name), bool), f"function.{name}", "must be true or false")
    referenced = [o.ref for o in fn.outputs]
    for j in fn.non_differentiable:
        _check(
            isinstance(j, int) and 0 <= j < len(fn.outputs), "function.non_differentiable", "output index out of range"
        )
        o = fn.outputs[j]
        _check(
            o.kind == "node" and referenced.count(o.ref) == 1,
            "function.non_differentiable",
            f"output {j} must be a node output no other output refers to",
        )
    _check(
        len(set(fn.non_differentiable)) == len(fn.non_differentiable),
        "function.non_differentiable",
        "duplicate entries",
    )
    for name in ("on_ctx", "detached"):
        sub = getattr(fn, name)
        _check(
            all(r in fn.saved for r in sub) and len(set(sub)) == len(sub),
            f"function.{name}",
            "must list distinct entries of function.saved",
        )
    missing = missing_values(fn)
    _check(
        not missing,
        "function.saved",
        f"backward needs {', '.join(missing)} but it is not saved (save it, or an output aliasing it)",
    )

    _check(
        len(case.f.uses) >= 1 and len(set(case.f.uses)) == len(case.f.uses),
        "f.uses",
        "must list distinct output indices",
    )
    _check(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) for j in case.f.uses),
        "f.uses",
        "output index out of range",
    )
    _one_of(case.f.combine, COMBINES, "f.combine", "combine")
    _check(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) and fn.outputs[j].kind == "node" for j in case.f.inplace)
        and len(set(case.f.inplace)) == len(case.f.inplace),
        "f.inplace",
        "must list distinct node outputs",
    )
    _check(isinstance(case.f.inplace_no_grad, bool), "f.inplace_no_grad", "must be true or false")
    if case.f.combine == "add":
        shapes = output_shapes(fn, base)
        _check(
            len({shapes[j] for j in case.f.uses}) == 1,
            "f.combine",
            "'add' needs all used outputs to have one shape",
        )

    inp = case.inputs
    _one_of(inp.dtype, DTYPES, "inputs.dtype", "dtype")
    _check(
        len(base) <= MAX_NDIM and all(isinstance(s, int) and 1 <= s <= MAX_DIM_SIZE for s in base),
        "inputs.shape",
        f"at most {MAX_NDIM} dims of size 1..{MAX_DIM_SIZE}",
    )
    _check(
        len(inp.values) == fn.n_inputs,
        "inputs.values",
        f"needs one entry per input ({fn.n_inputs})",
    )

    _check(
        1 <= len(case.transforms) <= MAX_DEPTH,
        "transforms",
        f"depth must be 1..{MAX_DEPTH}",
    )
    for i, t in enumerate(case.transforms):
        w = f"transforms[{i}]"
        _one_of(t.name, TRANSFORMS, f"{w}.name", "transform")
        if t.name in OUTER_TRANSFORMS:
            _check(i == 0, f"{w}.name", f"{t.name} must be the outermost level")
        if t.name == "vmap":
            _check(
                isinstance(t.batch_size, int) and 1 <= t.batch_size <= MAX_BATCH,
                f"{w}.batch_size",
                f"must be 1..{MAX_BATCH}",
            )
            if t.in_dims:
                _check(len(t.in_dims) == fn.n_inputs, f"{w}.in_dims", f"needs one entry per input ({fn.n_inputs})")
                for d in t.in_dims:
                    _check(
                        d in VMAP_IN_DIMS and not isinstance(d, bool),
                        f"{w}.in_dims",
                        f"entries must be one of {VMAP_IN_DIMS}",
                    )
                _check(any(d is not None for d in t.in_dims), f"{w}.in_dims", "at least one input must be batched")
            _check(
                t.out_dims in VMAP_OUT_DIMS and not isinstance(t.out_dims, bool),
                f"{w}.out_dims",
                f"must be one of {VMAP_OUT_DIMS}",
            )
        else:
            _check(
                t.batch_size == 0 and not t.in_dims and t.out_dims == 0,
                w,
                "only vmap has batch_size, in_dims and out_dims",
            )
            nums = t.argnums if isinstance(t.argnums, tuple) else (t.argnums,)
            _check(
                all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < fn.n_inputs for a in nums),
                f"{w}.argnums",
                "input index out of range",
            )
            if isinstance(t.argnums, tuple):
                _check(i == 0, f"{w}.argnums", "a tuple of argnums is allowed on the outermost level only")
                _check(len(set(nums)) == len(nums) >= 1, f"{w}.argnums", "must list distinct inputs")
    _check(
        any(t.name in FUNCTORCH_TRANSFORMS for t in case.transforms),
        "transforms",
        "needs at least one torch.func transform",
    )
    _check(
        sum(t.name in FORWARD_MODE_TRANSFORMS for t in case.transforms) <= 1,
        "transforms",
        f"at most one forward-mode level ({', '.join(FORWARD_MODE_TRANSFORMS)})",
    )
    ins = level_input_shapes(case)
    outs = level_output_shapes(case)
    depth = len(case.transforms)
    for level, t in enumerate(reversed(case.transforms)):
        if t.name != "vmap":
            continue
        w = f"transforms[{depth - 1 - level}]"
        for i, d in enumerate(in_dims_of(t, fn.n_inputs)):
            _check(
                d is None or d <= len(ins[level][i]),
                f"{w}.in_dims",
                f"dim {d} out of range for input {i} of shape {ins[level][i]}",
            )
        _check(
            t.out_dims <= len(outs[level]),
            f"{w}.out_dims",
            f"dim {t.out_dims} out of range for output shape {outs[level]}",
        )
    for i, (vals, shape) in enumerate(zip(inp.values, input_shapes(case), strict=True)):
        n = numel(shape)
        _check(len(vals) == n, f"inputs.values[{i}]", f"has {len(vals)} values, shape {shape} needs {n}")
        _check(
            all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals),
            f"inputs.values[{i}]",
            "values must be finite numbers",
        )
    return case


def _ref(r: Any, where: str) -> tuple[str, int]:
    _check(isinstance(r, str), where, f"reference {r!r} must be a string")
    try:
        return ref_kind(r)
    except CaseError as e:
        raise CaseError(f"{where}: {e}") from None


# ------------------------------------------------------------------------------------------ JSON


def case_to_json(case: Case) -> dict[str, Any]:
    fn = case.function

    def view(v: View) -> dict[str, Any]:
        d: dict[str, Any] = {"op": v.op}
        if v.op in ("unsqueeze", "select", "narrow", "transpose", "squeeze"):
            d["dim"] = v.dim
        if v.op in ("select", "narrow"):
            d["index"] = v.index
        if v.op == "narrow":
            d["length"] = v.length
        if v.op == "reshape":
            d["shape"] = list(v.shape)
        if v.op == "transpose":
            d["dim1"] = v.dim1
        return d

    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "function": {
            "n_inputs": fn.n_inputs,
            "nodes": [
                {
                    "op": n.op,
                    "args": list(n.args),
                    **({"exponent": n.exponent} if n.op == "pow" else {}),
                    **({"scalar": n.scalar} if n.op in SCALAR_OPS else {}),
                }
                for n in fn.nodes
            ],
            "outputs": [
                {
                    "kind": o.kind,
                    "ref": o.ref,
                    **({"view": view(o.view)} if o.view else {}),
                }
                for o in fn.outputs
            ],
            "saved": list(fn.saved),
            "unused_grads": list(fn.unused_grads),
            "none_grads": list(fn.none_grads),
            "style": fn.style,
            "vmap_rule": fn.vmap_rule,
            "jvp_rule": fn.jvp_rule,
            "once_differentiable": fn.once_differentiable,
            "materialize_grads": fn.materialize_grads,
            "non_differentiable": list(fn.non_differentiable),
            "on_ctx": list(fn.on_ctx),
            "detached": list(fn.detached),
            "non_tensor_output": fn.non_tensor_output,
            "scalars": list(fn.scalars),
            "dirty": list(fn.dirty),
        },
        "f": {
            "uses": list(case.f.uses),
            "combine": case.f.combine,
            "inplace": list(case.f.inplace),
            "inplace_no_grad": case.f.inplace_no_grad,
        },
        "inputs": {
            "shape": list(case.inputs.shape),
            "dtype": case.inputs.dtype,
            "values": [list(v) for v in case.inputs.values],
        },
        "transforms": [
            {
                "name": t.name,
                **(
                    {"batch_size": t.batch_size, "in_dims": list(t.in_dims), "out_dims": t.out_dims}
                    if t.name == "vmap"
                    else {"argnums": list(t.argnums) if isinstance(t.argnums, tuple) else t.argnums}
                ),
            }
            for t in case.transforms
        ],
    }
    if case.meta:
        out["meta"] = dict(case.meta)
    return out


def dumps(case: Case) -> str:
    return json.dumps(case_to_json(case), indent=2, sort_keys=False) + "\n"


def _obj(d: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    _check(isinstance(d, dict), where, f"expected an object, got {type(d).__name__}")
    required, optional = tuple(required), tuple(optional)
    unknown = sorted(set(d) - set(required) - set(optional))
    _check(
        not unknown,
        where,
        f"unknown field(s) {', '.join(map(repr, unknown))} (known: {', '.join(required + optional)})",
    )
    missing = [k for k in required if k not in d]
    _check(not missing, where, f"missing field(s) {', '.join(map(repr, missing))}")
    return d


def _argnums(d: Any, where: str) -> int | tuple[int, ...]:
    if isinstance(d, list):
        return tuple(_int(v, where) for v in d)
    return _int(d, where)


def _list(d: Any, where: str) -> list[Any]:
    _check(isinstance(d, list), where, f"expected a list, got {type(d).__name__}")
    return d


def _int(d: Any, where: str) -> int:
    _check(
        isinstance(d, int) and not isinstance(d, bool),
        where,
        f"expected an integer, got {d!r}",
    )
    return d


def case_from_json(data: Any) -> Case:
    """Build and :func:`validate` a case from parsed JSON. Raises :class:`CaseError` naming the bad field."""
    d = _obj(
        data,
        "case",
        ("schema_version", "function", "f", "inputs", "transforms"),
        ("meta",),
    )
    version = d["schema_version"]
    _check(
        version in READABLE_SCHEMA_VERSIONS and not isinstance(version, bool),
        "schema_version",
        f"unsupported version {version!r} (this affuzz reads {', '.join(map(str, READABLE_SCHEMA_VERSIONS))})",
    )
    v2 = version >= 2
    v2_function = (
        "jvp_rule",
        "once_differentiable",
        "materialize_grads",
        "non_differentiable",
        "on_ctx",
        "detached",
        "non_tensor_output",
        "scalars",
        "dirty",
    )
    fd = _obj(
        d["function"],
        "function",
        ("n_inputs", "nodes", "outputs"),
        ("saved", "unused_grads", "none_grads", "style", "vmap_rule", *(v2_function if v2 else ())),
    )
    nodes = []
    for k, nd in enumerate(_list(fd["nodes"], "function.nodes")):
        w = f"function.nodes[{k}]"
        nd = _obj(nd, w, ("op", "args"), ("exponent", *(("scalar",) if v2 else ())))
        nodes.append(
            Node(
                op=nd["op"],
                args=tuple(_list(nd["args"], f"{w}.args")),
                exponent=_int(nd.get("exponent", 2), f"{w}.exponent"),
                scalar=_int(nd.get("scalar", 0), f"{w}.scalar"),
            )
        )
    outputs = []
    for j, od in enumerate(_list(fd["outputs"], "function.outputs")):
        w = f"function.outputs[{j}]"
        od = _obj(od, w, ("kind", "ref"), ("view",))
        view = None
        if "view" in od:
            vd = _obj(
                od["view"],
                f"{w}.view",
                ("op",),
                ("dim", "index", "length", "shape", "dim1"),
            )
            view = View(
                op=vd["op"],
                dim=_int(vd.get("dim", 0), f"{w}.view.dim"),
                index=_int(vd.get("index", 0), f"{w}.view.index"),
                length=_int(vd.get("length", 1), f"{w}.view.length"),
                shape=tuple(_int(s, f"{w}.view.shape") for s in _list(vd.get("shape", []), f"{w}.view.shape")),
                dim1=_int(vd.get("dim1", 1), f"{w}.view.dim1"),
            )
        outputs.append(Output(kind=od["kind"], ref=od["ref"], view=view))
    fn = FunctionDef(
        n_inputs=_int(fd["n_inputs"], "function.n_inputs"),
        nodes=tuple(nodes),
        outputs=tuple(outputs),
        saved=tuple(_list(fd.get("saved", []), "function.saved")),
        unused_grads=tuple(
            _int(j, "function.unused_grads") for j in _list(fd.get("unused_grads", []), "function.unused_grads")
        ),
        none_grads=tuple(
            _int(i, "function.none_grads") for i in _list(fd.get("none_grads", []), "function.none_grads")
        ),
        style=fd.get("style", "setup_context"),
        vmap_rule=fd.get("vmap_rule", "none"),
        jvp_rule=fd.get("jvp_rule", False),
        once_differentiable=fd.get("once_differentiable", False),
        materialize_grads=fd.get("materialize_grads", True),
        non_differentiable=tuple(
            _int(j, "function.non_differentiable")
            for j in _list(fd.get("non_differentiable", []), "function.non_differentiable")
        ),
        on_ctx=tuple(_list(fd.get("on_ctx", []), "function.on_ctx")),
        detached=tuple(_list(fd.get("detached", []), "function.detached")),
        non_tensor_output=fd.get("non_tensor_output", False),
        scalars=tuple(_list(fd.get("scalars", []), "function.scalars")),
        dirty=tuple(_int(i, "function.dirty") for i in _list(fd.get("dirty", []), "function.dirty")),
    )
    f = _obj(d["f"], "f", ("uses",), ("combine", *(("inplace", "inplace_no_grad") if v2 else ())))
    idata = _obj(d["inputs"], "inputs", ("shape", "values"), ("dtype",))
    inputs = Inputs(
        shape=tuple(_int(s, "inputs.shape") for s in _list(idata["shape"], "inputs.shape")),
        values=tuple(
            tuple(_list(v, f"inputs.values[{i}]")) for i, v in enumerate(_list(idata["values"], "inputs.values"))
        ),
        dtype=idata.get("dtype", "float64"),
    )
    transforms = []
    for i, td in enumerate(_list(d["transforms"], "transforms")):
        w = f"transforms[{i}]"
        td = _obj(td, w, ("name",), ("argnums", "batch_size", *(("in_dims", "out_dims") if v2 else ())))
        in_dims = tuple(
            None if v is None else _int(v, f"{w}.in_dims") for v in _list(td.get("in_dims", []), f"{w}.in_dims")
        )
        transforms.append(
            Transform(
                name=td["name"],
                argnums=_argnums(td.get("argnums", 0), f"{w}.argnums"),
                batch_size=_int(td.get("batch_size", 0), f"{w}.batch_size"),
                in_dims=in_dims,
                out_dims=_int(td.get("out_dims", 0), f"{w}.out_dims"),
            )
        )
    meta = d.get("meta", {})
    _check(isinstance(meta, dict), "meta", "expected an object")
    case = Case(
        function=fn,
        f=FDef(
            uses=tuple(_int(j, "f.uses") for j in _list(f["uses"], "f.uses")),
            combine=f.get("combine", "add"),
            inplace=tuple(_int(j, "f.inplace") for j in _list(f.get("inplace", []), "f.inplace")),
            inplace_no_grad=f.get("inplace_no_grad", False),
        ),
        inputs=inputs,
        transforms=tuple(transforms),
        meta=meta,
    )
    return validate(case)


def loads(text: str, *, source: str = "<string>") -> Case:
    """Parse JSON text into a validated case; errors are prefixed with ``source``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CaseError(f"{source}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    try:
        return case_from_json(data)
    except CaseError as e:
        raise CaseError(f"{source}: {e}") from None


def load(path: str) -> Case:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CaseError(f"{path}: cannot read ({e.strerror})") from None
    return loads(text, source=str(path))
