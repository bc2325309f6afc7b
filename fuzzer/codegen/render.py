"""Render a case into one standalone script (imports torch only). Torch-free.

One template for every case (:func:`render`): the Function (from :mod:`fuzzer.codegen.function`), ``f``,
the inputs, the helpers the stack needs (copied from :mod:`fuzzer.codegen.repro_lib`), both sides side by
side, then the comparison. Three ways to end it (NOTE [repro styles]): the ``full`` script the fuzzer
executes (see NOTE [the repro is what runs] in :mod:`fuzzer.judge.execute`), the published ``repro.py`` in
the seed's style, and ``test_repro.py``. Each prints or asserts both results and fails (exit 1) while the
two sides disagree.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..ir.case import Case, Compile, Transform
from ..ir.features import derivatives_exact
from ..ir.oracles import COMPILED, MAIN, REFERENCE_MODES, reference_case
from ..ir.shapes import in_dims_of, input_shapes, level_input_shapes, level_output_shapes, needs_sum, output_shapes
from .function import CLASS_NAME, parse, render_function, render_plain_forward

_RUNTIME = ("outcome", "finite_forward", "run", "too_slow", "check", "triage", "main")
#: The comparison, in every style.
_VERDICT = ("message_key", "error_key", "torch_bug", "layout", "identical", "verdict")
#: The verdict of a pair where at least one side raised, by (functorch raised, other side raised).
ERRORS_LINE = (
    'ERRORS = {(True, True): "different_errors", (True, False): "error_functorch_only", '
    '(False, True): "error_reference_only"}'
)
SCRIPT_STYLES = ("full", "repro", "pytest")


@dataclass(frozen=True)
class Expect:
    """What a published repro shows (NOTE [repro styles]): which side raises, and which side runs last. The
    last side runs uncaught, so an error is the script's own traceback (its message and the torch frames
    it passed through); the other side runs first, its result or error printed. Neither raising: both
    results are printed and ``torch.testing.assert_close`` compares them."""

    a_raises: bool = False
    b_raises: bool = False
    last: int = 0  # 0: side A (torch.func) runs last, 1: side B
    # for an error finding: what the other side gave when the finding was made. The repro then runs only
    # the side that raises (the bug is its error) and states the other side's result in a comment, so
    # the twins of that side are not in the script
    other: str | None = None
    # NOTE [straight-line sides]: plain-autograd levels written out where that is shorter
    straight: bool = True
    # NOTE [plain forward]: the Function's forward as a plain function, no autograd.Function
    plain: bool = False
    # NOTE [promises] in fuzzer/judge/compare.py: one side raises the error the docs promise, the other
    # returns; both run, and the script fails while exactly one of them raises
    promise: bool = False


# NOTE [plain forward]
# A maintainer's first question about a disagreement is whether it needs the custom Function at all.
# A value finding's published repro is first tried with the Function replaced by its own ``forward``
# as a plain function (autograd and torch.func differentiate it themselves): where that script shows
# the disagreement too, it is what gets published, and its header says no custom Function is needed
# (a bug of the transform, e.g. linearize's const-folding). A mismatch of torch.func against plain
# autograd on a plain function is a torch bug whatever the Function's rules said. Else (the common
# case) the repro keeps the class. Error findings keep it always: their repro runs one side only and
# states the other side's result as found, which a plain function could change.


# NOTE [slow findings]
# Values agree but one side took more than SLOW_RATIO times as long as the other,
# and more than SLOW_SECONDS. Small cases make the vectorized side fast and the loops of create_graph
# mode slow by a factor of tens at most, so 50x over at least a second singles out real cost cliffs.
SLOW_RATIO = 50
SLOW_SECONDS = 1.0


@functools.cache
def lib_sources(docstrings: bool = True) -> dict[str, str]:
    """Source of every function in repro_lib.py/repro_fd.py, ``# noqa`` comments dropped (and
    docstrings, unless ``docstrings``)."""
    out = {}
    for name in ("error_key.py", "repro_lib.py", "repro_fd.py"):
        text = Path(__file__).with_name(name).read_text(encoding="utf-8")
        for node in parse(text).body:
            if isinstance(node, ast.FunctionDef):
                lines = (ast.get_source_segment(text, node) or "").splitlines()
                doc = node.body[0]
                if not docstrings and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                    assert doc.end_lineno is not None
                    del lines[doc.lineno - node.lineno : doc.end_lineno - node.lineno + 1]
                out[node.name] = re.sub(r"\s+# (noqa|fmt: skip)[^\n]*", "", "\n".join(lines))
    return out


def _f(case: Case, *, compact: bool = False, plain: bool = False) -> list[str]:
    """``f``, the function of the inputs the transforms see; ``compact`` (published repros): the bare
    ``Fn.apply`` where that is all it is; ``plain``: calling the plain ``forward`` instead (NOTE [plain
    forward])."""
    if plain:
        return [line.replace(f"{CLASS_NAME}.apply", "forward") for line in _f(case, compact=compact)]
    fn = case.function
    xs = ", ".join(f"x{i}" for i in range(fn.n_inputs))
    os_ = [f"o{j}" if j in case.f.uses or j in case.f.inplace else "_" for j in range(len(fn.outputs))]
    os_ += ["n"] if fn.non_tensor_output else []
    lhs = os_[0] if len(os_) == 1 else ", ".join(os_)
    passed = case.f.apply_args or tuple(range(fn.n_inputs))  # NOTE [aliased inputs]
    tensors = [f"x{i}.clone()" if i in fn.dirty else f"x{i}" for i in passed]
    apply_args = ", ".join(tensors + [repr(float(v)) for v in fn.scalars])
    inplace = [f"o{j}.mul_(2)" for j in case.f.inplace]
    if inplace and case.f.inplace_no_grad:
        inplace = ["with torch.no_grad():", *[f"    {line}" for line in inplace]]
    used = [f"o{j}" for j in case.f.uses]
    if case.f.combine == "sum":
        ret = " + ".join(f"{o}.sum()" for o in used)
    else:
        ret = " + ".join(used)
    if fn.non_tensor_output:
        ret = f"({ret}) * n" if " " in ret else f"{ret} * n"
    n_out = len(fn.outputs)
    if compact and not inplace and not fn.non_tensor_output and case.f.uses == (0,) and n_out == 1:
        if case.f.combine != "sum" and not fn.dirty and not fn.scalars and not case.f.apply_args:
            return [f"f = {CLASS_NAME}.apply"]
    if not inplace and not fn.non_tensor_output and len(used) == 1:
        call = f"{CLASS_NAME}.apply({apply_args})" + (f"[{case.f.uses[0]}]" if n_out > 1 else "")
        return [f"def f({xs}):", f"    return {call}.sum()" if case.f.combine == "sum" else f"    return {call}"]
    return [
        f"def f({xs}):",
        f"    {lhs} = {CLASS_NAME}.apply({apply_args})",
        *[f"    {line}" for line in inplace],
        f"    return {ret}",
    ]


def nested(values: list[float], shape: tuple[int, ...]) -> str:
    if not shape:
        return repr(float(values[0]))
    step = len(values) // shape[0]
    return "[" + ", ".join(nested(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def tensor_expr(values: list[float], shape: tuple[int, ...], dtype: str, extra: str = "") -> str:
    """The expression of one input tensor: ``torch.tensor([...])``, or ``torch.ones``/``torch.zeros``/
    ``torch.full`` where every element has one same finite value (the same tensor: contiguous, its
    dtype; a maintainer reads ``torch.ones(3, 3)`` at a glance). ``extra``: more keyword arguments."""
    dt = f"dtype=torch.{dtype}{extra}"
    v = float(values[0]) if values else 0.0
    if not shape or len(set(map(float, values))) != 1 or not math.isfinite(v) or len(values) < 2:
        return f"torch.tensor({nested(list(values), shape)}, {dt})"
    dims = ", ".join(map(str, shape))
    if v == 1.0:
        return f"torch.ones({dims}, {dt})"
    if v == 0.0 and math.copysign(1.0, v) > 0:
        return f"torch.zeros({dims}, {dt})"
    return f"torch.full(({dims}{',' if len(shape) == 1 else ''}), {v!r}, {dt})"


def _input_exprs(case: Case, extra: str = "") -> list[str]:
    return [
        tensor_expr(list(v), shape, case.inputs.dtype, extra)
        for v, shape in zip(case.inputs.values, input_shapes(case), strict=True)
    ]


def _outcome(case: Case) -> list[str]:
    """``outcome()`` of the published styles (NOTE [repro styles]): repro_lib's ``outcome`` with the
    inputs written into it, fresh on every call."""
    ts = _input_exprs(case, ", requires_grad=requires_grad")
    call = f"mode({ts[0]})" if len(ts) == 1 else "mode(\n" + "".join(f"            {t},\n" for t in ts) + "        )"
    return [
        "def outcome(mode, requires_grad):  # one side on fresh inputs: what it returns, or the exception it raises",
        "    try:",
        f"        return {call}",
        "    except Exception as e:",
        "        return e",
    ]


def _inputs(case: Case, *, requires_grad: bool = False) -> list[str]:
    """``inputs()``, the tuple of fresh inputs; ``requires_grad`` (published repros of a Function of several
    inputs): ``inputs(requires_grad=False)``, fresh for each side."""
    if requires_grad:
        head, ts = (
            "def inputs(requires_grad=False):  # fresh for each side",
            _input_exprs(case, ", requires_grad=requires_grad"),
        )
    else:
        head, ts = "def inputs():", _input_exprs(case)
    if len(ts) == 1:
        return [head, f"    return ({ts[0]},)"]
    return [head, "    return (", *[f"        {t}," for t in ts], "    )"]


#: functorch-mode spelling of each level (None: the name itself, from torch.func).
_FUNCTORCH_NAMES = {"jvp": "jvp_ones", "vjp": "vjp_ones", "linearize": "linearize_ones"}
#: create_graph-mode twin of each level (NOTE [mode equivalence] in fuzzer/codegen/repro_lib.py).
_TWINS = {
    "grad": "autograd_grad",
    "vjp": "autograd_grad",
    "jacrev": "jacrev_loop",
    "hessian": "jacrev_loop",
    "jacfwd": "jacfwd_dual",
    "jvp": "jvp_dual",
    "linearize": "jvp_dual",
    "vmap": "vmap_loop",
    "autograd_grad": "autograd_grad",
}
#: finite-difference twin of each level, for triage (fuzzer/codegen/repro_fd.py).
_FD_TWINS = {
    "grad": "fd_grad",
    "vjp": "fd_vjp",
    "autograd_grad": "fd_vjp",
    "jacrev": "fd_jac",
    "jacfwd": "fd_jac",
    "hessian": "fd_hessian",
    "jvp": "fd_jvp",
    "linearize": "fd_jvp",
    "vmap": "vmap_loop",
}
_TORCH_FUNC = ("grad", "vmap", "jacrev", "jacfwd", "hessian")
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
)


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
            name = _FD_TWINS[t.name]
            expr = f"{name}({expr}{arg})"
        elif mode in ("functorch", "functorch_loop") or t.name == "autograd_grad":
            name = _FUNCTORCH_NAMES.get(t.name, t.name)
            if name == "autograd_grad" and isinstance(t.argnums, tuple):
                name = "autograd_grads"
            expr = f"{name}({expr}{arg})"
        elif sc and t.name in ("jacrev", "hessian", "jacfwd"):  # NOTE [scalar levels]
            name = "jvp_dual" if t.name == "jacfwd" else "autograd_grad"
            cg = "" if t.name == "jacfwd" else ", create_graph=True"
            for _ in range(2 if t.name == "hessian" else 1):
                expr = f"{name}({expr}{arg}{cg})"
        else:
            name = _TWINS[t.name]
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


def _reference_side(case: Case, oracle: str) -> tuple[str, set[str]]:
    """Side B's composed call expression under ``oracle`` (NOTE [oracles]) and the names it uses."""
    if oracle == MAIN:
        return compose(case, "create_graph")
    if oracle == "vmap_vs_loop":
        return compose(case, "functorch_loop")
    if oracle == COMPILED:
        return compiled_side(case)
    return compose(reference_case(case, oracle), "functorch")


