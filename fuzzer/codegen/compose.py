"""Each side of a rendered script as one expression: the case's stack composed in a mode (torch.func, its
create_graph twins, finite differences, compiled), with the helpers it calls. Torch-free.

Split from :mod:`fuzzer.codegen.render`, which puts the sides into a script.
"""

from __future__ import annotations

import re

from ..ir.case import CHECKPOINT_COMPILE, Case, Checkpoint, Compile, Transform
from ..ir.oracles import oracle_kind, reference_case, side_a_mode
from ..ir.shapes import in_dims_of, level_input_shapes, level_output_shapes, needs_sum
from ..ir.transforms import TRANSFORM_KINDS, transform_kind

#: Levels called as ``torch.func.<name>`` (NOTE [transform table] in :mod:`fuzzer.ir.transforms`).
_TORCH_FUNC = tuple(k.name for k in TRANSFORM_KINDS if k.torch_func)
HELPER_ORDER = (
    "summed",
    "autograd_grad",
    "autograd_grads",
    "vmap_loop",
    "jacrev_loop",
    "_nums",
    "_replace_arg",
    "_result",
    "jacfwd_dual",
    "jvp_dual",
    "vjp_ones",
    "jvp_ones",
    "linearize_ones",
    "fd_jac",
    "fd_grad",
    "fd_vjp",
    "fd_jvp",
    "fd_hessian",
    "checkpointed",
    "selective_checkpointed",
    "hooked",
    "hooked_copy",
    "on_cpu",
    "compiled_autograd",
    "opchecked",
)
#: NOTE [checkpoint mode]: the helper (fuzzer/codegen/repro_modes.py) that wraps ``f`` for each kind.
CHECKPOINT_HELPERS = {
    "hooks": "hooked",
    "hooks_copy": "hooked_copy",
    "save_on_cpu": "on_cpu",
    "checkpoint": "checkpointed",
    "selective": "selective_checkpointed",
}


def _vmap_args(t: Transform, n_inputs: int) -> str:
    dims = in_dims_of(t, n_inputs)
    text = ""
    if any(d != 0 for d in dims):
        text += f", in_dims={dims[0]}" if n_inputs == 1 else f", in_dims=({', '.join(map(str, dims))})"
    if t.out_dims:
        text += f", out_dims={t.out_dims}"
    return text


def compose(case: Case, mode: str) -> tuple[str, set[str]]:
    """The composed call expression for ``mode`` ('functorch', 'create_graph' or 'fd': finite
    differences, for triage) and the names it uses."""
    return compose_stack(case.transforms, needs_sum(case), case.function.n_inputs, mode)


def compose_stack(
    transforms: tuple[Transform, ...],
    sums: list[bool],
    n: int,
    mode: str,
    inner: str = "f",
    *,
    scalar: list[bool] | None = None,
) -> tuple[str, set[str]]:
    """:func:`compose` of a bare stack around ``inner``, a function of ``n`` inputs; ``sums[i]``: whether
    level i (outermost first) sums its inner output first; ``scalar[i]`` (create_graph mode): whether
    level i differentiates a 0-d output w.r.t. a 0-d input (NOTE [scalar levels])."""
    expr = inner
    names: set[str] = set()
    scalar = scalar or [False] * len(transforms)
    for t, s, sc in reversed(list(zip(transforms, sums, scalar, strict=True))):
        if s:
            expr = f"summed({expr})"
            names.add("summed")
        arg = f", argnums={t.argnums}" if t.argnums else ""
        if isinstance(t.argnums, tuple):
            arg = f", argnums=({', '.join(map(str, t.argnums))}{',' if len(t.argnums) == 1 else ''})"
        if t.name == "vmap":
            arg = _vmap_args(t, n)
        if mode == "functorch_loop" and t.name == "vmap":
            name = "vmap_loop"
            expr = f"{name}({expr}{arg})"
        elif mode == "fd":
            name = transform_kind(t.name).fd_twin
            expr = f"{name}({expr}{arg})"
        elif mode in ("functorch", "functorch_loop") or t.name == "autograd_grad":
            name = transform_kind(t.name).functorch_call
            if name == "autograd_grad" and isinstance(t.argnums, tuple):
                name = "autograd_grads"
            expr = f"{name}({expr}{arg})"
        elif sc and t.name in ("jacrev", "hessian", "jacfwd"):  # NOTE [scalar levels]
            name = "jvp_dual" if t.name == "jacfwd" else "autograd_grad"
            cg = "" if t.name == "jacfwd" else ", create_graph=True"
            for _ in range(2 if t.name == "hessian" else 1):
                expr = f"{name}({expr}{arg}{cg})"
        else:
            name = transform_kind(t.name).create_graph_twin
            if t.name == "hessian":
                expr = f"{name}({name}({expr}{arg}){arg})"
            elif name == "autograd_grad":
                name = "autograd_grads" if isinstance(t.argnums, tuple) else name
                expr = f"{name}({expr}{arg}, create_graph=True)"
            else:
                expr = f"{name}({expr}{arg})"
        names.add(name)
        if name in ("vjp_ones", "jvp_ones", "linearize_ones", "jvp_dual", "jacfwd_dual"):
            names.update(("_nums", "_replace_arg", "_result"))
    return expr, names


