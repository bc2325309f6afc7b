"""Render the script of an ``affuzz check`` case: the user's Function imported, not generated. Torch-free.

The script has the runtime contract of :func:`fuzzer.codegen.render.render`'s ``full`` style (``inputs()``,
``f``, ``SIDES``, ``ORACLE_SIDES``, ``check()``...), so :func:`fuzzer.judge.execute.run_script` runs it the
way it runs a fuzz case, and the published ``repro.py`` is the same template with the compact ending.

NOTE [check oracles]
``affuzz check`` puts the user's Function itself under test, so it asks two kinds of question.

*Rules* (kind ``function``: the Function's rules disagree), on the Function's sample inputs in float64,
through plain autograd only, so that nothing of torch.func is involved:

    oracle                  side A                               side B
    ------                  ------                               ------
    backward_vs_fd          its backward (jacrev_loop)           central finite differences (fd_jac)
    jvp_vs_fd               its jvp (forward AD, jacfwd_dual)    finite differences
    backward_vs_jvp         its backward                         its jvp
    double_backward_vs_fd   backward of its backward             finite differences of finite differences
    jvp_of_backward_vs_fd   forward AD of its backward           finite differences of finite differences
    backward_of_jvp_vs_fd   backward of its jvp                  finite differences of finite differences
    vmap_rule_vs_loop       torch.func.vmap with its vmap        a loop over the batch
                            staticmethod (batch of 3)

Each applies only where the Function defines the rules it compares (a ``jvp``; a ``vmap`` staticmethod:
``generate_vmap_rule`` is torch's rule, judged under *torch*). Finite differences agree within
``FD_TOLERANCE`` (below).

*Torch* (kind ``torch``: torch disagrees with itself), on transform stacks: the fuzzer's oracles
(NOTE [oracles] in :mod:`fuzzer.ir.oracles`), ``compiled_vs_eager`` among them unless ``--compile-backend
none``: ``torch.compile(stack(f), backend=..., fullgraph=False)`` beside ``stack(f)``, which is the
question "is my Function safe under torch.compile?" (both sides run the same rules, so no rule oracle
has to check out first, but for the vmap staticmethod under a vmapping stack: a wrong batch the eager side
takes, the compiler's fake tensors refuse; a graph break is no finding, as fullgraph is False). A rule
that is deliberately not forward's derivative (a straight-through estimator, a scaled gradient) is what a
compiler that drops it gets wrong, and what this oracle is for. A disagreement there is torch's only where it cannot come from
the Function: both sides run the same rules at every order (the same path, NOTE [valid comparisons], and
the Function under torch.func vmap as often), or every rule that differs between them was verified by the
rule oracles: paths that differ need the first-order rules (backward, and with a forward level the jvp
and backward vs jvp) and the second-order rule of each side's two innermost levels (``SECOND_ORDER``);
a different number of vmaps needs the vmap staticmethod; such a comparison is judged at
``FD_TOLERANCE``, the tolerance its rules were verified to (a damped rule within it, exact to 1e-6,
differs from its twin by that much), and so is every other oracle of its script. Otherwise the
comparison is ``not_applicable`` (``rules disagree (...)``, :meth:`fuzzer.check.engine.Checker.valid`) and the rule finding is what to fix.
The rules are verified at the sample points (NOTE [check inputs]; the second-order ones w.r.t. every pair of
inputs, one entry per pair named ``d<second> d<first>``; the first-order ones one entry per input, by its
parameter's name): evidence, not proof. A finite-difference oracle's disagreement is a finding only
where the forward (for a second-order oracle, its finite-difference derivative too) is smooth at the
sample: one-sided differences on either side of it agree, and finite differences at the step and at a
tenth of it agree (``kink`` and ``unconverged`` in fuzzer/codegen/repro_fd.py, run by
:meth:`fuzzer.check.engine.Checker.kink`); a kink, a tie or a branch within a step of the sample is a
``not_smooth`` note. A rule the Function declares
deliberately not its forward's derivative (``affuzz_not_derivative = ("backward",)`` on the class, or
``--not-derivative backward``) is ``expected`` to disagree with finite differences (an error it raises is
still a finding), and with the other rule in backward vs jvp where only one is declared; it is still
checked for consistency across transforms.
"""

from __future__ import annotations