def compile_call(expr: str, c: Compile) -> str:
    """``torch.compile`` of ``expr`` as the case's ``compile`` asks (NOTE [compiled mode]); the backend in
    single quotes, so the expression can stand inside a double-quoted f-string of a repro."""
    return f"torch.compile({expr}, backend='{c.backend}', fullgraph={c.fullgraph})"


def eager_mode(case: Case) -> str:
    """The mode of ``compiled_vs_eager``'s side A: 'create_graph' where torch.compile goes around ``f``
    under plain autograd (placement ``plain``), else 'functorch' (NOTE [compiled mode])."""
    return "create_graph" if case.compile is not None and case.compile.placement == "plain" else "functorch"


def compiled_side(case: Case) -> tuple[str, set[str]]:
    """The compiled side of ``compiled_vs_eager``: the eager side's expression with torch.compile placed
    as ``case.compile`` says (NOTE [compiled mode]); an outer plain autograd level stays outside a
    compile placed ``around`` the torch.func stack."""
    c = case.compile
    if c is None:
        raise ValueError(f"{COMPILED} needs a case with a compile")
    return compiled_stack(case.transforms, needs_sum(case), case.function.n_inputs, c)


def compiled_stack(stack: tuple[Transform, ...], sums: list[bool], n: int, c: Compile) -> tuple[str, set[str]]:
    """:func:`compiled_side` of a bare stack over ``f``, a function of ``n`` inputs."""
    if c.placement in ("plain", "inside"):
        mode = "create_graph" if c.placement == "plain" else "functorch"
        return compose_stack(stack, sums, n, mode, inner=compile_call("f", c))
    outer = 1 if stack[0].name == "autograd_grad" else 0
    inner, names = compose_stack(stack[outer:], sums[outer:], n, "functorch")
    compiled = compile_call(inner, c)
    if not outer:
        return compiled, names
    expr, more = compose_stack(stack[:outer], sums[:outer], n, "functorch", inner=compiled)
    return expr, names | more


