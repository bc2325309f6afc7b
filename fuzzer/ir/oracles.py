"""Oracles: which two evaluations of the same case must agree. Torch-free.

NOTE [oracles]
Every oracle compares side A, the case's stack under torch.func ("functorch"), with a side B that must
compute the same mathematics another way:

    oracle                      side B
    ------                      ------
    functorch_vs_create_graph   each level replaced by its plain-autograd twin (NOTE [mode equivalence])
    jacrev_vs_jacfwd            first-order jacrev and jacfwd levels (no derivative level inside them)
                                swapped for each other, still under torch.func
    vmap_vs_loop                every vmap replaced by a Python loop over the batch (vmap_loop), the
                                other levels still torch.func (only with another level: a stack of vmaps
                                alone is the main oracle)
    forward_over_reverse        second-order levels recomputed the other way round: a jacrev directly
                                over a reverse level (grad, jacrev, vjp) becomes jacfwd, and hessian
                                (jacfwd over jacrev) becomes jacrev over jacrev

    compiled_vs_eager           the same computation under torch.compile (NOTE [compiled mode] in
                                fuzzer/ir/case.py); its side A is the eager side it compiles: the
                                case's stack under torch.func, or, where torch.compile goes around f
                                under plain autograd (placement ``plain``), the create_graph side

The first runs on every case; the metamorphic ones on every case they apply to; the compiled one on the
cases that carry a ``compile`` (the campaign gives them their own share of the time). Verdict names
stay the same for all oracles: "functorch" is side A, "reference" is side B.
"""

from __future__ import annotations

from dataclasses import replace

from .case import FORWARD_MODE_TRANSFORMS, Case, Transform

MAIN = "functorch_vs_create_graph"
COMPILED = "compiled_vs_eager"
ORACLES = (MAIN, "jacrev_vs_jacfwd", "vmap_vs_loop", "forward_over_reverse", COMPILED)
#: What side B (the oracle's reference) runs, for each oracle: the name of its mode in a script and of
#: its result in a repro's output (side A is always "functorch"). Outcomes, verdicts and finding.json
#: call the two sides "functorch" and "reference" under every oracle.
REFERENCE_MODES = {
    MAIN: "create_graph",
    "jacrev_vs_jacfwd": "jacrev_jacfwd_swapped",
    "vmap_vs_loop": "vmap_as_loop",
    "forward_over_reverse": "other_order",
    COMPILED: "compiled",
}
_REVERSE = ("grad", "jacrev", "vjp", "hessian")
_SWAP = {"jacrev": "jacfwd", "jacfwd": "jacrev"}


def _has_derivative_inside(stack: tuple[Transform, ...], i: int) -> bool:
    return any(t.name != "vmap" for t in stack[i + 1 :])


def _next_derivative_inside(stack: tuple[Transform, ...], i: int) -> Transform | None:
    return next((t for t in stack[i + 1 :] if t.name != "vmap"), None)


def alternate_stack(case: Case, oracle: str) -> tuple[Transform, ...] | None:
    """Side B's stack for the torch.func-only oracles (None where the oracle does not apply, including
    where side B would leave the generator's grammar: at most one of jacfwd/jvp/linearize)."""
    return alternate(case.transforms, oracle)


def alternate(stack: tuple[Transform, ...], oracle: str) -> tuple[Transform, ...] | None:
    """:func:`alternate_stack` of a bare stack (whatever Function it is applied to)."""
    out: list[Transform] = []
    changed = False
    for i, t in enumerate(stack):
        if oracle == "jacrev_vs_jacfwd" and t.name in _SWAP and not _has_derivative_inside(stack, i):
            out.append(replace(t, name=_SWAP[t.name]))
            changed = True
        elif oracle == "forward_over_reverse" and t.name == "hessian":
            out += [replace(t, name="jacrev"), replace(t, name="jacrev")]
            changed = True
        elif oracle == "forward_over_reverse" and t.name == "jacrev":
            inner = _next_derivative_inside(stack, i)
            if inner is not None and inner.name in _REVERSE:
                out.append(replace(t, name="jacfwd"))
                changed = True
            else:
                out.append(t)
        else:
            out.append(t)
    if not changed or sum(t.name in FORWARD_MODE_TRANSFORMS for t in out) > 1:
        return None  # nothing to swap, or a stack outside the generator's grammar (two forward-mode levels)
    return tuple(out)


def applicable(case: Case) -> tuple[str, ...]:
    """The oracles that apply to ``case``, main first (the compiled one last, where the case has a
    ``compile``)."""
    return applicable_to(case.transforms) + ((COMPILED,) if case.compile is not None else ())


def applicable_to(stack: tuple[Transform, ...]) -> tuple[str, ...]:
    """The oracles that apply to a stack (whatever Function it is applied to), main first; not the
    compiled one, which a case asks for (:func:`applicable`)."""
    res = [MAIN]
    if alternate(stack, "jacrev_vs_jacfwd") is not None:
        res.append("jacrev_vs_jacfwd")
    if any(t.name == "vmap" for t in stack) and any(t.name != "vmap" for t in stack):
        res.append("vmap_vs_loop")  # (a stack of vmaps only: side B would be the main oracle's side B)
    if alternate(stack, "forward_over_reverse") is not None:
        res.append("forward_over_reverse")
    return tuple(res)


def reference_case(case: Case, oracle: str) -> Case:
    if oracle == COMPILED:
        return case
    alt = alternate_stack(case, oracle)
    return case if alt is None else replace(case, transforms=alt)