from ..ir.case import Transform
from ..ir.oracles import COMPILED, ORACLE_KINDS, REFERENCE_MODES, alternate, oracle_kind
from ..ir.shapes import numel, transform_output_shape
from ..ir.target import Arg, CheckCase, Target
from . import parts
from .compose import HELPER_ORDER, compiled_stack, compose_stack, qualified
from .parts import Expect, lib_sources
from .render import ERRORS_LINE
from .short_forms import short_sources

RULE_ORACLES = (
    "backward_vs_fd",
    "jvp_vs_fd",
    "backward_vs_jvp",
    "double_backward_vs_fd",
    "jvp_of_backward_vs_fd",
    "backward_of_jvp_vs_fd",
    "vmap_rule_vs_loop",
    "opcheck",
)
#: The second-order rule oracle of each second-order path (innermost first, NOTE [valid comparisons]).
SECOND_ORDER = {
    ("R", "R"): "double_backward_vs_fd",
    ("R", "F"): "jvp_of_backward_vs_fd",
    ("F", "R"): "backward_of_jvp_vs_fd",
}
TORCH_ORACLES = tuple(k.name for k in ORACLE_KINDS if k.in_check)  # NOTE [oracle table]
#: What each side of a rule oracle is called in output and repros.
RULE_SIDES = {
    "backward_vs_fd": ("backward", "finite_differences"),
    "jvp_vs_fd": ("jvp", "finite_differences"),
    "backward_vs_jvp": ("backward", "jvp"),
    "double_backward_vs_fd": ("double_backward", "finite_differences"),
    "jvp_of_backward_vs_fd": ("jvp_of_backward", "finite_differences"),
    "backward_of_jvp_vs_fd": ("backward_of_jvp", "finite_differences"),
    "vmap_rule_vs_loop": ("vmap_rule", "loop"),
    "opcheck": ("opcheck", "op"),
}
RULE_BATCH = 3
FD_ORACLES = RULE_ORACLES[:2] + RULE_ORACLES[3:6]
#: The rules each finite-difference oracle differentiates (NOTE [check oracles]: a rule declared not the
#: derivative is not compared with finite differences).
FD_RULES = {
    "backward_vs_fd": {"backward"},
    "jvp_vs_fd": {"jvp"},
    "double_backward_vs_fd": {"backward"},
    "jvp_of_backward_vs_fd": {"backward", "jvp"},
    "backward_of_jvp_vs_fd": {"backward", "jvp"},
}
_RUNTIME = ("outcome", "finite_forward", "run", "too_slow", "check", "main")
#: NOTE [finite differences] in fuzzer/codegen/repro_fd.py: at eps = 1e-3 up to two nested central differences
#: are within ~1e-6 of the derivative (relative to its size ~1); 1e-4 leaves a margin of 100 and is still far
#: below what a wrong rule gives. Written into the scripts of the finite-difference oracles.
FD_TOLERANCE = 'FD_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}'


def _verdict_fd(verdict: str) -> str:
    """repro_lib's ``verdict`` with ``FD_TOLERANCE`` in its ``assert_close``."""
    out = verdict.replace("assert_close(a, b, equal_nan=True)", "assert_close(a, b, equal_nan=True, **FD_TOLERANCE)")
    if out == verdict:
        raise AssertionError("repro_lib.verdict no longer calls assert_close(a, b, equal_nan=True)")
    return out


_VERDICT = ("message_key", "error_key", "torch_bug", "layout", "identical")


def rule_applies(target: Target, oracle: str) -> str | None:
    """Why rule ``oracle`` does not apply to ``target`` (None: it does)."""
    if oracle == "opcheck":
        return None if target.op else "not a custom op"
    if target.op and oracle in ("jvp_vs_fd", "backward_vs_jvp", "jvp_of_backward_vs_fd", "backward_of_jvp_vs_fd"):
        return "a custom op has no jvp rule (NOTE [check custom ops])"
    if (
        oracle in ("jvp_vs_fd", "backward_vs_jvp", "jvp_of_backward_vs_fd", "backward_of_jvp_vs_fd")
        and "jvp" not in target.rules
    ):
        return "no jvp staticmethod"
    if oracle == "vmap_rule_vs_loop" and "vmap" not in target.rules:
        return "no vmap staticmethod" + (
            " (generate_vmap_rule: torch's rule)" if "generate_vmap_rule" in target.rules else ""
        )
    return None


