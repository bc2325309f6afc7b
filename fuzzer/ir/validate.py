"""Validation of a case: every invariant of :mod:`fuzzer.ir.case`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .case import (
    CHECKPOINT_KINDS,
    CHECKPOINT_PLACEMENTS,
    COMBINES,
    COMPILE_BACKENDS,
    COMPILE_PLACEMENTS,
    DTYPES,
    FORWARD_MODE_TRANSFORMS,
    FUNCTORCH_TRANSFORMS,
    GRAD_RULES,
    INPLACE_OPS,
    MAX_BATCH,
    MAX_DEPTH,
    MAX_DIM_SIZE,
    MAX_INPUTS,
    MAX_NDIM,
    MAX_NODES,
    MAX_OUTPUTS,
    MAX_SCALARS,
    OPS,
    OUTER_TRANSFORMS,
    OUTPUT_KINDS,
    POW_EXPONENTS,
    SCALAR_OPS,
    STYLES,
    TRANSFORMS,
    VIEW_OPS,
    VMAP_IN_DIMS,
    VMAP_OUT_DIMS,
    VMAP_RULES,
    Case,
    CaseError,
    FunctionDef,
    ref_kind,
)
from .custom_op import unsayable, unsayable_reason
from .dataflow import missing_values, value_provided_by_saved
from .shapes import in_dims_of, input_shapes, level_input_shapes, level_output_shapes, numel, output_shapes, view_shape


def require(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise CaseError(f"{where}: {msg}")


def _one_of(value: Any, allowed: Iterable[str], where: str, what: str) -> None:
    allowed = tuple(allowed)
    require(
        isinstance(value, str) and value in allowed,
        where,
        f"unknown {what} {value!r} (known: {', '.join(allowed)})",
    )


def validate(case: Case) -> Case:
    """Check every invariant in the module docstring; return ``case`` or raise :class:`CaseError`."""
    fn = case.function
    base = tuple(case.inputs.shape)
    for check in _SECTIONS:
        check(case, fn, base)
    return case


def _check_nodes(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The Function's nodes: ops, arguments defined before use, exponents, scalars."""
    require(
        isinstance(fn.n_inputs, int) and 1 <= fn.n_inputs <= MAX_INPUTS,
        "function.n_inputs",
        f"must be 1..{MAX_INPUTS}",
    )
    require(len(fn.nodes) <= MAX_NODES, "function.nodes", f"at most {MAX_NODES} nodes")
    for k, node in enumerate(fn.nodes):
        w = f"function.nodes[{k}]"
        _one_of(node.op, OPS, f"{w}.op", "op")
        require(
            len(node.args) == OPS[node.op],
            f"{w}.args",
            f"{node.op} takes {OPS[node.op]} argument(s)",
        )
        for a in node.args:
            kind, idx = _ref(a, f"{w}.args")
            require(kind in "xt", f"{w}.args", f"{a!r} must be an input or an earlier node")
            require(
                idx < (fn.n_inputs if kind == "x" else k),
                f"{w}.args",
                f"{a!r} is not defined before t{k}",
            )
        if node.op == "pow":
            require(
                node.exponent in POW_EXPONENTS,
                f"{w}.exponent",
                f"must be one of {POW_EXPONENTS}",
            )
        if node.op in SCALAR_OPS:
            require(
                isinstance(node.scalar, int) and 0 <= node.scalar < len(fn.scalars),
                f"{w}.scalar",
                "must index function.scalars",
            )


