"""Render a case into one standalone script (imports torch only). Torch-free.

One template for every case (:func:`render`): the Function (from :mod:`fuzzer.codegen.function`), ``f``,
the inputs, the helpers the stack needs (copied from :mod:`fuzzer.codegen.repro_lib`), both sides side by
side, then the comparison. Three ways to end it (NOTE [repro styles]): the ``full`` script the fuzzer
executes (see NOTE [the repro is what runs] in :mod:`fuzzer.judge.execute`), the published ``repro.py`` in
the seed's style, and ``test_repro.py``. Each prints or asserts both results and fails (exit 1) while the
two sides disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir.case import Case
from ..ir.custom_op import function_twin
from ..ir.features import derivatives_exact
from ..ir.oracles import COMPILED, CUSTOM_OP_ORACLES, MAIN, OPCHECK, REFERENCE_MODES, side_a_mode
from ..ir.shapes import needs_sum, output_shapes
from .compose import (
    HELPER_ORDER,
    compose,
    compose_stack,
    qualified,
    reference_side,
    scalar_levels,
)
from .function import CLASS_NAME, OP_NAME, render_custom_op, render_function, render_plain_forward
from .parts import Expect, input_exprs, input_lines, lib_sources
from .short_forms import compact_tail, helpers_in, short_sources, side_forms

_RUNTIME = ("outcome", "finite_forward", "run", "too_slow", "check", "triage", "main")
#: The comparison, in every style.
_VERDICT = ("message_key", "error_key", "torch_bug", "layout", "identical", "verdict")
#: The verdict of a pair where at least one side raised, by (functorch raised, other side raised).
ERRORS_LINE = (
    'ERRORS = {(True, True): "different_errors", (True, False): "error_functorch_only", '
    '(False, True): "error_reference_only"}'
)
SCRIPT_STYLES = ("full", "repro", "pytest")


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


def _f(case: Case, *, compact: bool = False, plain: bool = False, call: str = "", name: str = "f") -> list[str]:
    """``f``, the function of the inputs the transforms see; ``compact`` (published repros): the bare
    ``Fn.apply`` where that is all it is; ``plain``: calling the plain ``forward`` instead (NOTE [plain
    forward]); ``call``: calling that instead of ``Fn.apply`` (the custom op); ``name``: the function's name."""
    if plain or call or name != "f":
        lines = _f(case, compact=compact)
        lines = [
            line.replace(f"{CLASS_NAME}.apply", "forward" if plain else call or f"{CLASS_NAME}.apply") for line in lines
        ]
        return [re.sub(r"^(def )?f\b", rf"\g<1>{name}", lines[0]), *lines[1:]]
    fn = case.function
    xs = ", ".join(f"x{i}" for i in range(fn.n_inputs))
    os_ = [f"o{j}" if j in case.f.uses or j in case.f.inplace else "_" for j in range(len(fn.outputs))]
    os_ += ["n"] if fn.non_tensor_output else []
    lhs = os_[0] if len(os_) == 1 else ", ".join(os_)
    apply_args = _apply_args(case)
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


def _apply_args(case: Case) -> str:
    """What ``f`` passes to ``Fn.apply`` (or the custom op): its tensors, then the Python floats."""
    fn = case.function
    passed = case.f.apply_args or tuple(range(fn.n_inputs))  # NOTE [aliased inputs]
    tensors = [f"x{i}.clone()" if i in fn.dirty else f"x{i}" for i in passed]
    return ", ".join(tensors + [repr(float(v)) for v in fn.scalars])


def _op_args(case: Case) -> list[str]:
    """NOTE [custom op mode]: ``op_args``, the arguments ``f`` gives the custom op (what opcheck checks)."""
    xs = ", ".join(f"x{i}" for i in range(case.function.n_inputs))
    args = _apply_args(case)
    return [f"def op_args({xs}):  # what f passes to the op", f"    return ({args}{',' if ', ' not in args else ''})"]