def not_derivative(target: Target, oracle: str) -> str:
    """Why rule ``oracle`` is ``expected`` to disagree: it compares a rule the Function declares not its
    forward's derivative with finite differences, or such a rule with one that is not declared ('': it is
    not; NOTE [check oracles])."""
    declared = set(target.not_derivative)
    if oracle in FD_RULES and FD_RULES[oracle] & declared:
        return f"declared not the derivative: {', '.join(sorted(FD_RULES[oracle] & declared))}"
    if oracle == "backward_vs_jvp" and len(declared & {"backward", "jvp"}) == 1:
        return f"declared not the derivative: {', '.join(sorted(declared))} (the other rule is)"
    return ""


# ------------------------------------------------------------------------------------ shapes


def level_inputs(target: Target, transforms: tuple[Transform, ...]) -> list[list[tuple[int, ...]]]:
    """Input shapes each level's inner function sees, innermost (``f``) first."""
    shapes = list(target.shapes)
    out = [list(shapes)]
    for t in reversed(transforms):
        if t.name == "vmap":
            shapes = [(t.batch_size, *s) for s in shapes]
        out.append(list(shapes))
    return out


def sums(target: Target, transforms: tuple[Transform, ...]) -> list[bool]:
    """Per level, outermost first: whether a ``grad`` level sums its inner output (it needs a scalar)."""
    ins = level_inputs(target, transforms)
    out, res = target.out_shape, []
    for level, t in enumerate(reversed(transforms)):
        res.append(t.name == "grad" and out != ())
        out = transform_output_shape(t, out, ins[level])
    return res[::-1]


def stack_inputs(target: Target, transforms: tuple[Transform, ...], *, float64: bool = False) -> list[Arg]:
    """The tensor inputs of the whole stack: each vmap level adds a leading batch dim (in_dims 0); the
    sample at batch index k is the target's sample plus 0.1 k (distinct, in the sample's range)."""
    batch = [t.batch_size for t in transforms if t.name == "vmap"]
    n_batch = numel(batch)
    out = []
    for a in target.args:
        if a.kind != "tensor":
            continue
        values = tuple(v + 0.1 * k for k in range(n_batch) for v in a.values)
        out.append(Arg("tensor", (*batch, *a.shape), "float64" if float64 else a.dtype, values))
    return out


def tensor_expr(a: Arg, extra: str = "") -> str:
    return parts.tensor_expr(list(a.values), a.shape, a.dtype, extra)


# ------------------------------------------------------------------------------------ pieces


def _arg_expr(a: Arg) -> str:
    """A non-input argument as the script writes it (NOTE [check inputs])."""
    if a.kind == "import":
        return a.literal.partition(":")[2]
    if a.kind == "given":
        return f"GIVEN[{a.literal}]"
    return a.literal


def _callee(target: Target) -> str:
    """How ``f`` calls the target: ``Fn.apply``, a custom op by its name, or ``torch.ops.ns.name``."""
    return target.name if target.op else f"{target.name}.apply"


def f_lines(target: Target, opcheck: bool = False) -> list[str]:
    """``f`` of the script; with ``opcheck``, also ``op`` and ``op_args`` (what ``opchecked`` checks)."""
    xs = [f"x{i}" for i in range(target.n_inputs)]
    args, plain, k = [], [], 0  # plain: the arguments as the op gets them, without f's clones
    for a in target.args:
        if a.kind == "tensor":
            args.append(f"{xs[k]}.clone()" if target.clone else xs[k])
            plain.append(xs[k])
            k += 1
        else:
            args.append(_arg_expr(a))
            plain.append(args[-1])
    call = f"{_callee(target)}({', '.join(args)})"
    head = f"def f({', '.join(xs)}):"
    if opcheck:
        return [
            f"op = {_callee(target)}",
            "",
            "",
            f"def op_args({', '.join(xs)}):",
            f"    return ({', '.join(plain)},)",
            "",
            "",
            *f_lines(target),
        ]
    if target.outputs is None:
        return [head, f"    return {call}"]
    if len(target.outputs) == 1:
        return [head, f"    return {call}[{target.outputs[0]}]"]
    cat = ", ".join(f"out[{j}].reshape(-1)" for j in target.outputs)
    return [head, f"    out = {call}", f"    return torch.cat([{cat}])  # its floating-point outputs, flattened"]


