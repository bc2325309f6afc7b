"""The short forms of a published repro (NOTE [repro styles] in :mod:`fuzzer.codegen.render`): its compact
tail, plain-autograd sides written as straight lines, and the shortest twins it needs. Torch-free.

Split from :mod:`fuzzer.codegen.render`.
"""

from __future__ import annotations

import ast
import functools
import re

from ..ir.case import Case
from .compose import HELPER_ORDER
from .function import parse
from .parts import Expect, input_exprs, input_lines, lib_sources

PROMISE_MESSAGE = "one side raises the error torch promises for this Function, the other returns a value"

#: Characters of input expressions a published repro writes into each side's call (else ``inputs()``).
_INLINE_INPUTS = 160


def compact_tail(
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
    inline = sum(len(x) + 2 for x in input_exprs(case, ", requires_grad=True")) <= _INLINE_INPUTS
    sides = []
    for (label, expr, grad), raises in zip((side_a, side_b), (expect.a_raises, expect.b_raises), strict=True):
        if inline:
            xs = ", ".join(input_exprs(case, ", requires_grad=True" if grad else ""))
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
    head = [] if inline else ["", "", *input_lines(case, requires_grad=True)]
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


def helpers_in(expr: str, defs: dict[str, list[str]], lib: dict[str, str]) -> set[str]:
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


def side_forms(
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
            used = {h for e, on in zip((a, b), run, strict=True) if on for h in helpers_in(e, defs, lib)}
            size = sum(lib[h].count("\n") + 1 for h in used) + sum(len(v) for v in defs.values())
            if best is None or size < best[0]:
                best = (size, a, b, defs)
    assert best is not None
    return best[1], best[2], best[3]


def _call_args(call: str) -> str:
    """``expr(args)`` as ``expr, args`` (the arguments of ``outcome``); the call is rendered by
    :func:`compact_tail`, its expression never ends in a parenthesis of its own arguments."""
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