def _check_outputs(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The Function's outputs: kinds, references, views."""
    require(
        1 <= len(fn.outputs) <= MAX_OUTPUTS,
        "function.outputs",
        f"must have 1..{MAX_OUTPUTS} outputs",
    )
    node_outputs = {o.ref for o in fn.outputs if o.kind == "node"}
    for j, o in enumerate(fn.outputs):
        w = f"function.outputs[{j}]"
        _one_of(o.kind, OUTPUT_KINDS, f"{w}.kind", "output kind")
        kind, idx = _ref(o.ref, f"{w}.ref")
        if o.kind == "node":
            require(
                kind == "t" and idx < len(fn.nodes),
                f"{w}.ref",
                f"{o.ref!r} is not a node",
            )
        elif o.kind == "input":
            require(
                kind == "x" and idx < fn.n_inputs,
                f"{w}.ref",
                f"{o.ref!r} is not an input",
            )
        else:
            require(o.view is not None, f"{w}.view", "a view output needs a view")
            require(
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
            require(o.view is None, f"{w}.view", f"a {o.kind} output has no view")


def _check_rules(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The rest of the Function: saved tensors, dropped gradients, style and rules, mark_dirty, scalars, flags, non-differentiable outputs, what ctx keeps, what backward needs."""
    for r in fn.saved:
        kind, idx = _ref(r, "function.saved")
        limit = {"x": fn.n_inputs, "t": len(fn.nodes), "o": len(fn.outputs)}[kind]
        require(idx < limit, "function.saved", f"{r!r} does not exist")
    require(len(set(fn.saved)) == len(fn.saved), "function.saved", "duplicate entries")
    require(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) for j in fn.unused_grads),
        "function.unused_grads",
        "output index out of range",
    )
    require(
        all(isinstance(i, int) and 0 <= i < fn.n_inputs for i in fn.none_grads),
        "function.none_grads",
        "input index out of range",
    )
    _one_of(fn.style, STYLES, "function.style", "style")
    _one_of(fn.vmap_rule, VMAP_RULES, "function.vmap_rule", "vmap rule")
    _one_of(fn.grad_rule, GRAD_RULES, "function.grad_rule", "gradient rule")
    require(
        fn.style != "legacy" or fn.vmap_rule == "none",
        "function.vmap_rule",
        "a legacy-style Function cannot have a vmap rule",
    )
    cannot = unsayable(fn) if fn.style == "custom_op" else ()
    if cannot:  # NOTE [custom op mode]
        raise CaseError(f"function.style: a custom op cannot say {cannot[0]} ({unsayable_reason(cannot[0])})")
    for i in fn.dirty:
        x = f"x{i}"
        require(isinstance(i, int) and 0 <= i < fn.n_inputs, "function.dirty", "input index out of range")
        require(
            any(o.kind == "input" and o.ref == x for o in fn.outputs), "function.dirty", f"{x} must be returned as-is"
        )
        require(
            not any(x in n.args for n in fn.nodes) and not any(o.kind == "view" and o.ref == x for o in fn.outputs),
            "function.dirty",
            f"{x} is modified in place, so no intermediate or view may read it",
        )
        require(all(value_provided_by_saved(fn, r) != x for r in fn.saved), "function.dirty", f"{x} must not be saved")
    require(len(set(fn.dirty)) == len(fn.dirty), "function.dirty", "duplicate entries")
    require(len(fn.scalars) <= MAX_SCALARS, "function.scalars", f"at most {MAX_SCALARS}")
    require(
        all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in fn.scalars),
        "function.scalars",
        "must be finite numbers",
    )
    require(not fn.jvp_not_view or fn.jvp_rule, "function.jvp_not_view", "needs a jvp rule (jvp_rule: true)")
    require(not fn.jvp_alias or fn.jvp_rule, "function.jvp_alias", "needs a jvp rule (jvp_rule: true)")
    for name in (
        "jvp_rule",
        "once_differentiable",
        "materialize_grads",
        "non_tensor_output",
        "jvp_not_view",
        "jvp_alias",
    ):
        require(isinstance(getattr(fn, name), bool), f"function.{name}", "must be true or false")
    referenced = [o.ref for o in fn.outputs]
    for j in fn.non_differentiable:
        require(
            isinstance(j, int) and 0 <= j < len(fn.outputs), "function.non_differentiable", "output index out of range"
        )
        o = fn.outputs[j]
        require(
            o.kind == "node" and referenced.count(o.ref) == 1,
            "function.non_differentiable",
            f"output {j} must be a node output no other output refers to",
        )
    require(
        len(set(fn.non_differentiable)) == len(fn.non_differentiable),
        "function.non_differentiable",
        "duplicate entries",
    )
    for name in ("on_ctx", "detached"):
        sub = getattr(fn, name)
        require(
            all(r in fn.saved for r in sub) and len(set(sub)) == len(sub),
            f"function.{name}",
            "must list distinct entries of function.saved",
        )
    missing = missing_values(fn)
    require(
        not missing,
        "function.saved",
        f"backward needs {', '.join(missing)} but it is not saved (save it, or an output aliasing it)",
    )


def _check_f(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """``f``: the outputs it uses, how it combines them, what it modifies in place."""
    require(
        len(case.f.uses) >= 1 and len(set(case.f.uses)) == len(case.f.uses),
        "f.uses",
        "must list distinct output indices",
    )
    require(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) for j in case.f.uses),
        "f.uses",
        "output index out of range",
    )
    _one_of(case.f.combine, COMBINES, "f.combine", "combine")
    require(
        all(isinstance(j, int) and 0 <= j < len(fn.outputs) and fn.outputs[j].kind == "node" for j in case.f.inplace)
        and len(set(case.f.inplace)) == len(case.f.inplace),
        "f.inplace",
        "must list distinct node outputs",
    )
    require(isinstance(case.f.inplace_no_grad, bool), "f.inplace_no_grad", "must be true or false")
    if case.f.combine == "add":
        shapes = output_shapes(fn, base)
        require(
            len({shapes[j] for j in case.f.uses}) == 1,
            "f.combine",
            "'add' needs all used outputs to have one shape",
        )


def _check_inputs(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The inputs: dtype, shape, one entry per input."""
    inp = case.inputs
    _one_of(inp.dtype, DTYPES, "inputs.dtype", "dtype")
    require(
        len(base) <= MAX_NDIM and all(isinstance(s, int) and 1 <= s <= MAX_DIM_SIZE for s in base),
        "inputs.shape",
        f"at most {MAX_NDIM} dims of size 1..{MAX_DIM_SIZE}",
    )
    require(
        len(inp.values) == fn.n_inputs,
        "inputs.values",
        f"needs one entry per input ({fn.n_inputs})",
    )


def _check_transforms(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The stack: names, the outermost-only levels, vmap's dims, argnums, at most one forward-mode level, vmap dims within the shapes they see."""
    require(
        1 <= len(case.transforms) <= MAX_DEPTH,
        "transforms",
        f"depth must be 1..{MAX_DEPTH}",
    )
    for i, t in enumerate(case.transforms):
        w = f"transforms[{i}]"
        _one_of(t.name, TRANSFORMS, f"{w}.name", "transform")
        if t.name in OUTER_TRANSFORMS:
            require(i == 0, f"{w}.name", f"{t.name} must be the outermost level")
        if t.name == "vmap":
            require(
                isinstance(t.batch_size, int) and 1 <= t.batch_size <= MAX_BATCH,
                f"{w}.batch_size",
                f"must be 1..{MAX_BATCH}",
            )
            if t.in_dims:
                require(len(t.in_dims) == fn.n_inputs, f"{w}.in_dims", f"needs one entry per input ({fn.n_inputs})")
                for d in t.in_dims:
                    require(
                        d in VMAP_IN_DIMS and not isinstance(d, bool),
                        f"{w}.in_dims",
                        f"entries must be one of {VMAP_IN_DIMS}",
                    )
                require(any(d is not None for d in t.in_dims), f"{w}.in_dims", "at least one input must be batched")
            require(
                t.out_dims in VMAP_OUT_DIMS and not isinstance(t.out_dims, bool),
                f"{w}.out_dims",
                f"must be one of {VMAP_OUT_DIMS}",
            )
        else:
            require(
                t.batch_size == 0 and not t.in_dims and t.out_dims == 0,
                w,
                "only vmap has batch_size, in_dims and out_dims",
            )
            nums = t.argnums if isinstance(t.argnums, tuple) else (t.argnums,)
            require(
                all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < fn.n_inputs for a in nums),
                f"{w}.argnums",
                "input index out of range",
            )
            if isinstance(t.argnums, tuple):
                require(i == 0, f"{w}.argnums", "a tuple of argnums is allowed on the outermost level only")
                require(len(set(nums)) == len(nums) >= 1, f"{w}.argnums", "must list distinct inputs")
    require(
        any(t.name in FUNCTORCH_TRANSFORMS for t in case.transforms),
        "transforms",
        "needs at least one torch.func transform",
    )
    require(
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
            require(
                d is None or d <= len(ins[level][i]),
                f"{w}.in_dims",
                f"dim {d} out of range for input {i} of shape {ins[level][i]}",
            )
        require(
            t.out_dims <= len(outs[level]),
            f"{w}.out_dims",
            f"dim {t.out_dims} out of range for output shape {outs[level]}",
        )


def _check_input_values(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """The input values: as many as the shapes need, finite."""
    inp = case.inputs
    for i, (vals, shape) in enumerate(zip(inp.values, input_shapes(case), strict=True)):
        n = numel(shape)
        require(len(vals) == n, f"inputs.values[{i}]", f"has {len(vals)} values, shape {shape} needs {n}")
        require(
            all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vals),
            f"inputs.values[{i}]",
            "values must be finite numbers",
        )


def _check_inplace_nodes(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """NOTE [in-place forward]: an in-place node modifies an intermediate nothing else reads."""
    reads = [a for n in fn.nodes for a in n.args] + [o.ref for o in fn.outputs] + list(fn.saved)
    for k, node in enumerate(fn.nodes):  # NOTE [in-place forward]
        require(isinstance(node.inplace, bool), f"function.nodes[{k}].inplace", "must be true or false")
        if not node.inplace:
            continue
        w, first = f"function.nodes[{k}].inplace", node.args[0]
        require(node.op in INPLACE_OPS, w, f"{node.op} has no in-place form")
        require(
            first.startswith("t") and reads.count(first) == 1,
            w,
            f"its first argument {first} must be an intermediate that nothing else reads, returns or saves",
        )


def _check_apply_args(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """NOTE [aliased inputs]: the tensors ``f`` passes to ``apply``."""
    args = case.f.apply_args  # NOTE [aliased inputs]
    if args:
        require(
            len(args) == fn.n_inputs and all(isinstance(i, int) and 0 <= i < fn.n_inputs for i in args),
            "f.apply_args",
            f"must name an input of f (0..{fn.n_inputs - 1}) for each of the {fn.n_inputs} tensor arguments",
        )
        require(not fn.dirty, "f.apply_args", "a Function that modifies an input in place gets each input once")


def _check_compile(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """NOTE [compiled mode]: the compile configuration."""
    if case.compile is not None:  # NOTE [compiled mode]
        c = case.compile
        _one_of(c.backend, COMPILE_BACKENDS, "compile.backend", "backend")
        _one_of(c.placement, COMPILE_PLACEMENTS, "compile.placement", "placement")
        require(isinstance(c.fullgraph, bool), "compile.fullgraph", "must be true or false")
        require(isinstance(c.autograd, bool), "compile.autograd", "must be true or false")
        require(
            not c.autograd or c.placement == "plain",
            "compile.autograd",
            "compiled autograd compiles the plain autograd engine's backward: placement 'plain' only",
        )


def _check_checkpoint(case: Case, fn: FunctionDef, base: tuple[int, ...]) -> None:
    """NOTE [checkpoint mode]: the checkpoint configuration."""
    if case.checkpoint is not None:
        _one_of(case.checkpoint.kind, CHECKPOINT_KINDS, "checkpoint.kind", "kind")
        _one_of(case.checkpoint.placement, CHECKPOINT_PLACEMENTS, "checkpoint.placement", "placement")


#: validate()'s sections in the order they run: the first invariant broken is the one reported, and a later
#: section may rely on an earlier one (the shape checks of the stack need valid outputs and levels).
_SECTIONS = (
    _check_nodes,
    _check_outputs,
    _check_rules,
    _check_f,
    _check_inputs,
    _check_transforms,
    _check_input_values,
    _check_inplace_nodes,
    _check_apply_args,
    _check_compile,
    _check_checkpoint,
)


def _ref(r: Any, where: str) -> tuple[str, int]:
    require(isinstance(r, str), where, f"reference {r!r} must be a string")
    try:
        return ref_kind(r)
    except CaseError as e:
        raise CaseError(f"{where}: {e}") from None