def import_lines(target: Target) -> list[str]:
    out = ["import torch"]
    if target.name.startswith("torch.ops."):  # NOTE [check custom ops]: the module registers the op
        out.append(f"import {target.module}  # registers {target.name}")
    else:
        out.append(f"from {target.module} import {target.name}")
    for a in target.args:
        if a.kind == "import":
            module, _, name = a.literal.partition(":")
            out.append(f"from {module} import {name}")
    if target.given:
        where, _, k = target.given.partition("[")
        module, _, fn = where.partition(":")
        out += [f"from {module} import {fn}", "", f"GIVEN = list({fn}())[{k.rstrip(']')}]  # --inputs-from"]
    return out


def input_lines(args: list[Arg], *, requires_grad: bool) -> list[str]:
    extra = ", requires_grad=requires_grad" if requires_grad else ""
    head = "def inputs(requires_grad=False):" if requires_grad else "def inputs():"
    ts = [tensor_expr(a, extra) for a in args]
    if len(ts) == 1:
        return [head, f"    return ({ts[0]},)"]
    return [head, "    return (", *[f"        {t}," for t in ts], "    )"]


def rule_sides(target: Target, oracle: str) -> tuple[tuple[str, bool], tuple[str, bool], set[str]]:
    """((expr, requires_grad) of side A, of side B, names used) of rule ``oracle``."""
    n = target.n_inputs
    inputs = tuple(target.input_names)
    if len(set(inputs)) < n:
        inputs = tuple(f"x{i}" for i in range(n))

    def each(twin: str) -> str:
        return f"{twin}(f)" if n == 1 else f"all_inputs({twin}, f, {inputs!r})"

    def pairs(outer: str, inner: str) -> str:  # second order w.r.t. every input (NOTE [check oracles])
        return f"{outer}({inner}(f))" if n == 1 else f"all_pairs({outer}, {inner}, f, {inputs!r})"

    names = {"all_inputs"} if n > 1 else set()
    two = {"all_pairs"} if n > 1 else set()
    if oracle == "backward_vs_fd":
        return (each("jacrev_loop"), True), (each("fd_jac"), False), names | {"jacrev_loop", "fd_jac"}
    if oracle == "jvp_vs_fd":
        dual = {"jacfwd_dual", "_nums", "_replace_arg", "_result"}
        return (each("jacfwd_dual"), False), (each("fd_jac"), False), names | dual | {"fd_jac"}
    if oracle == "backward_vs_jvp":
        dual = {"jacfwd_dual", "_nums", "_replace_arg", "_result"}
        return (each("jacrev_loop"), True), (each("jacfwd_dual"), False), names | dual | {"jacrev_loop"}
    dual = {"jacfwd_dual", "_nums", "_replace_arg", "_result"}
    fd2 = (pairs("fd_jac", "fd_jac"), False)
    if oracle == "double_backward_vs_fd":
        return (pairs("jacrev_loop", "jacrev_loop"), True), fd2, {"jacrev_loop", "fd_jac"} | two
    if oracle == "jvp_of_backward_vs_fd":
        return (pairs("jacfwd_dual", "jacrev_loop"), True), fd2, {"jacrev_loop", "fd_jac"} | dual | two
    if oracle == "backward_of_jvp_vs_fd":
        return (pairs("jacrev_loop", "jacfwd_dual"), True), fd2, {"jacrev_loop", "fd_jac"} | dual | two
    if oracle == "vmap_rule_vs_loop":
        return ("torch.func.vmap(f)", False), ("vmap_loop(f)", False), {"vmap_loop"}
    if oracle == "opcheck":  # NOTE [check custom ops]: opcheck raises where the op's registrations disagree
        return ("opchecked(f)", True), ("f", True), {"opchecked"}
    raise ValueError(f"not a rule oracle: {oracle!r}")


def _torch_sides(case: CheckCase, oracle: str) -> tuple[tuple[str, bool], tuple[str, bool], set[str]]:
    t, stack = case.target, case.transforms
    s = sums(t, stack)
    a, names = compose_stack(stack, s, t.n_inputs, "functorch")
    grad_a = any(x.name == "autograd_grad" for x in stack)
    kind = oracle_kind(oracle)  # NOTE [oracle table]
    if not kind.in_check:
        raise ValueError(f"{oracle} is not an oracle of affuzz check (known: {', '.join(TORCH_ORACLES)})")
    b, more, grad_b = _CHECK_SIDE_B[kind.side_b](case, oracle, s)
    return (qualified(a), grad_a), (qualified(b), grad_b if grad_b is not None else grad_a), names | more