def render(
    case: Case,
    *,
    header: tuple[str, ...] | list[str] = (),
    oracle: str = MAIN,
    style: str = "full",
    also: tuple[str, ...] = (),
    expect: Expect | None = None,
) -> str:
    """The standalone script for ``case`` under ``oracle`` (NOTE [oracles]). ``header`` lines become
    leading ``#`` comments.

    NOTE [repro styles]
    One template, three ways to end it. ``full`` is what the fuzzer executes (NOTE [the repro is what
    runs]): it also times both sides (NOTE [slow findings]) and carries the finite-difference triage.
    ``repro`` is the published ``repro.py``, for a maintainer to paste: the Function, ``f``, the inputs,
    the twins the stack needs in their shortest form, then the two sides, each named by what it runs
    (``torch.func.grad(f)``, ``autograd_grad(f, create_graph=True)``), exit 1 while they disagree and 0
    once they agree. With ``expect`` (:class:`Expect`: which side raises) the ending is a few lines: both
    results printed and ``torch.testing.assert_close``, or the working side printed and the failing side
    run uncaught, so its traceback shows the error and the torch frame that raised it. Without it (a
    structure mismatch, a slow case, a crash, a hang), the ending is the generic comparison that prints
    ``verdict: ...``. ``pytest`` is ``test_repro.py``: the same body as a test, to be marked ``xfail``
    upstream. A published repro is accepted only after it reproduced in a fresh process
    (:mod:`fuzzer.publish.verify`).

    NOTE [one exec per case]
    ``also`` (``full`` only) adds side B of more oracles of the same case: a ``<side>_mode`` for each and
    ``ORACLE_SIDES``, oracle -> (name, mode, requires_grad), so the fuzzer defines the Function once and
    runs side A, which every oracle shares, once: ``check(ORACLE_SIDES[o], (a,))`` is exactly what the
    script rendered for ``o`` alone computes with ``check()``. A finding is still published and
    verified as the script of its one oracle.
    """
    if style not in SCRIPT_STYLES:
        raise ValueError(f"style must be one of {SCRIPT_STYLES}, not {style!r}")
    if also and style != "full":
        raise ValueError("also= is for the full style only")
    if expect is not None and style == "full":
        raise ValueError("expect= is for the published styles only")
    if oracle == COMPILED and also:
        raise ValueError(f"{COMPILED} comes last in also=, never first (its side A may not be the shared one)")
    full = style == "full"
    fn = case.function
    base = tuple(case.inputs.shape)
    output_shapes(fn, base)  # raises CaseError early on ill-formed views
    fc_expr, fc_names = compose(case, "functorch")
    # NOTE [compiled mode]: the compiled oracle's side A is the eager side it compiles
    a_mode = eager_mode(case) if oracle == COMPILED else "functorch"
    if a_mode != "functorch":
        fc_expr, fc_names = compose(case, a_mode)
    reference_mode = REFERENCE_MODES[oracle]
    cg_expr, cg_names = _reference_side(case, oracle)
    if (
        expect is not None
        and expect.straight
        and oracle == MAIN
        and not any(isinstance(t.argnums, tuple) for t in case.transforms)
    ):
        cg_expr, cg_names = compose_stack(  # NOTE [scalar levels]
            case.transforms, needs_sum(case), fn.n_inputs, "create_graph", scalar=scalar_levels(case)
        )
    extra = [(o, *_reference_side(case, o)) for o in also if o != oracle]
    for _, _, names in extra:
        cg_names = cg_names | names
    # finite-difference twins take one argnum; tuple argnums (outermost only) go without triage
    exact = derivatives_exact(case) and not any(isinstance(t.argnums, tuple) for t in case.transforms)
    fd_expr, fd_names = compose(case, "fd") if exact and full else ("", set())
    if fd_names & {"fd_hessian", "fd_grad", "fd_vjp"}:
        fd_names.add("fd_jac")
    fc_expr, cg_expr = qualified(fc_expr), qualified(cg_expr)
    used = fc_names | cg_names | fd_names
    if expect is not None and expect.other is not None:
        used = fc_names if expect.last == 0 else cg_names
    helpers = [n for n in HELPER_ORDER if n in used]
    short = expect is not None and not any(isinstance(t.argnums, tuple) for t in case.transforms)
    if short:  # NOTE [repro styles]: the twins' shortest forms need none of the argnums plumbing
        helpers = [h for h in helpers if h not in ("_nums", "_replace_arg", "_result")]
    xs = ", ".join(f"x{i}" for i in range(fn.n_inputs))
    lib = lib_sources(docstrings=full)
    if short:
        lib = {**lib, **short_sources("_short")}
        if fn.n_inputs == 1:
            lib = {**lib, **short_sources("_1")}
        elif all(t.name == "vmap" or t.argnums == 0 for t in case.transforms):
            lib = {**lib, **short_sources("_0")}
    functorch_grad = any(t.name == "autograd_grad" for t in case.transforms)
    fc_grad = functorch_grad or a_mode == "create_graph"  # side A's inputs require grad
    a_label = "functorch" if a_mode == "functorch" else a_mode
    out: list[str] = [f"# {h}" if h else "#" for h in header]
    if full:
        out += ["import re", "import sys", "import time", "", "import torch"]
    else:
        out += ["import torch"] if expect is not None else ["import re", "", "import torch"]
    plain = render_plain_forward(fn) if expect is not None and expect.plain else None
    if expect is not None and expect.plain and plain is None:
        raise ValueError("Expect.plain needs a Function whose forward does not take ctx")
    if fn.once_differentiable and plain is None:
        out.append("from torch.autograd.function import once_differentiable")
    out += ["", ""]
    if plain is None:
        out += render_function(fn, base, case.inputs.dtype, compact=expect is not None)
        out += ["", ""]
        out += _f(case, compact=expect is not None)
    else:  # NOTE [plain forward]
        f_lines = _f(case, compact=True, plain=True)
        if f_lines == ["f = forward"]:
            out += [plain[0].replace("def forward(", "def f(", 1), *plain[1:]]
        else:
            out += [*plain, "", "", *f_lines]
    if full:
        out += ["", ""]
        out += _inputs(case)
    if full or expect is None:  # a compact ending chooses its helpers with the sides' forms
        for h in helpers:
            out += ["", "", lib[h]]
    grad_b_main = True if oracle == MAIN else fc_grad
    if not full and expect is not None:
        run = (True, True) if expect.other is None else (expect.last == 0, expect.last == 1)
        call_a, call_b, defs = _side_forms(
            fc_expr, cg_expr, run, lib, straight=expect.straight and short, n_inputs=fn.n_inputs
        )
        names = {h for h, on in zip((call_a, call_b), run, strict=True) if on for h in _helpers_in(h, defs, lib)}
        for h in (h for h in HELPER_ORDER if h in names):
            out += ["", "", lib[h]]
        for d in defs.values():
            out += ["", "", *d]
        sides = ((fc_expr, call_a, fc_grad), (cg_expr, call_b, grad_b_main))
        return "\n".join(out + _compact_tail(case, expect, style, *sides, compiled=oracle == COMPILED))
    out += ["", "", ERRORS_LINE]
    if not full:
        out += ["", "", *_outcome(case)]
        for name in _VERDICT:
            out += ["", "", lib[name]]
        grad_b = grad_b_main
        sides = [
            f"{a_label} = outcome({fc_expr}, {fc_grad})",
            f"{reference_mode} = outcome({cg_expr}, {grad_b})",
            f"v = verdict({a_label}, {reference_mode})",
        ]
        if style == "repro":
            out += ["", "", *sides]
            out.append(
                f'print(f"============= {a_label}\\n{{{a_label}!r}}\\n============= {reference_mode}\\n{{{reference_mode}!r}}\\nverdict: {{v}}")'
            )
            out += [
                'raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree',
                "",
            ]
        else:
            out += ["", "", f"def test_{a_label}_agrees_with_{reference_mode}():", *[f"    {line}" for line in sides]]
            out += [
                f'    assert v == "consistent", f"{{v}}: {a_label} gave {{{a_label}!r}}, {reference_mode} gave {{{reference_mode}!r}}"',
                "",
            ]
        return "\n".join(out)
    out += ["", "", f"FUNCTORCH_REQUIRES_GRAD = {functorch_grad}"]
    out += ["", "", f"def {a_label}_mode({xs}):", f"    return {fc_expr}({xs})"]
    out += ["", "", f"def {reference_mode}_mode({xs}):", f"    return {cg_expr}({xs})"]
    a_grad_text = "True" if a_mode == "create_graph" else "FUNCTORCH_REQUIRES_GRAD"
    # side B's inputs require grad as side A's do; the create_graph side's always
    grad_b_text = "True" if oracle == MAIN else a_grad_text
    defined = {a_label, reference_mode}
    for o, expr, _ in extra:  # NOTE [one exec per case]
        out += ["", "", f"def {REFERENCE_MODES[o]}_mode({xs}):", f"    return {qualified(expr)}({xs})"]
        defined.add(REFERENCE_MODES[o])
    # NOTE [compiled mode]: an oracle whose side A is not the shared one (the compiled oracle's eager
    # side is the create_graph side where torch.compile goes around f under plain autograd)
    own_a = [o for o, _, _ in extra if o == COMPILED and eager_mode(case) == "create_graph"]
    if own_a and "create_graph" not in defined:
        cg_only, _ = compose(case, "create_graph")
        out += ["", "", f"def create_graph_mode({xs}):", f"    return {qualified(cg_only)}({xs})"]
    if extra:
        out += ["", "", "ORACLE_SIDES = {"]
        out += [f'    "{oracle}": ("{reference_mode}", {reference_mode}_mode, {grad_b_text}),']
        for o, _, _ in extra:
            grad = "True" if o == MAIN or o in own_a else "FUNCTORCH_REQUIRES_GRAD"
            out += [f'    "{o}": ("{REFERENCE_MODES[o]}", {REFERENCE_MODES[o]}_mode, {grad}),']
        out += ["}"]
    if own_a:
        out += ["ORACLE_A = {  # oracle -> its own side A, where it is not SIDES[0]"]
        out += [f'    "{o}": ("create_graph", create_graph_mode, True),' for o in own_a]
        out += ["}"]
    out += [
        "",
        "",
        "SIDES = (",
        f'    ("{a_label}", {a_label}_mode, {a_grad_text}),',
        f'    ("{reference_mode}", {reference_mode}_mode, {grad_b_text}),',
        ")",
        "SECONDS = {}  # mode name -> seconds its last run took",
        f"SLOW_RATIO, SLOW_SECONDS = {SLOW_RATIO}, {SLOW_SECONDS}  # one side this much slower (and > SLOW_SECONDS): 'slow'",
    ]
    if exact:
        out += ["", "", f"def fd_mode({xs}):", f"    return {fd_expr}({xs})"]
    else:
        out += ["", "", "fd_mode = None  # derivative rules deliberately not exact: no finite-difference triage"]
    for name in _VERDICT + _RUNTIME:
        out += ["", "", lib[name]]
    out += ["", "", 'if __name__ == "__main__":', "    sys.exit(main())", ""]
    return "\n".join(out)


