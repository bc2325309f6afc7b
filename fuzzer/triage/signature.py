"""Signatures: the same bug gets the same signature.

NOTE [signatures]
An error finding's signature is its error fingerprint (NOTE [error buckets] in :mod:`fuzzer.judge.compare`):
one torch error is one bucket whatever the oracle, stack or verdict it shows up under; the stacks it
was hit under are listed in the bucket's ``stacks`` (summary.json; report.md shows them). A value finding's
signature is (verdict, oracle, transform skeleton, essential features). The skeleton is the stack's
transform names, outermost first (``autograd_grad>grad``); batch sizes, argnums, shapes and values are
left out. A feature is *essential* when taking it away (:func:`fuzzer.triage.ablate.without`) makes the two
modes agree. Features that cannot be taken away, whose removal leaves a disagreement, or whose removal
makes the case unrunnable (a documented limitation: e.g. no jvp rule under jacfwd) are left out, so the
same bug found in a bigger Function with incidental extras lands in the same bucket. The
cost is one extra case run per feature of a candidate finding; consistent cases cost nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ir.case import Case
from ..ir.features import features
from ..ir.oracles import MAIN, mode_key, oracle_kind
from .ablate import without


@dataclass(frozen=True)
class Signature:
    verdict: str
    oracle: str
    skeleton: tuple[str, ...]
    features: tuple[str, ...]
    error: str = ""  # NOTE [error buckets] in fuzzer/judge/compare.py: the fingerprint that keys an error finding
    compiled: str = ""  # NOTE [compiled mode]: the backend and placement of a compiled finding (compile_key)

    @property
    def text(self) -> str:
        if self.error and self.verdict == "promise_broken" and oracle_kind(self.oracle).side_b == "function_twin":
            # NOTE [custom op promises]: the op broke the promise, not Dynamo or torch.func: a bucket of its own
            return f"{self.kind}|custom_op|{self.error}"
        if self.error:
            return f"{self.kind}|{self.error}"
        text = f"{self.verdict}|{self.oracle}|{'>'.join(self.skeleton)}|{'+'.join(self.features) or '-'}"
        return f"{text}|{self.compiled}" if self.compiled else text

    @property
    def kind(self) -> str:
        """The bucket's kind: the verdict, except that every error verdict of one torch error is one
        ``error`` bucket (a torch-bug error stays ``torch_bug_error``, a broken promise ``promise_broken``)."""
        return "error" if self.error and self.verdict not in ("torch_bug_error", "promise_broken") else self.verdict

    @property
    def id(self) -> str:
        """Stable, filesystem-safe bucket name."""
        return f"{self.kind}-{hashlib.sha1(self.text.encode()).hexdigest()[:10]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "oracle": self.oracle,
            "skeleton": list(self.skeleton),
            "features": list(self.features),
            "error": self.error,
            **({"compiled": self.compiled} if self.compiled else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Signature:
        return cls(
            d["verdict"],
            d["oracle"],
            tuple(d["skeleton"]),
            tuple(d["features"]),
            d.get("error", ""),
            d.get("compiled", ""),
        )


def skeleton(case: Case) -> tuple[str, ...]:
    return tuple(t.name for t in case.transforms)


def compile_key(case: Case, oracle: str) -> str:
    """NOTE [compiled mode], NOTE [checkpoint mode]: what of a mode finding's configuration tells its bug
    apart (:func:`fuzzer.ir.oracles.mode_key`); '' for the other oracles."""
    return mode_key(oracle, case.compile, case.checkpoint)


def signature(
    case: Case, verdict: str, judge: Callable[[Case], str], *, oracle: str = MAIN, error: str = ""
) -> Signature:
    """Signature of a finding; ``judge`` runs a variant case under the same oracle and returns its
    (classified) verdict. ``error``: the fingerprint of an error finding (its bucket key)."""
    essential = []
    for tag in features(case):
        if tag in oracle_kind(oracle).needs_tags:
            essential.append(tag)  # NOTE [custom op mode]: the oracle needs it: without it, no comparison
            continue
        variant = without(case, tag)
        if variant is not None and judge(variant) == "consistent":
            essential.append(tag)
    return Signature(verdict, oracle, skeleton(case), tuple(essential), error, compile_key(case, oracle))