def _check_twins(case: CheckCase, oracle: str, s: list[bool]) -> tuple[str, set[str], bool | None]:
    return (*compose_stack(case.transforms, s, case.target.n_inputs, "create_graph"), True)


def _check_loops(case: CheckCase, oracle: str, s: list[bool]) -> tuple[str, set[str], bool | None]:
    return (*compose_stack(case.transforms, s, case.target.n_inputs, "functorch_loop"), None)


def _check_alternate(case: CheckCase, oracle: str, s: list[bool]) -> tuple[str, set[str], bool | None]:
    alt = alternate(case.transforms, oracle)
    if alt is None:
        raise ValueError(f"{oracle} does not apply to this stack")
    return (*compose_stack(alt, sums(case.target, alt), case.target.n_inputs, "functorch"), None)


def _check_compiled(case: CheckCase, oracle: str, s: list[bool]) -> tuple[str, set[str], bool | None]:
    # NOTE [compiled mode]: placed around the stack (check_render's NOTE [check oracles])
    if case.compile is None or case.compile.placement != "around":
        raise ValueError(f"{COMPILED} in affuzz check compiles around the stack")
    return (*compiled_stack(case.transforms, s, case.target.n_inputs, case.compile), None)


#: NOTE [oracle table]: side B of each recipe ``affuzz check`` runs (expression, names, whether its inputs
#: require grad: None, as side A's).
_CHECK_SIDE_B = {
    "twins": _check_twins,
    "loops": _check_loops,
    "alternate": _check_alternate,
    "compiled": _check_compiled,
}


def sides_of(case: CheckCase, oracle: str | None = None) -> tuple[tuple[str, bool], tuple[str, bool], set[str]]:
    oracle = oracle or case.oracle
    if oracle in RULE_ORACLES:
        return rule_sides(case.target, oracle)
    return _torch_sides(case, oracle)


def side_names(oracle: str) -> tuple[str, str]:
    return RULE_SIDES.get(oracle) or ("functorch", REFERENCE_MODES[oracle])


def case_inputs(case: CheckCase) -> list[Arg]:
    if case.oracle in RULE_ORACLES:
        stack = (Transform("vmap", batch_size=RULE_BATCH),) if case.oracle == "vmap_rule_vs_loop" else ()
        return stack_inputs(case.target, stack, float64=True)
    return stack_inputs(case.target, case.transforms)


def _helpers(names: set[str], lib: dict[str, str]) -> list[str]:
    if names & {"fd_jac"} or "fd_jac(" in " ".join(names):
        names = names | {"fd_jac"}
    order = [*HELPER_ORDER, "all_inputs", "all_pairs"]
    out: list[str] = []
    for h in order:
        if h in names:
            out += ["", "", lib[h]]
    return out


# ------------------------------------------------------------------------------------ the script