#: What a promise repro's assertion says (NOTE [promises]); verification looks for it.
PROMISE_MESSAGE = "one side raises the error torch promises for this Function, the other returns a value"

#: Characters of input expressions a published repro writes into each side's call (else ``inputs()``).
_INLINE_INPUTS = 160


def _compact_tail(
    case: Case,
    expect: Expect,
    style: str,
    side_a: tuple[str, str, bool],
    side_b: tuple[str, str, bool],
    *,
    compiled: bool = False,
) -> list[str]:
    """NOTE [repro styles]: the two sides and their comparison in a few lines.

    NOTE [repro exit status]
    A published repro exits 1 while its finding is there and 0 once it is gone, either way. A value
    finding runs both sides through ``outcome`` (a result, or the error raised) and prints both: two
    errors of the same type and message are agreement (exit 0: the seed's repro on torch >= 2.1, where both
    modes raise the documented error for an input returned as-is and saved), otherwise
    ``torch.testing.assert_close`` decides. An error finding runs only the side whose error names its
    bucket (NOTE [the repro shows the bucket] in :mod:`fuzzer.publish.findings`), uncaught:
    exit 1 with that traceback while it raises, 0 once it returns. ``compiled`` (side B is torch.compile of
    side A, NOTE [compiled mode]): ``assert_close(b, a)``, so the failure message calls eager's value
    "Expected" and the compiled one "Actual"."""
    # the inputs written into each call (fresh for each side) where they fit on its line, else inputs()
    inline = sum(len(x) + 2 for x in _input_exprs(case, ", requires_grad=True")) <= _INLINE_INPUTS
    sides = []
    for (label, expr, grad), raises in zip((side_a, side_b), (expect.a_raises, expect.b_raises), strict=True):
        if inline:
            xs = ", ".join(_input_exprs(case, ", requires_grad=True" if grad else ""))
            sides.append((label, f"{expr}({xs})", raises))
        else:
            sides.append((label, f"{expr}(*inputs({'True' if grad else ''}))", raises))
    first, last = (sides[1], sides[0]) if expect.last == 0 else (sides[0], sides[1])
    body: list[str] = []
    defs: list[str] = []
    if expect.promise or (not expect.a_raises and not expect.b_raises):
        # NOTE [repro exit status]: both sides raising one same error is agreement too (exit 0)
        defs = [  # the idiom in three lines: a repro is read, not linted
            "def outcome(side, *xs):  # what a side returns, or the error it raises",
            "    try: return side(*xs)",
            "    except Exception as e: return e",
        ]
        body += [
            f"a = outcome({_call_args(sides[0][1])})",
            f"b = outcome({_call_args(sides[1][1])})",
            f'print(f"{sides[0][0]}:\\n{{a!r}}\\n{sides[1][0]}:\\n{{b!r}}")',
            "if not (isinstance(a, Exception) and repr(a) == repr(b)):  # one same error on both sides: they agree",
            "    torch.testing.assert_close(b, a)  # compiled vs eager: fails (exit 1) while the two disagree"
            if compiled
            else "    torch.testing.assert_close(a, b)  # fails (exit 1) while the two disagree",
        ]
        if expect.promise:  # NOTE [promises]: a value where the other side raises the promised error
            body[-1:-1] = [f"    assert isinstance(a, Exception) == isinstance(b, Exception), {PROMISE_MESSAGE!r}"]
    else:
        if not last[2]:
            raise ValueError("Expect.last must name a side that raises")
        if expect.other is not None:
            said = " ".join(expect.other.split())
            said = said if len(said) <= 100 else said[:97] + "..."
            body += [f"# {first[0]} {'raises' if first[2] else 'returns'} {said}"]
        elif first[2]:
            body += ["try:", f"    {first[1]}", "except Exception as e:", f'    print("{first[0]} raised", repr(e))']
        else:
            body += [f'print("{first[0]}:", {first[1]})']
        body += [f"{last[1]}  # raises (exit 1) while the bug is there"]
    head = [] if inline else ["", "", *_inputs(case, requires_grad=True)]
    if defs:
        head += ["", "", *defs]
    if style == "pytest":
        name = "test_torch_func_agrees_with_plain_autograd"
        return [*head, "", "", f"def {name}():", *[f"    {line}" for line in body], ""]
    return [*head, "", "", *body, ""]