def _outcome(case: Case) -> list[str]:
    """``outcome()`` of the published styles (NOTE [repro styles]): repro_lib's ``outcome`` with the
    inputs written into it, fresh on every call."""
    ts = input_exprs(case, ", requires_grad=requires_grad")
    call = f"mode({ts[0]})" if len(ts) == 1 else "mode(\n" + "".join(f"            {t},\n" for t in ts) + "        )"
    return [
        "def outcome(mode, requires_grad):  # one side on fresh inputs: what it returns, or the exception it raises",
        "    try:",
        f"        return {call}",
        "    except Exception as e:",
        "        return e",
    ]


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
    if also and side_a_mode(case, oracle) != "functorch":
        raise ValueError(
            f"{oracle} comes after the main oracle in also=, never first (its side A is not the shared one)"
        )
    plan = _plan(case, oracle, style, also, expect)
    out = _head(plan, header)
    if style != "full" and expect is not None:
        return "\n".join(out + _compact_ending(plan))
    out += ["", "", ERRORS_LINE]
    if style != "full":
        return "\n".join(out + _generic_ending(plan))
    return "\n".join(out + _full_ending(plan))


@dataclass(frozen=True)
class _Plan:
    """What a script of a case under an oracle is made of (NOTE [repro styles]): its sides' expressions and
    the helpers they use, before any line is written."""

    case: Case
    oracle: str
    style: str
    expect: Expect | None
    a_mode: str  # side A's mode: 'functorch', or the side a mode wraps
    a_label: str  # side A's name in the script
    a_expr: str
    a_names: set[str]
    reference_mode: str  # side B's name in the script
    b_expr: str
    b_names: set[str]
    extra: list[tuple[str, str, set[str]]]  # NOTE [one exec per case]: (oracle, side B, names) of ``also``
    exact: bool  # finite-difference triage possible
    fd_expr: str
    helpers: list[str]  # in HELPER_ORDER
    lib: dict[str, str]  # helper sources, the short forms where the style allows them
    short: bool
    a_grad: bool  # side A's inputs require grad
    functorch_grad: bool  # the stack has an outer plain autograd level
    twin: bool = False  # NOTE [custom op mode]: the script also defines the op's autograd.Function twin

    @property
    def full(self) -> bool:
        return self.style == "full"

    @property
    def xs(self) -> str:
        return ", ".join(f"x{i}" for i in range(self.case.function.n_inputs))

    @property
    def grad_b(self) -> bool:  # side B's inputs require grad as side A's do; the create_graph side's always
        return True if self.oracle == MAIN else self.a_grad