def render_check(
    case: CheckCase,
    *,
    style: str = "full",
    also: tuple[str, ...] = (),
    expect: Expect | None = None,
    header: tuple[str, ...] | list[str] = (),
) -> str:
    """The script of ``case`` (NOTE [check oracles]). ``full``: what ``affuzz check`` executes (``also``:
    more torch oracles of the same stack, NOTE [one exec per case]); ``repro``: the published repro.py,
    ending as :class:`~fuzzer.codegen.parts.Expect` says (both values and ``assert_close``, or the side
    that raises run uncaught)."""
    oracle = case.oracle
    if also and oracle in RULE_ORACLES:
        raise ValueError("also= is for torch oracles only (a rule oracle's side A is its own)")
    (a, grad_a), (b, grad_b), names = sides_of(case)
    extra = [(o, sides_of(case, o)) for o in also if o != oracle]
    for _, (_, _, more) in extra:
        names = names | more
    lib = lib_sources(docstrings=style == "full")
    if style != "full":  # NOTE [repro styles]: the twins' shortest forms (every argnums here is an int)
        lib = {**lib, **short_sources("_short"), **(short_sources("_1") if case.target.n_inputs == 1 else {})}
        names = names - {"_nums", "_replace_arg", "_result"}
    fd = oracle in FD_ORACLES or bool(case.meta.get("rule_tolerance"))
    name_a, name_b = side_names(oracle)
    out = [f"# {h}" if h else "#" for h in header]
    out += import_lines(case.target)
    out += ["", "", *f_lines(case.target, opcheck=oracle == "opcheck")]
    args = case_inputs(case)
    out += _helpers(names, lib)
    if style != "full":
        if fd:
            out += ["", "", FD_TOLERANCE]
        return "\n".join(out + _tail(case, args, (name_a, a, grad_a), (name_b, b, grad_b), expect, fd))
    out = ["import re", "import sys", "import time", "", *out]
    out += ["", "", *input_lines(args, requires_grad=False)]
    xs = ", ".join(f"x{i}" for i in range(case.target.n_inputs))
    out += ["", "", ERRORS_LINE]
    out += ["", "", f"def {name_a}_mode({xs}):", f"    return {a}({xs})"]
    out += ["", "", f"def {name_b}_mode({xs}):", f"    return {b}({xs})"]
    for o, (_, (bo, _go), _) in extra:
        out += ["", "", f"def {side_names(o)[1]}_mode({xs}):", f"    return {bo}({xs})"]
    if extra:
        out += ["", "", "ORACLE_SIDES = {", f'    "{oracle}": ("{name_b}", {name_b}_mode, {grad_b}),']
        for o, (_, (_, go), _) in extra:
            out += [f'    "{o}": ("{side_names(o)[1]}", {side_names(o)[1]}_mode, {go}),']
        out += ["}"]
    out += [
        "",
        "",
        f'SIDES = (("{name_a}", {name_a}_mode, {grad_a}), ("{name_b}", {name_b}_mode, {grad_b}))',
        "SECONDS = {}",
        "SLOW_RATIO, SLOW_SECONDS = float('inf'), float('inf')  # affuzz check does not look for slow cases",
        "fd_mode = None",
    ]
    for n in _VERDICT:
        out += ["", "", lib[n]]
    if fd:
        out += ["", "", FD_TOLERANCE, "", "", _verdict_fd(lib["verdict"])]
    else:
        out += ["", "", lib["verdict"]]
    for n in _RUNTIME:
        out += ["", "", lib[n]]
    out += ["", "", 'if __name__ == "__main__":', "    sys.exit(main())", ""]
    return "\n".join(out)


def _tail(
    case: CheckCase,
    args: list[Arg],
    side_a: tuple[str, str, bool],
    side_b: tuple[str, str, bool],
    expect: Expect | None,
    fd: bool,
) -> list[str]:
    expect = expect or Expect()
    out = ["", "", *input_lines(args, requires_grad=True), ""]
    calls = [(name, f"{expr}(*inputs({'True' if grad else ''}))") for name, expr, grad in (side_a, side_b)]
    tol = ", **FD_TOLERANCE" if fd else ""
    if not expect.a_raises and not expect.b_raises:
        return out + [
            "",
            f"{calls[0][0]} = {calls[0][1]}",
            f"{calls[1][0]} = {calls[1][1]}",
            f'print(f"{calls[0][0]}:\\n{{{calls[0][0]}}}\\n{calls[1][0]}:\\n{{{calls[1][0]}}}")',
            f"torch.testing.assert_close({calls[0][0]}, {calls[1][0]}{tol})  # fails (exit 1) while the two disagree",
            "",
        ]
    last, first = (calls[0], calls[1]) if expect.last == 0 else (calls[1], calls[0])
    first_raises = expect.b_raises if expect.last == 0 else expect.a_raises
    body = [""]
    if expect.other is not None:
        said = " ".join(expect.other.split())
        said = said if len(said) <= 100 else said[:97] + "..."
        body += [f"# {first[0]} {'raises' if first_raises else 'returns'} {said}"]
    elif first_raises:
        body += ["try:", f"    {first[1]}", "except Exception as e:", f'    print("{first[0]} raised", repr(e))']
    else:
        body += [f'print("{first[0]}:", {first[1]})']
    return out + body + [f"{last[1]}  # raises (exit 1) while the finding is there", ""]


__all__ = [
    "RULE_ORACLES",
    "TORCH_ORACLES",
    "render_check",
    "rule_applies",
    "sums",
]