#: Levels a published repro can write as straight-line code (NOTE [straight-line sides]).
_STRAIGHT = ("autograd_grad", "summed", "jvp_dual")
_FWD = "torch.autograd.forward_ad"


def _loop_core(node: ast.expr, args: list[str]) -> str | None:
    """``vmap_loop(g, in_dims=..., out_dims=...)`` around a plain name ``g``, called on ``args``, as one
    expression: the loop over the batch (``unbind`` is ``select`` at every index) stacked; None for any
    other core."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "vmap_loop"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
    ):
        return None
    kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    if set(kw) - {"in_dims", "out_dims"}:
        return None
    dims = kw.get("in_dims", 0)
    dims = dims if isinstance(dims, tuple) else (dims,) * len(args)
    batched = [(a, d) for a, d in zip(args, dims, strict=True) if d is not None]
    if not batched:
        return None
    names = [f"{a}i" for a, _ in batched]
    call = ", ".join(f"{a}i" if d is not None else a for a, d in zip(args, dims, strict=True))
    unbinds = [f"{a}.unbind({d})" for a, d in batched]
    loop = f"{names[0]} in {unbinds[0]}" if len(batched) == 1 else f"{', '.join(names)} in zip({', '.join(unbinds)})"
    out_dims = kw.get("out_dims", 0)
    return f"torch.stack([{node.args[0].id}({call}) for {loop}]{f', dim={out_dims}' if out_dims else ''})"


def _straight_line(expr: str, name: str, n_inputs: int = 1) -> list[str] | None:
    """A side of a published repro as a straight-line ``def``.

    NOTE [straight-line sides]
    A published repro writes a side whose outer levels are plain autograd (``autograd_grad``, ``summed``,
    at most one ``jvp_dual``, each in the first input) as straight-line code, the way a maintainer writes
    it: ``y = f(x)``, then one ``torch.autograd.grad`` (or ``forward_ad`` block) per level, instead of the
    composed twins. The innermost rest (``torch.func.grad(f)``, a loop twin) stays one call, except a
    ``vmap_loop`` around ``f``, which is written as the loop itself (``torch.stack([f(xi) for xi in
    x.unbind(1)])``). It is the twins' computation where every gradient and tangent exists (the twins
    return zeros where nothing reaches the input); elsewhere the script raises, verification sees it does
    not reproduce, and the repro is rendered again with the composed twins (``Expect.straight=False``).
    Chosen only where it makes the script shorter. Returns the ``def`` lines, or None when no level can be
    written so."""
    node = parse(expr, mode="eval").body
    levels: list[tuple[str, bool]] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _STRAIGHT:
        kw = {k.arg: k.value for k in node.keywords}
        if len(node.args) != 1 or set(kw) - {"create_graph"}:
            break
        if node.func.id == "jvp_dual" and any(n == "jvp_dual" for n, _ in levels):
            break
        cg = isinstance(kw.get("create_graph"), ast.Constant) and kw["create_graph"].value is True
        levels.append((node.func.id, cg))
        node = node.args[0]
    params = ["x"] if n_inputs == 1 else [f"x{i}" for i in range(n_inputs)]
    x = params[0]
    loop = _loop_core(node, [x, *params[1:]])
    if not levels and loop is None:
        return None
    core = ast.unparse(node)
    body: list[str] = []
    depth = 1
    for level, _ in levels:
        if level == "jvp_dual":
            body += [f"{'    ' * depth}with {_FWD}.dual_level():"]
            depth += 1
            body += [f"{'    ' * depth}xd = {_FWD}.make_dual({x}, torch.ones_like({x}))"]
            x = "xd"
    args = [x, *params[1:]]
    call = _loop_core(node, args) or f"{core}({', '.join(args)})"
    body += [f"{'    ' * depth}y = {call}"]
    for level, cg in reversed(levels):
        pad = "    " * depth
        if level == "summed":
            body += [f"{pad}y = y.sum()"]
        elif level == "autograd_grad":
            flag = ", create_graph=True" if cg else ""
            body += [f"{pad}y = torch.autograd.grad(y, {x}, torch.ones_like(y){flag})[0]"]
        else:
            body += [f"{pad}y = {_FWD}.unpack_dual(y).tangent"]
            depth -= 1
            x = params[0]
    if depth == 1:  # the last assignment is the result
        body[-1] = body[-1].replace("y = ", "return ", 1)
    else:
        body += ["    return y"]
    return [f"def {name}({', '.join(params)}):  # {expr}", *body]


def _helpers_in(expr: str, defs: dict[str, list[str]], lib: dict[str, str]) -> set[str]:
    """The repro_lib helpers ``expr`` calls (through a straight-line side's ``def``, if it is one), and those
    they call in turn (``vjp_ones`` calls ``_nums``, ``_replace_arg`` and ``_result``: a compact repro that
    left them out raised the same NameError on both sides, which reads as agreement)."""
    text = "\n".join(defs[expr][1:]) if expr in defs else expr  # its first line names the twins in a comment
    todo = [h for h in HELPER_ORDER if re.search(rf"\b{h}\(", text)]
    out = set(todo)
    while todo:
        source = lib[todo.pop()]
        for h in HELPER_ORDER:
            if h not in out and re.search(rf"\b{h}\(", source):
                out.add(h)
                todo.append(h)
    return out


def _side_forms(
    fc_expr: str, cg_expr: str, run: tuple[bool, bool], lib: dict[str, str], *, straight: bool, n_inputs: int
) -> tuple[str, str, dict[str, list[str]]]:
    """Each side of a published repro as the callable its call runs (the composed expression, or the
    name of its straight-line ``def``, NOTE [straight-line sides]), and those ``def``s: of the forms
    the shortest script."""
    forms: list[list[tuple[str, list[str] | None]]] = []
    for expr, on, name in zip((fc_expr, cg_expr), run, ("torch_func", "plain_autograd"), strict=True):
        options: list[tuple[str, list[str] | None]] = [(expr, None)]
        lines = _straight_line(expr, name, n_inputs) if (straight and on) else None
        if lines is not None:
            options.append((name, lines))
        forms.append(options)
    best: tuple[int, str, str, dict[str, list[str]]] | None = None
    for a, da in forms[0]:
        for b, db in forms[1]:
            defs = {k: v for k, v in ((a, da), (b, db)) if v is not None}
            used = {h for e, on in zip((a, b), run, strict=True) if on for h in _helpers_in(e, defs, lib)}
            size = sum(lib[h].count("\n") + 1 for h in used) + sum(len(v) for v in defs.values())
            if best is None or size < best[0]:
                best = (size, a, b, defs)
    assert best is not None
    return best[1], best[2], best[3]


def _call_args(call: str) -> str:
    """``expr(args)`` as ``expr, args`` (the arguments of ``outcome``); the call is rendered by
    :func:`_compact_tail`, its expression never ends in a parenthesis of its own arguments."""
    depth = 0
    for i in range(len(call) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(call[i], 0)
        if depth == 0:
            return f"{call[:i]}, {call[i + 1 : -1]}"
    raise ValueError(f"not a call: {call}")


@functools.cache
def short_sources(suffix: str) -> dict[str, str]:
    """The shortest forms of the twins for published repros (NOTE [repro styles]): the ``*_short``
    functions of repro_lib.py (an int ``argnums``), the ``*_1`` ones (a Function of one input) or the
    ``*_0`` ones (several inputs, every level in the first), under the twin's own name."""
    short = {}
    for name, text in lib_sources(docstrings=False).items():
        if name.endswith(suffix):
            twin = name.removesuffix(suffix)
            short[twin] = text.replace(f"def {name}(", f"def {twin}(", 1)
    return short