def _plan(case: Case, oracle: str, style: str, also: tuple[str, ...], expect: Expect | None) -> _Plan:
    full = style == "full"
    fn = case.function
    output_shapes(fn, tuple(case.inputs.shape))  # raises CaseError early on ill-formed views
    # NOTE [compiled mode], NOTE [checkpoint mode]: a mode's side A is the side it wraps
    a_mode = side_a_mode(case, oracle)
    fc_expr, fc_names = compose(case, a_mode)
    cg_expr, cg_names = reference_side(case, oracle)
    tuple_argnums = any(isinstance(t.argnums, tuple) for t in case.transforms)
    if expect is not None and expect.straight and oracle == MAIN and not tuple_argnums:
        cg_expr, cg_names = compose_stack(  # NOTE [scalar levels]
            case.transforms, needs_sum(case), fn.n_inputs, "create_graph", scalar=scalar_levels(case)
        )
    extra = [(o, *reference_side(case, o)) for o in also if o != oracle]
    for _, _, names in extra:
        cg_names = cg_names | names
    # finite-difference twins take one argnum; tuple argnums (outermost only) go without triage
    exact = derivatives_exact(case) and not tuple_argnums
    fd_expr, fd_names = compose(case, "fd") if exact and full else ("", set())
    if fd_names & {"fd_hessian", "fd_grad", "fd_vjp"}:
        fd_names.add("fd_jac")
    used = fc_names | cg_names | fd_names
    if expect is not None and expect.other is not None:
        used = fc_names if expect.last == 0 else cg_names
    helpers = [n for n in HELPER_ORDER if n in used]
    short = expect is not None and not tuple_argnums
    if short:  # NOTE [repro styles]: the twins' shortest forms need none of the argnums plumbing
        helpers = [h for h in helpers if h not in ("_nums", "_replace_arg", "_result")]
    lib = lib_sources(docstrings=full)
    if short:
        lib = {**lib, **short_sources("_short")}
        if fn.n_inputs == 1:
            lib = {**lib, **short_sources("_1")}
        elif all(t.name == "vmap" or t.argnums == 0 for t in case.transforms):
            lib = {**lib, **short_sources("_0")}
    functorch_grad = any(t.name == "autograd_grad" for t in case.transforms)
    return _Plan(
        case=case,
        oracle=oracle,
        style=style,
        expect=expect,
        a_mode=a_mode,
        a_label="functorch" if a_mode == "functorch" else a_mode,
        a_expr=qualified(fc_expr),
        a_names=fc_names,
        reference_mode=REFERENCE_MODES[oracle],
        b_expr=qualified(cg_expr),
        b_names=cg_names,
        extra=extra,
        exact=exact,
        fd_expr=fd_expr,
        helpers=helpers,
        lib=lib,
        short=short,
        a_grad=functorch_grad or a_mode == "create_graph",
        functorch_grad=functorch_grad,
        twin=bool(set(CUSTOM_OP_ORACLES) & {oracle, *also}),
    )


def _head(plan: _Plan, header: tuple[str, ...] | list[str]) -> list[str]:
    """The header comments, imports, the Function, ``f``, the inputs (full style) and the helpers (but for
    a compact ending, which chooses its helpers with the sides' forms)."""
    case, expect, full = plan.case, plan.expect, plan.full
    fn = case.function
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
    compact = expect is not None
    if plain is None and fn.style == "custom_op":  # NOTE [custom op mode]
        out += render_custom_op(fn, tuple(case.inputs.shape), case.inputs.dtype, compact=compact)
        if plan.twin:  # the op's autograd.Function twin, and f over it
            out += [
                "",
                "",
                *render_function(function_twin(case), tuple(case.inputs.shape), case.inputs.dtype, compact=compact),
            ]
        out += ["", "", *_f(case, compact=compact, call=OP_NAME)]
        if OPCHECK in (plan.oracle, *(o for o, _, _ in plan.extra)):
            out += ["", "", *_op_args(case)]
        if plan.twin:
            out += ["", "", *_f(case, compact=compact, name="f_function")]
    elif plain is None:
        out += render_function(fn, tuple(case.inputs.shape), case.inputs.dtype, compact=compact)
        out += ["", ""]
        out += _f(case, compact=compact)
    else:  # NOTE [plain forward]
        f_lines = _f(case, compact=True, plain=True)
        if f_lines == ["f = forward"]:
            out += [plain[0].replace("def forward(", "def f(", 1), *plain[1:]]
        else:
            out += [*plain, "", "", *f_lines]
    if full:
        out += ["", ""]
        out += input_lines(case)
    if full or expect is None:
        for h in plan.helpers:
            out += ["", "", plan.lib[h]]
    return out