def scalar_levels(case: Case) -> list[bool]:
    """For each transform (outermost first): whether it differentiates a 0-d output w.r.t. a 0-d input.

    NOTE [scalar levels]
    A Jacobian of a 0-d output w.r.t. a 0-d input is its one derivative: there ``jacrev_loop`` (one
    ``autograd.grad`` per output element, create_graph=True) computes what ``autograd_grad(...,
    create_graph=True)`` does, and ``jacfwd_dual`` (one basis tangent, which is ``ones``) what
    ``jvp_dual`` does, zeros where nothing reaches the input included. A published repro writes those
    levels so, which lets them be straight-line code (NOTE [straight-line sides]); the script the
    fuzzer executes keeps the general twins (tests/codegen/test_modes.py checks the two agree in value).
    They agree in value, not in every error: ``jacfwd_dual``'s tangent is a view of ``eye``, ``jvp_dual``'s
    is not, and an error can need that (a Function whose jvp returns its input tangent itself, now the
    rule-breaking variant ``jvp_alias``, raised only under jacfwd_dual). So this is part of the straight-line
    attempt: where it does not reproduce, the fallback (``Expect.straight=False``) writes the twins."""
    ins = level_input_shapes(case)  # innermost first
    outs = level_output_shapes(case)
    depth = len(case.transforms)
    res = []
    for i, t in enumerate(case.transforms):
        lvl = depth - 1 - i
        arg = t.argnums if isinstance(t.argnums, int) else None
        res.append(arg is not None and ins[lvl][arg] == () and outs[lvl] == ())
    return res


def qualified(expr: str) -> str:
    """``grad(f)`` -> ``torch.func.grad(f)``: a repro reads best with the transform's full name."""
    return re.sub(rf"\b({'|'.join(_TORCH_FUNC)})\(", r"torch.func.\1(", expr)


def reference_side(case: Case, oracle: str) -> tuple[str, set[str]]:
    """Side B's composed call expression under ``oracle`` (NOTE [oracles]) and the names it uses."""
    return _SIDE_B[oracle_kind(oracle).side_b](case, oracle)  # NOTE [oracle table]


def side_a(case: Case, oracle: str) -> tuple[str, set[str]]:
    """Side A's composed call expression under ``oracle``: the case's stack under torch.func, or its
    create_graph twins where a mode wraps the plain-autograd side (:func:`fuzzer.ir.oracles.side_a_mode`)."""
    return compose(case, side_a_mode(case, oracle))


