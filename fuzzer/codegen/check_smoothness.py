"""The script that says whether a target's forward is smooth at its sample, before a disagreement with finite
differences is a finding (NOTE [check oracles] in :mod:`fuzzer.codegen.check_render`). Torch-free."""

from __future__ import annotations

from ..ir.target import Target
from .check_render import f_lines, import_lines, input_lines, stack_inputs
from .parts import lib_sources


def render_smoothness(target: Target, order: int) -> str:
    """A script whose ``KINK`` says where ``f`` (``order`` 2: its finite-difference derivative w.r.t.
    every input too) is not smooth at the target's sample, '' where it is (NOTE [check oracles])."""
    lib = lib_sources(docstrings=False)
    n = target.n_inputs
    out = [*import_lines(target), "", "", *f_lines(target)]
    for helper in ("fd_jac", "kink", "unconverged"):
        out += ["", "", lib[helper]]
    out += ["", "", *input_lines(stack_inputs(target, (), float64=True), requires_grad=False), ""]
    if order == 1:
        side = f"[fd_jac(f, argnums=i, eps=e)(*inputs()) for i in range({n})]"
    else:
        side = f"[fd_jac(fd_jac(f, argnums=i, eps=e), argnums=j, eps=e)(*inputs()) for i in range({n}) for j in range({n})]"
    out += ["", "KINK = kink(f, inputs())"]
    if order == 2:
        grads = ", ".join(f"fd_jac(f, argnums={i})(*xs).reshape(-1)" for i in range(n))
        out += ["if not KINK:", f"    KINK = kink(lambda *xs: torch.cat([{grads}]), inputs())"]
    out += ["if not KINK:", f"    KINK = unconverged(lambda e: {side})"]
    return "\n".join(out) + "\n"