def _compact_ending(plan: _Plan) -> list[str]:
    """A published repro with ``expect`` (NOTE [repro styles]): the sides in their shortest forms."""
    expect, lib = plan.expect, plan.lib
    assert expect is not None
    out: list[str] = []
    run = (True, True) if expect.other is None else (expect.last == 0, expect.last == 1)
    call_a, call_b, defs = side_forms(
        plan.a_expr,
        plan.b_expr,
        run,
        lib,
        straight=expect.straight and plan.short,
        n_inputs=plan.case.function.n_inputs,
    )
    names = {h for h, on in zip((call_a, call_b), run, strict=True) if on for h in helpers_in(h, defs, lib)}
    for h in (h for h in HELPER_ORDER if h in names):
        out += ["", "", lib[h]]
    for d in defs.values():
        out += ["", "", *d]
    sides = ((plan.a_expr, call_a, plan.a_grad), (plan.b_expr, call_b, plan.grad_b))
    return out + compact_tail(plan.case, expect, plan.style, *sides, compiled=plan.oracle == COMPILED)


def _generic_ending(plan: _Plan) -> list[str]:
    """A published repro without ``expect``: both sides through ``outcome()`` and the generic verdict."""
    a_label, reference_mode = plan.a_label, plan.reference_mode
    out = ["", "", *_outcome(plan.case)]
    for name in _VERDICT:
        out += ["", "", plan.lib[name]]
    sides = [
        f"{a_label} = outcome({plan.a_expr}, {plan.a_grad})",
        f"{reference_mode} = outcome({plan.b_expr}, {plan.grad_b})",
        f"v = verdict({a_label}, {reference_mode})",
    ]
    if plan.style == "repro":
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
    return out


def _full_ending(plan: _Plan) -> list[str]:
    """The script the fuzzer executes (NOTE [the repro is what runs]): every side as a ``<mode>_mode``
    function, ``SIDES`` (and ``ORACLE_SIDES``/``ORACLE_A`` for more oracles), the runtime."""
    case, xs, a_label, reference_mode = plan.case, plan.xs, plan.a_label, plan.reference_mode
    out = ["", "", f"FUNCTORCH_REQUIRES_GRAD = {plan.functorch_grad}"]
    out += ["", "", f"def {a_label}_mode({xs}):", f"    return {plan.a_expr}({xs})"]
    out += ["", "", f"def {reference_mode}_mode({xs}):", f"    return {plan.b_expr}({xs})"]
    a_grad_text = "True" if plan.a_mode == "create_graph" else "FUNCTORCH_REQUIRES_GRAD"
    # side B's inputs require grad as side A's do; the create_graph side's always
    grad_b_text = "True" if plan.oracle == MAIN else a_grad_text
    defined = {a_label, reference_mode}
    for o, expr, _ in plan.extra:  # NOTE [one exec per case]
        out += ["", "", f"def {REFERENCE_MODES[o]}_mode({xs}):", f"    return {qualified(expr)}({xs})"]
        defined.add(REFERENCE_MODES[o])
    # an oracle whose side A is not the shared one (a mode that wraps the plain-autograd side: the compiled
    # oracle's eager side where torch.compile goes around f under plain autograd; the checkpoint oracle's)
    own_a = [o for o, _, _ in plan.extra if side_a_mode(case, o) == "create_graph"]
    if own_a and "create_graph" not in defined:
        cg_only, _ = compose(case, "create_graph")
        out += ["", "", f"def create_graph_mode({xs}):", f"    return {qualified(cg_only)}({xs})"]
    if plan.extra:
        out += ["", "", "ORACLE_SIDES = {"]
        out += [f'    "{plan.oracle}": ("{reference_mode}", {reference_mode}_mode, {grad_b_text}),']
        for o, _, _ in plan.extra:
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
    if plan.exact:
        out += ["", "", f"def fd_mode({xs}):", f"    return {plan.fd_expr}({xs})"]
    else:
        out += ["", "", "fd_mode = None  # derivative rules deliberately not exact: no finite-difference triage"]
    for name in _VERDICT + _RUNTIME:
        out += ["", "", plan.lib[name]]
    out += ["", "", 'if __name__ == "__main__":', "    sys.exit(main())", ""]
    return out


#: What a promise repro's assertion says (NOTE [promises]); verification looks for it.