def checkpointed_side(case: Case, oracle: str = "") -> tuple[str, set[str]]:
    """NOTE [checkpoint mode]: side A's expression with ``f`` wrapped as ``case.checkpoint`` says (and, placed
    ``compiled``, the wrapped ``f`` under torch.compile)."""
    c = case.checkpoint
    if c is None:
        raise ValueError("checkpoint_vs_plain needs a case with a checkpoint")
    return checkpointed_stack(case.transforms, needs_sum(case), case.function.n_inputs, c)


def checkpointed_stack(stack: tuple[Transform, ...], sums: list[bool], n: int, c: Checkpoint) -> tuple[str, set[str]]:
    """:func:`checkpointed_side` of a bare stack over ``f``, a function of ``n`` inputs."""
    helper = CHECKPOINT_HELPERS[c.kind]
    inner = f"{helper}(f)"
    if c.placement == "compiled":
        inner = compile_call(inner, CHECKPOINT_COMPILE)
    mode = "functorch" if c.placement == "inside" else "create_graph"
    expr, names = compose_stack(stack, sums, n, mode, inner=inner)
    return expr, names | {helper}


def opchecked_side(case: Case) -> tuple[str, set[str]]:
    """NOTE [custom op mode]: the create_graph side over ``opchecked(f)``: ``f`` once torch.library.opcheck passed
    the custom op on the arguments ``f`` gives it (the script's ``op_args``)."""
    expr, names = compose_stack(
        case.transforms, needs_sum(case), case.function.n_inputs, "create_graph", inner="opchecked(f)"
    )
    return expr, names | {"opchecked"}


#: NOTE [oracle table]: side B's expression for each recipe.
_SIDE_B = {
    "twins": lambda case, oracle: compose(case, "create_graph"),
    "loops": lambda case, oracle: compose(case, "functorch_loop"),
    "alternate": lambda case, oracle: compose(reference_case(case, oracle), "functorch"),
    "compiled": lambda case, oracle: compiled_side(case),
    "checkpointed": checkpointed_side,
    "opcheck": lambda case, oracle: opchecked_side(case),
    # NOTE [custom op mode]: side A's stack over the op's autograd.Function twin
    "function_twin": lambda case, oracle: compose_stack(
        case.transforms, needs_sum(case), case.function.n_inputs, side_a_mode(case, oracle), inner="f_function"
    ),
}


def compile_call(expr: str, c: Compile) -> str:
    """``torch.compile`` of ``expr`` as the case's ``compile`` asks (NOTE [compiled mode]); the backend in
    single quotes, so the expression can stand inside a double-quoted f-string of a repro."""
    return f"torch.compile({expr}, backend='{c.backend}', fullgraph={c.fullgraph})"


def compiled_side(case: Case) -> tuple[str, set[str]]:
    """The compiled side of ``compiled_vs_eager``: the eager side's expression with torch.compile placed
    as ``case.compile`` says (NOTE [compiled mode]); an outer plain autograd level stays outside a
    compile placed ``around`` the torch.func stack."""
    c = case.compile
    if c is None:
        raise ValueError("compiled_vs_eager needs a case with a compile")
    return compiled_stack(case.transforms, needs_sum(case), case.function.n_inputs, c)


def compiled_stack(stack: tuple[Transform, ...], sums: list[bool], n: int, c: Compile) -> tuple[str, set[str]]:
    """:func:`compiled_side` of a bare stack over ``f``, a function of ``n`` inputs."""
    if c.placement in ("plain", "inside"):
        mode = "create_graph" if c.placement == "plain" else "functorch"
        expr, names = compose_stack(stack, sums, n, mode, inner=compile_call("f", c))
        if c.autograd:  # the backward the plain autograd engine runs, compiled too
            return f"compiled_autograd({expr}, '{c.backend}')", names | {"compiled_autograd"}
        return expr, names
    outer = 1 if stack[0].name == "autograd_grad" else 0
    inner, names = compose_stack(stack[outer:], sums[outer:], n, "functorch")
    compiled = compile_call(inner, c)
    if not outer:
        return compiled, names
    expr, more = compose_stack(stack[:outer], sums[:outer], n, "functorch", inner=compiled)
    return expr, names | more
