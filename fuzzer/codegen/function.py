"""Render a case's custom ``torch.autograd.Function`` (the class ``Fn``) as Python source. Torch-free.

:func:`render_function` writes the class itself: ``forward`` (with ``setup_context``, or the legacy
``forward(ctx, ...)``), ``backward``, and the optional ``jvp`` and ``vmap`` staticmethods the
:class:`~fuzzer.ir.case.FunctionDef` asks for. :mod:`fuzzer.codegen.render` puts it into the script.

Invariants of the source it writes:

* Only vocabulary items of the case IR become code; names follow the IR's references: tensor inputs
  ``x<i>``, then non-tensor inputs ``s<i>`` (the Function's parameters, in that order), forward
  intermediates ``t<k>``, outputs ``o<j>``, grad_outputs ``g<j>``.
* The backward computes the exact vector-Jacobian product of the forward, less the terms it drops on
  purpose (``unused_grads``, ``none_grads``); every value it needs comes from what forward saved
  (``saved``, on ctx or through save_for_backward), recomputed from there where needed.
* The jvp rule declares the same derivative as the backward (NOTE [declared derivative]).
* A hand-written vmap rule calls ``Fn.apply`` per sample, so the Function's backward stays in use under
  outer levels; the planted ``custom_wrong`` rule doubles the outputs, and says so in a comment.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import threading
from dataclasses import replace
from typing import Any

from ..ir.case import NON_TENSOR_OUTPUT, FunctionDef
from ..ir.dataflow import live_nodes
from .fn_exprs import (
    CLASS_NAME,
    arg_names,
    ctx_lines,
    deps_of,
    node_expr,
    node_lines,
    output_exprs,
    returns_expr,
    tup,
)
from .fn_rules import backward_lines, jvp_rule_lines, vmap_rule_lines


def _forward(fn: FunctionDef) -> list[str]:
    args = ", ".join(arg_names(fn))
    exprs = output_exprs(fn)
    extra = [str(NON_TENSOR_OUTPUT)] if fn.non_tensor_output else []
    if fn.style == "legacy":
        lines = ["    @staticmethod", f"    def forward(ctx, {args}):"]
        lines += node_lines(fn, live_nodes(fn), "        ", forward=True)
        name_of: dict[str, str] = {}
        needed = {r for r in fn.saved if r.startswith("o")} | {f"o{j}" for j in fn.non_differentiable}
        for j in range(len(fn.outputs)):
            r = f"o{j}"
            if r in needed:
                if not re.fullmatch(r"[xt]\d+", exprs[j]):
                    lines.append(f"        {r} = {exprs[j]}")
                    exprs[j] = r
                name_of[r] = exprs[j]
        lines += [f"        x{i}.mul_(2)" for i in fn.dirty]
        lines += ctx_lines(fn, name_of, "        ")
        lines.append(f"        return {returns_expr(exprs + extra)}")
        return lines
    lines = ["    @staticmethod", f"    def forward({args}):"]
    computed = deps_of(fn, [o.ref for o in fn.outputs])
    # a node that only one node output reads is computed in the return statement itself
    reads = [a for k in computed for a in fn.nodes[k].args] + [o.ref for o in fn.outputs]
    inline = {k for k in computed if reads.count(f"t{k}") == 1 and f"t{k}" in exprs}
    exprs = [
        node_expr(fn, int(e[1:]), forward=True) if re.fullmatch(r"t\d+", e) and int(e[1:]) in inline else e
        for e in exprs
    ]
    lines += node_lines(fn, computed - inline, "        ", forward=True)
    lines += [f"        x{i}.mul_(2)" for i in fn.dirty]
    lines.append(f"        return {returns_expr(exprs + extra)}")
    lines += ["", "    @staticmethod", "    def setup_context(ctx, inputs, output):"]
    recompute = deps_of(fn, [r for r in fn.saved if r.startswith("t")])
    used = set(fn.saved) | {f"o{j}" for j in fn.non_differentiable} | {f"x{i}" for i in fn.dirty}
    if fn.jvp_rule:
        used |= {f"x{i}" for i in range(fn.n_inputs)}
    for k in recompute:
        used.update(fn.nodes[k].args)
    xs = [f"x{i}" if f"x{i}" in used else "_" for i in range(fn.n_inputs)] + [f"s{i}" for i in range(len(fn.scalars))]
    os_ = [f"o{j}" if f"o{j}" in used else "_" for j in range(len(fn.outputs))] + (["_"] if extra else [])
    if any(x != "_" for x in xs):
        lines.append(f"        {tup(xs)} = inputs")
    used_outputs = [j for j, o in enumerate(os_) if o != "_"]
    name_of: dict[str, str] = {}
    if len(used_outputs) == 1 and not recompute and len(os_) > 1:
        name_of[os_[used_outputs[0]]] = f"output[{used_outputs[0]}]"  # one output read: no unpacking
    elif used_outputs:
        lines.append(f"        {os_[0] if len(os_) == 1 else tup(os_)} = output")
    lines += node_lines(fn, recompute, "        ")
    lines += ctx_lines(fn, name_of, "        ") or ["        pass"]
    return lines


def render_function(
    fn: FunctionDef, base: tuple[int, ...], dtype: str = "float64", *, compact: bool = False
) -> list[str]:
    """The lines of the class ``Fn`` for ``fn``, whose tensor inputs have the base shape ``base`` and
    dtype ``dtype`` (torch's name for it). ``compact`` (a published repro): a value assigned on the line
    before a ``return`` of just that name is returned directly."""
    lines = list(_class_lines_of(fn, base, dtype))
    if not compact:
        return lines
    return _inputs_directly(_return_directly(_drop_unused(lines)))


@functools.lru_cache(maxsize=64)
def _class_lines_of(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> tuple[str, ...]:
    """:func:`_class_lines`, once per Function: a campaign's group of cases shares one (NOTE [case groups]
    in strategies/cases.py), and the shrinker and ablation render one Function many times."""
    return tuple(_class_lines(fn, base, dtype))


#: The Python name of a custom-op Function's op in a script (NOTE [custom op mode] in fuzzer/ir/custom_op.py).
OP_NAME = "op"
#: The namespace the op is registered in.
OP_NAMESPACE = "affuzz"


def render_custom_op(
    fn: FunctionDef, base: tuple[int, ...], dtype: str = "float64", *, compact: bool = False
) -> list[str]:
    """The lines that define ``fn`` as a ``torch.library.custom_op`` named ``op`` (NOTE [custom op mode] in
    fuzzer/ir/custom_op.py): the Function's setup_context form, its forward the op's implementation,
    ``setup_context`` and ``backward`` registered with ``register_autograd``, a hand-written vmap rule
    (calling the op per sample) with ``register_vmap``, and a fake implementation (every output has the
    base shape). The op's name in ``torch.ops`` is ``affuzz::op_<hash of its source>``: two different ops
    never share a name, and the same op registered again replaces itself."""
    cls = render_function(replace(fn, style="setup_context"), base, dtype, compact=compact)
    digest = hashlib.sha1("\n".join(_class_lines_of(replace(fn, style="setup_context"), base, dtype)).encode())
    name = f"{OP_NAMESPACE}::{OP_NAME}_{digest.hexdigest()[:8]}"
    blocks: list[list[str]] = [[]]
    for line in cls[1:]:
        if line == "":
            blocks.append([])
        elif line != "    @staticmethod":
            blocks[-1].append(line[4:])
    tensors = [f"x{i}: torch.Tensor" for i in range(fn.n_inputs)]
    floats = [f"s{i}: float" for i in range(len(fn.scalars))]
    n_out = len(fn.outputs)
    returns = "torch.Tensor" if n_out == 1 else f"tuple[{', '.join(['torch.Tensor'] * n_out)}]"
    out: list[str] = []
    for block in blocks:
        head, body = block[0], block[1:]
        method = re.match(r"def (\w+)\(", head)
        assert method is not None, head
        if method.group(1) == "forward":
            out += [
                f'@torch.library.custom_op("{name}", mutates_args=())',
                f"def {OP_NAME}({', '.join(tensors + floats)}) -> {returns}:",
                *body,
            ]
        else:
            renamed = head.replace(f"def {method.group(1)}(", f"def {OP_NAME}_{method.group(1)}(", 1)
            out += ["", "", renamed, *[line.replace(f"{CLASS_NAME}.apply(", f"{OP_NAME}(") for line in body]]
    args = ", ".join(f"x{i}" for i in range(fn.n_inputs)) + "".join(f", s{i}" for i in range(len(fn.scalars)))
    empty = ", ".join(["torch.empty_like(x0)"] * n_out)
    out += ["", "", f"@{OP_NAME}.register_fake", f"def _({args}):", f"    return {empty}", ""]
    out.append(f"{OP_NAME}.register_autograd({OP_NAME}_backward, setup_context={OP_NAME}_setup_context)")
    if fn.vmap_rule != "none":
        out.append(f"{OP_NAME}.register_vmap({OP_NAME}_vmap)")
    return out


def render_plain_forward(fn: FunctionDef) -> list[str] | None:
    """The Function's ``forward`` as a plain function ``forward`` (NOTE [plain forward] in
    fuzzer/codegen/render.py), written compactly; None for a legacy ``forward(ctx, ...)``, whose body
    uses ``ctx``."""
    if fn.style == "legacy":
        return None
    lines = _forward(fn)
    body = lines[1 : lines.index("")]  # up to setup_context, @staticmethod dropped
    return _return_directly([line[4:] for line in body])


# NOTE [ast lock]
# CPython 3.11's ast module keeps its constructor's recursion depth in interpreter-wide state, so two
# threads parsing at once (a garbage-collection callback may switch threads mid-conversion) can raise
# "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). A campaign renders repros on
# its driver thread and on its verification threads (NOTE [one staging folder per bucket] in
# fuzzer/publish/verify.py), so every ast.parse of the renderer holds this lock.
AST_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> Any:
    """``ast.parse`` under :data:`AST_LOCK` (NOTE [ast lock]): an ``ast.Module`` (an ``ast.Expression`` for
    ``mode="eval"``)."""
    with AST_LOCK:
        return ast.parse(source, mode=mode)


_ASSIGN = re.compile(r"(\s+)(\w+) = (.+)")


#: A tangent's None-default in a jvp rule: ``tx1 = torch.zeros_like(x1) if tx1 is None else tx1``.
_TANGENT_DEFAULT = re.compile(r"(\s+)(tx\d+) = torch\.zeros_like\(\w+\) if \2 is None else \2")


def _drop_unused(lines: list[str]) -> list[str]:
    """A jvp rule's tangent None-defaults that nothing after them in the rule reads. Only those: any other
    line, even one whose value is unused, can raise (undoing a view of a saved output under vmap does in
    real torch bugs), and raising may be the bug."""
    out = list(lines)
    changed = True
    while changed:
        changed = False
        for i, line in enumerate(out):
            m = _TANGENT_DEFAULT.fullmatch(line)
            if not m:
                continue
            end = next((j for j in range(i + 1, len(out)) if out[j].startswith(("    def ", "    @"))), len(out))
            if not any(re.search(rf"\b{m.group(2)}\b", later) for later in out[i + 1 : end]):
                del out[i]
                changed = True
                break
    return out


#: Longest line :func:`_return_directly` writes by substituting a value into a ``return``.
_RETURN_WIDTH = 100


def _inputs_directly(lines: list[str]) -> list[str]:
    """In setup_context, ``x0, x1 = inputs`` and ``o0 = output`` read only by ``ctx`` calls: the calls read
    ``inputs[1]``, ``output`` (``output[j]`` of several outputs) instead, the unpacking dropped, and a
    call given every input in order gets ``*inputs`` (``ctx.save_for_backward(*inputs)``). ``inputs`` is
    what apply got, so ``*inputs`` only where those are exactly the names unpacked (no ``_``). Left as
    it is where any other line reads the names or a call would pass :data:`_RETURN_WIDTH`."""
    try:
        start = lines.index("    def setup_context(ctx, inputs, output):")
    except ValueError:
        return lines
    end = next((j for j in range(start + 1, len(lines)) if not lines[j].startswith("        ")), len(lines))
    body = lines[start + 1 : end]
    expr: dict[str, str] = {}
    every_input: list[str] | None = None
    k = 0
    for line in body:
        tree = parse(line.strip())
        stmt = tree.body[0] if len(tree.body) == 1 else None
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id in ("inputs", "output")
        ):
            break
        src, target = stmt.value.id, stmt.targets[0]
        if isinstance(target, ast.Name):
            expr[target.id] = src
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            names = [e.id for e in target.elts if isinstance(e, ast.Name)]
            expr.update({n: f"{src}[{i}]" for i, n in enumerate(names) if n != "_"})
            if src == "inputs" and "_" not in names:
                every_input = names
        else:
            break
        k += 1
    rest = body[k:]
    if not expr or not rest or not all(line.strip().startswith("ctx.") for line in rest):
        return lines
    reads = re.compile(r"(?<![.\w])(?:" + "|".join(map(re.escape, expr)) + r")\b")
    new = []
    for line in rest:
        m = re.fullmatch(r"(\s+ctx\.\w+)\((.*)\)", line)
        if every_input and m and m.group(2) == ", ".join(every_input):
            line = f"{m.group(1)}(*inputs)"
        line = reads.sub(lambda w: expr[w.group(0)], line)  # not ctx.x0, an attribute of that name
        if len(line) > _RETURN_WIDTH:
            return lines
        new.append(line)
    return [*lines[: start + 1], *new, *lines[end:]]


def _return_directly(lines: list[str]) -> list[str]:
    """``x = e`` followed by a ``return`` that reads ``x`` once: ``e`` written into the return (``x = e``
    then ``return x``: ``return e``), again while the line before is such an assignment and the return
    fits in :data:`_RETURN_WIDTH`. Only where nothing of either line calls an in-place method (``*_``),
    so evaluating ``e`` later changes nothing, and neither line has a comment."""
    out: list[str] = []
    for line in lines:
        m = re.fullmatch(r"(\s+)return (.+)", line)
        while m and out and "#" not in line:
            prev = _ASSIGN.fullmatch(out[-1])
            if not prev or prev.group(1) != m.group(1) or "#" in prev.group(3):
                break
            merged = _substitute(m.group(2), prev.group(2), prev.group(3))
            if merged is None or len(m.group(1)) + 7 + len(merged) > _RETURN_WIDTH:
                break
            out.pop()
            line = f"{m.group(1)}return {merged}"
            m = re.fullmatch(r"(\s+)return (.+)", line)
        out.append(line)
    return out


def _substitute(expr: str, name: str, value: str) -> str | None:
    """``expr`` with its one read of ``name`` replaced by ``value`` (parenthesized as needed), or None
    where ``name`` is read more or less than once, or either side calls an in-place method."""
    try:
        tree, val = parse(expr, mode="eval"), parse(value, mode="eval")
    except SyntaxError:
        return None
    reads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name]
    inplace = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
        for t in (tree, val)
        for n in ast.walk(t)
    )
    if len(reads) != 1 or inplace:
        return None
    if isinstance(tree.body, ast.Name):  # return x: return e, as written
        return value

    class Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return val.body if node.id == name else node

    text = ast.unparse(Put().visit(tree))
    return text[1:-1] if isinstance(tree.body, ast.Tuple) and text.startswith("(") else text


def _class_lines(fn: FunctionDef, base: tuple[int, ...], dtype: str) -> list[str]:
    lines = [f"class {CLASS_NAME}(torch.autograd.Function):"]
    if fn.vmap_rule == "generate":
        lines += ["    generate_vmap_rule = True", ""]
    lines += _forward(fn)
    lines.append("")
    lines += backward_lines(fn, base, dtype)
    if fn.jvp_rule:
        lines.append("")
        lines += jvp_rule_lines(fn)
    if fn.vmap_rule in ("custom", "custom_wrong"):
        lines.append("")
        lines += vmap_rule_lines(fn)
    return lines
