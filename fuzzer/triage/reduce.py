"""IR-level reductions: every smaller neighbour of a case. Torch-free.

The second shrinking stage (NOTE [shrinking] in :mod:`fuzzer.triage.shrink`) walks these candidates to a fixed
point. :func:`candidates` yields them biggest cut first: drop a transform level, an input, an output, a
node, a saved tensor, a feature; replace a transform or an op by a simpler one; shrink shapes toward
scalars and batch sizes toward 1; simplify values toward small integers. Every candidate is repaired
and validated, and strictly smaller than its parent by :func:`size`, so any walk that only accepts
candidates terminates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from ..ir.case import (
    CHECKPOINT_KINDS,
    CHECKPOINT_PLACEMENTS,
    COMPILE_BACKENDS,
    COMPILE_PLACEMENTS,
    Case,
    CaseError,
    FunctionDef,
    Node,
    Output,
    Transform,
)
from ..ir.dataflow import repair_vmap_dims
from ..ir.features import features
from ..ir.ops import op_kind
from ..ir.shapes import input_shapes, numel
from ..ir.transforms import transform_kind
from ..ir.validate import validate
from .ablate import drop_outputs, repaired, without


def _value_cost(v: float) -> int:
    if float(v).is_integer():
        return 0 if v == 1 else 1 if abs(v) <= 2 else 2
    return 3


def compile_rank(case: Case) -> int:
    """NOTE [compiled mode]: the backend first (``eager`` < ``aot_eager`` < ``inductor``), then
    ``fullgraph=True`` before False, then the placement (``plain`` < ``inside`` < ``around``), compiled
    autograd off before on; NOTE [checkpoint mode]: the kind, then the placement, in their vocabularies'
    order. 0 for a case of neither mode."""
    c, k = case.compile, case.checkpoint
    rank = 0
    if c is not None:
        rank += (COMPILE_BACKENDS.index(c.backend) * 2 + (not c.fullgraph)) * len(COMPILE_PLACEMENTS) + (
            COMPILE_PLACEMENTS.index(c.placement)
        )
        rank += 100 * c.autograd  # compiled autograd: the backward compiled too
    if k is not None:  # NOTE [checkpoint mode]: the kind, then the placement
        rank += CHECKPOINT_KINDS.index(k.kind) * len(CHECKPOINT_PLACEMENTS) + CHECKPOINT_PLACEMENTS.index(k.placement)
    return rank


def size(case: Case) -> tuple[int, ...]:
    """The shrink order (lexicographic, smaller is simpler): levels, inputs, outputs, nodes, features,
    saved tensors, elements, batch sizes, transform and op ranks, values; the compile configuration's
    rank (:func:`compile_rank`) among the ranks."""
    fn = case.function
    t = case.transforms
    return (
        len(t),
        fn.n_inputs,
        len(fn.outputs),
        len(fn.nodes),
        len(features(case)),
        len(fn.saved) + len(fn.scalars),
        numel(case.inputs.shape) + len(case.inputs.shape),
        sum(x.batch_size for x in t),
        sum(transform_kind(x.name).shrink_rank for x in t),  # NOTE [transform table]
        compile_rank(case),
        sum(op_kind(n.op).shrink_rank + (n.exponent - 2 if n.op == "pow" else 0) for n in fn.nodes),  # NOTE [op table]
        sum(1 for x in t if x.argnums not in (0, ()) or x.out_dims or any(d != 0 for d in x.in_dims)),
        int(case.inputs.dtype != "float64") + int(case.f.combine == "sum") + len(case.f.inplace) + len(case.f.uses),
        int(fn.vmap_rule != "none"),
        sum(_value_cost(v) for vs in case.inputs.values for v in vs),
    )


def fit_values(case: Case, template: Case | None = None) -> Case | None:
    """``case`` with input values resized to its input shapes (values taken, cyclically, from
    ``template`` or itself); None when the result is not a valid case."""
    src = (template or case).inputs.values
    try:
        shapes = input_shapes(case)
        values = []
        for i, shape in enumerate(shapes):
            old = src[min(i, len(src) - 1)] or (1.0,)
            values.append(tuple(old[k % len(old)] for k in range(numel(shape))))
        return validate(replace(case, inputs=replace(case.inputs, values=tuple(values))))
    except CaseError:
        return None


def _with_transforms(case: Case, transforms: tuple[Transform, ...]) -> Case | None:
    if not transforms:
        return None
    try:
        fixed = repair_vmap_dims(replace(case, transforms=transforms))
    except CaseError:
        return None
    return fit_values(fixed, case)


def is_subsequence(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    it = iter(long)
    return all(name in it for name in short)


def to_skeleton(case: Case, names: tuple[str, ...]) -> Case | None:
    """``case`` with transform levels dropped so its skeleton is ``names`` (the leftmost match is kept);
    None if ``names`` is not a subsequence of its skeleton or the result is not a valid case."""
    keep, k = [], 0
    for t in case.transforms:
        if k < len(names) and t.name == names[k]:
            keep.append(t)
            k += 1
    if k < len(names):
        return None
    return _with_transforms(case, tuple(keep))


def _drop_levels(case: Case) -> Iterator[Case | None]:
    t = case.transforms
    for i in range(len(t)):
        yield _with_transforms(case, t[:i] + t[i + 1 :])


def _simpler_levels(case: Case) -> Iterator[Case | None]:
    t = case.transforms
    for i, level in enumerate(t):
        simpler = transform_kind(level.name).simpler  # NOTE [transform table]: reverse stays reverse, forward forward
        if simpler is not None:
            yield _with_transforms(case, t[:i] + (replace(level, name=simpler),) + t[i + 1 :])
        if level.name == "vmap":
            if level.batch_size > 1:
                yield _with_transforms(case, t[:i] + (replace(level, batch_size=1),) + t[i + 1 :])
            if level.in_dims and any(d != 0 for d in level.in_dims):
                yield _with_transforms(case, t[:i] + (replace(level, in_dims=()),) + t[i + 1 :])
            if level.out_dims:
                yield _with_transforms(case, t[:i] + (replace(level, out_dims=0),) + t[i + 1 :])
        elif level.argnums not in (0, ()):
            yield _with_transforms(case, t[:i] + (replace(level, argnums=0),) + t[i + 1 :])


def _rename_inputs(fn: FunctionDef, gone: int, into: int) -> FunctionDef:
    """References to input ``gone`` read input ``into`` instead; inputs after ``gone`` move down one."""

    def m(r: str) -> str:
        if not r.startswith("x"):
            return r
        i = int(r[1:])
        i = into if i == gone else i
        return f"x{i - 1 if i > gone else i}"

    def mi(idx: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(dict.fromkeys(i - 1 if i > gone else i for i in idx if i != gone))

    return replace(
        fn,
        n_inputs=fn.n_inputs - 1,
        nodes=tuple(replace(n, args=tuple(m(a) for a in n.args)) for n in fn.nodes),
        outputs=tuple(replace(o, ref=m(o.ref)) for o in fn.outputs),
        saved=tuple(dict.fromkeys(m(r) for r in fn.saved)),
        on_ctx=tuple(dict.fromkeys(m(r) for r in fn.on_ctx)),
        detached=tuple(dict.fromkeys(m(r) for r in fn.detached)),
        none_grads=mi(fn.none_grads),
        dirty=mi(fn.dirty),
    )


def _drop_inputs(case: Case) -> Iterator[Case | None]:
    fn = case.function
    if fn.n_inputs == 1:
        return
    for gone in range(fn.n_inputs - 1, -1, -1):
        into = 0 if gone else 1
        new_fn = _rename_inputs(fn, gone, into)
        transforms = []
        ok = True
        for t in case.transforms:
            if t.name == "vmap":
                dims = tuple(d for i, d in enumerate(t.in_dims) if i != gone) if t.in_dims else ()
                transforms.append(replace(t, in_dims=dims))
                continue
            nums = t.argnums if isinstance(t.argnums, tuple) else (t.argnums,)
            nums = tuple(dict.fromkeys(into - (into > gone) if n == gone else n - (n > gone) for n in nums))
            if not nums:
                ok = False
                break
            transforms.append(replace(t, argnums=nums if isinstance(t.argnums, tuple) else nums[0]))
        if not ok:
            continue
        values = tuple(v for i, v in enumerate(case.inputs.values) if i != gone)
        f = case.f
        if f.apply_args:  # NOTE [aliased inputs]: the argument that lost its input gets the one renamed into
            at = {i: (into - (into > gone) if i == gone else i - (i > gone)) for i in range(fn.n_inputs)}
            f = replace(f, apply_args=tuple(at[i] for k, i in enumerate(f.apply_args) if k != gone))
        candidate = replace(
            case, function=new_fn, f=f, transforms=tuple(transforms), inputs=replace(case.inputs, values=values)
        )
        done = repaired(candidate)
        yield fit_values(done) if done is not None else None


def _drop_nodes(case: Case) -> Iterator[Case | None]:
    """Node k replaced by one of its arguments wherever it is read (then pruned)."""
    fn = case.function
    for k in range(len(fn.nodes) - 1, -1, -1):
        name = f"t{k}"
        for arg in dict.fromkeys(fn.nodes[k].args):
            if arg.startswith("x") and any(o.ref == name and o.kind == "node" for o in fn.outputs):
                outputs = tuple(Output("input", arg) if o.ref == name and o.kind == "node" else o for o in fn.outputs)
                outputs = tuple(replace(o, ref=arg) if o.ref == name else o for o in outputs)
            else:
                outputs = tuple(replace(o, ref=arg) if o.ref == name else o for o in fn.outputs)
            nodes = tuple(
                replace(n, args=tuple(arg if a == name else a for a in n.args)) if j > k else n
                for j, n in enumerate(fn.nodes)
            )
            saved = tuple(dict.fromkeys(arg if r == name else r for r in fn.saved))
            new_fn = replace(
                fn,
                nodes=nodes,
                outputs=outputs,
                saved=saved,
                on_ctx=tuple(dict.fromkeys(arg if r == name else r for r in fn.on_ctx)),
                detached=tuple(dict.fromkeys(arg if r == name else r for r in fn.detached)),
                non_differentiable=tuple(j for j in fn.non_differentiable if outputs[j].kind == "node"),
            )
            yield repaired(replace(case, function=new_fn))


def _simpler_ops(case: Case) -> Iterator[Case | None]:
    fn = case.function
    for k, node in enumerate(fn.nodes):
        options: list[Node] = []
        if node.op == "pow" and node.exponent > 2:
            options.append(replace(node, exponent=2))
        if op_kind(node.op).shrink_rank > 0:
            options.append(Node("pow", (node.args[0],), exponent=2))
        if op_kind(node.op).shrink_rank > op_kind("mul").shrink_rank:  # an op that reads harder than x * x
            options.append(Node("mul", (node.args[0], node.args[0])))
        for new in options:
            if op_kind(new.op).shrink_rank > op_kind(node.op).shrink_rank or new == node:
                continue
            nodes = fn.nodes[:k] + (new,) + fn.nodes[k + 1 :]
            yield repaired(replace(case, function=replace(fn, nodes=nodes)))


def _drop_scalars(case: Case) -> Iterator[Case | None]:
    """Non-tensor inputs no node reads."""
    fn = case.function
    for i in range(len(fn.scalars) - 1, -1, -1):
        if any(op_kind(n.op).scalar and n.scalar == i for n in fn.nodes):
            continue
        nodes = tuple(replace(n, scalar=n.scalar - 1) if op_kind(n.op).scalar and n.scalar > i else n for n in fn.nodes)
        scalars = fn.scalars[:i] + fn.scalars[i + 1 :]
        yield repaired(replace(case, function=replace(fn, nodes=nodes, scalars=scalars)))


def _drop_saved(case: Case) -> Iterator[Case | None]:
    fn = case.function
    for r in fn.saved:
        keep = tuple(s for s in fn.saved if s != r)
        yield repaired(
            replace(
                case,
                function=replace(
                    fn,
                    saved=keep,
                    on_ctx=tuple(s for s in fn.on_ctx if s != r),
                    detached=tuple(s for s in fn.detached if s != r),
                ),
            )
        )


def _drop_inplace(case: Case) -> Iterator[Case | None]:
    """One in-place op of ``f`` at a time (ablation drops them all at once)."""
    f = case.f
    if len(f.inplace) > 1:
        for j in f.inplace:
            yield repaired(replace(case, f=replace(f, inplace=tuple(i for i in f.inplace if i != j))))


def _simpler_f(case: Case) -> Iterator[Case | None]:
    f = case.f
    if len(f.uses) > 1:
        for j in f.uses:
            yield repaired(replace(case, f=replace(f, uses=tuple(u for u in f.uses if u != j))))
    if f.combine == "sum":
        yield repaired(replace(case, f=replace(f, combine="add")))


def _smaller_shapes(case: Case) -> Iterator[Case | None]:
    shape = tuple(case.inputs.shape)
    options: list[tuple[int, ...]] = [()] if shape else []
    options += [shape[:i] + shape[i + 1 :] for i in range(len(shape))] if len(shape) > 1 else []
    options += [shape[:i] + (1,) + shape[i + 1 :] for i in range(len(shape)) if shape[i] > 1]
    options += [shape[:i] + (shape[i] - 1,) + shape[i + 1 :] for i in range(len(shape)) if shape[i] > 2]
    for new in dict.fromkeys(options):
        candidate = replace(case, inputs=replace(case.inputs, shape=new))
        try:
            candidate = repair_vmap_dims(candidate)
        except CaseError:
            yield None
            continue
        yield fit_values(candidate, case)


def _simpler_values(case: Case) -> Iterator[Case | None]:
    vals = case.inputs.values
    inputs = case.inputs
    if inputs.dtype != "float64":
        yield fit_values(replace(case, inputs=replace(inputs, dtype="float64")))

    def with_values(new: tuple[tuple[float, ...], ...]) -> Case | None:
        return fit_values(replace(case, inputs=replace(inputs, values=new)))

    yield with_values(tuple(tuple(1.0 for _ in v) for v in vals))
    yield with_values(tuple(tuple(float(round(x)) for x in v) for v in vals))
    for i, v in enumerate(vals):
        for k, x in enumerate(v):
            for simpler in (1.0, float(round(x)), 2.0, -1.0, 0.5):
                if _value_cost(simpler) < _value_cost(x) or (simpler == 1.0 and x != 1.0 and _value_cost(x) > 0):
                    new_v = v[:k] + (simpler,) + v[k + 1 :]
                    yield with_values(vals[:i] + (new_v,) + vals[i + 1 :])
                    break


def _drop_features(case: Case) -> Iterator[Case | None]:
    for tag in features(case):
        yield without(case, tag)
    if case.function.vmap_rule != "none":  # no vmap rule at all (ablation only swaps one rule for the other)
        yield repaired(replace(case, function=replace(case.function, vmap_rule="none")))


def _simpler_compile(case: Case) -> Iterator[Case | None]:
    """NOTE [compiled mode]: a simpler backend, fullgraph, a simpler placement (one change each)."""
    c = case.compile
    if c is None:
        return
    for backend in COMPILE_BACKENDS[: COMPILE_BACKENDS.index(c.backend)]:
        yield replace(case, compile=replace(c, backend=backend))
    if not c.fullgraph:
        yield replace(case, compile=replace(c, fullgraph=True))
    for placement in COMPILE_PLACEMENTS[: COMPILE_PLACEMENTS.index(c.placement)]:
        if not c.autograd or placement == "plain":
            yield replace(case, compile=replace(c, placement=placement))
    if c.autograd:
        yield replace(case, compile=replace(c, autograd=False))


def _simpler_checkpoint(case: Case) -> Iterator[Case | None]:
    """NOTE [checkpoint mode]: a simpler kind, a simpler placement (one change each)."""
    k = case.checkpoint
    if k is None:
        return
    for kind in CHECKPOINT_KINDS[: CHECKPOINT_KINDS.index(k.kind)]:
        yield replace(case, checkpoint=replace(k, kind=kind))
    for placement in CHECKPOINT_PLACEMENTS[: CHECKPOINT_PLACEMENTS.index(k.placement)]:
        yield replace(case, checkpoint=replace(k, placement=placement))


def _drop_outputs(case: Case) -> Iterator[Case | None]:
    for j in range(len(case.function.outputs) - 1, -1, -1):
        yield drop_outputs(case, {j})


#: The passes in the order they are tried: the biggest cuts first.
PASSES: tuple[Callable[[Case], Iterator[Case | None]], ...] = (
    _simpler_compile,  # NOTE [compiled mode]: the compiler layer first, what a maintainer triages by
    _simpler_checkpoint,  # NOTE [checkpoint mode]: likewise the simplest way of keeping saved tensors
    _drop_levels,
    _drop_inputs,
    _drop_outputs,
    _drop_nodes,
    _drop_features,
    _drop_scalars,
    _drop_saved,
    _drop_inplace,
    _simpler_f,
    _simpler_levels,
    _smaller_shapes,
    _simpler_ops,
    _simpler_values,
)


def candidates(
    case: Case, passes: tuple[Callable[[Case], Iterator[Case | None]], ...] = PASSES
) -> Iterator[tuple[str, Case]]:
    """Every valid, strictly smaller (by :func:`size`) neighbour of ``case`` that ``passes`` make (all of
    them by default), with the pass that made it. Deterministic: the same case always yields the same
    sequence."""
    here = size(case)
    seen: set[Case] = set()
    for p in passes:
        for c in p(case):
            if c is None or c in seen:
                continue
            seen.add(c)
            if size(c) < here:
                yield p.__name__.lstrip("_"), c
