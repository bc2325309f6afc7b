"""What each side of a bucket runs, in words: the stacks a draft's title and intro name (NOTE [issue drafts]
in :mod:`fuzzer.publish.drafts`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..ir.case import OUTER_TRANSFORMS
from ..ir.oracles import COMPILED, MAIN, alternate_stack, oracle_kind
from ..ir.serde import case_from_json
from ..ir.transforms import transform_kind
from .rundata import BucketData


@dataclass(frozen=True)
class Sides:
    a: str  # side A in words, e.g. "torch.func.grad"
    b: str  # side B in words, e.g. "autograd.grad(create_graph=True)"
    b_skeleton: tuple[str, ...]  # side B's transforms, where they are torch.func levels too


def stack_expr(skeleton: list[str] | tuple[str, ...]) -> str:
    """``["autograd_grad", "linearize", "vmap"]`` -> ``autograd.grad of torch.func.linearize(vmap)``."""
    inner = [t for t in skeleton if t not in OUTER_TRANSFORMS]
    expr = inner[-1] if inner else "f"
    for t in reversed(inner[:-1]):
        expr = f"{t}({expr})"
    if inner:
        expr = f"torch.func.{expr}"
    return f"autograd.grad of {expr}" if len(inner) < len(skeleton) else expr


def _alternate_skeleton(bucket: BucketData) -> tuple[str, ...] | None:
    """Side B's stack under a torch.func-only oracle, from the published case (None: not known)."""
    if bucket.path is None or not (bucket.path / "case.json").exists():
        return None
    try:
        case = case_from_json(json.loads((bucket.path / "case.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):  # CaseError is a ValueError
        return None
    alt = alternate_stack(case, bucket.oracle)
    return None if alt is None else tuple(t.name for t in alt)


def _plain_words(skeleton: tuple[str, ...]) -> str:
    """A stack's create_graph twins in words: ``autograd.grad(create_graph=True)``, or ``plain autograd (...)``."""
    words = (transform_kind(t).twin_words for t in skeleton)  # NOTE [transform table]
    twins = list(dict.fromkeys(w for w in words if w is not None)) or [transform_kind("grad").twin_words]
    if len(twins) == 1:  # (a stack of autograd_grad alone: reverse mode's words)
        return twins[0][0]
    return f"plain autograd ({', '.join(t[1] for t in twins)})"


def sides(bucket: BucketData) -> Sides:
    skeleton = bucket.transforms
    oracle = bucket.oracle
    a = stack_expr(skeleton)
    if oracle == MAIN:
        return Sides(a, _plain_words(skeleton), ())
    kind = oracle_kind(oracle)  # NOTE [oracle table]: side B in words, where its stack says nothing new
    if kind.side_b in ("function_twin", "opcheck"):  # NOTE [custom op mode]: one stack over the op, then the twin
        if kind.side_a == "create_graph":
            a = _plain_words(skeleton)
        twin = "the same op as an autograd.Function" if kind.side_b == "function_twin" else kind.words
        return Sides(f"{a} of a custom op", twin, ())
    if oracle == COMPILED and bucket.compile:  # NOTE [compiled mode]: both sides as the repro runs them
        return _compiled_sides(a, skeleton, str(bucket.compile.get("placement", "around")))
    alt = _alternate_skeleton(bucket) if kind.side_b == "alternate" else None
    if alt is not None:
        return Sides(a, stack_expr(alt), alt)
    return Sides(a, kind.words, ())


def _compiled_sides(a: str, skeleton: tuple[str, ...], placement: str) -> Sides:
    """The eager and the compiled side of a compiled finding, by where torch.compile goes: ``plain`` (around
    ``f`` under the plain-autograd twins, the eager side is plain autograd), ``inside`` (around ``f`` in
    the stack), ``around`` (around the torch.func stack; an outer autograd.grad stays outside)."""
    if placement == "plain":
        eager = _plain_words(skeleton)
        return Sides(eager, f"{eager} of torch.compile(f)", ())
    if placement == "inside":
        return Sides(a, f"{a} of torch.compile(f)", ())
    outer, sep, inner = a.rpartition("autograd.grad of ")
    return Sides(a, f"{outer}{sep}torch.compile({inner})", ())


def plain_forward(bucket: BucketData) -> bool:
    """Whether the bucket's repro is written without the custom Function (NOTE [plain forward])."""
    verification = (bucket.record or {}).get("verification") or {}
    return bool(isinstance(verification, dict) and verification.get("plain_forward"))
