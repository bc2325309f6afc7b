"""Signatures: the same bug gets the same signature.

NOTE [signatures]
A signature is (verdict, oracle, transform skeleton, essential features). The skeleton is the stack's
transform names, outermost first (``autograd_grad>grad``); batch sizes, argnums, shapes and values are
left out. A feature is *essential* when taking it away (:func:`fuzzer.ablate.without`) makes the two
modes agree. Features that cannot be taken away, whose removal leaves a disagreement, or whose removal
makes the case unrunnable (a documented limitation: e.g. no jvp rule under jacfwd) are left out, so the
same bug found in a bigger Function with incidental extras lands in the same bucket. The
cost is one extra case run per feature of a candidate finding; consistent cases cost nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from .ablate import without
from .case import Case
from .features import features
from .oracles import MAIN


@dataclass(frozen=True)
class Signature:
    verdict: str
    oracle: str
    skeleton: tuple[str, ...]
    features: tuple[str, ...]

    @property
    def text(self) -> str:
        return f"{self.verdict}|{self.oracle}|{'>'.join(self.skeleton)}|{'+'.join(self.features) or '-'}"

    @property
    def id(self) -> str:
        """Stable, filesystem-safe bucket name."""
        return f"{self.verdict}-{hashlib.sha1(self.text.encode()).hexdigest()[:10]}"


def skeleton(case: Case) -> tuple[str, ...]:
    return tuple(t.name for t in case.transforms)


def signature(case: Case, verdict: str, judge: Callable[[Case], str], *, oracle: str = MAIN) -> Signature:
    """Signature of a finding; ``judge`` runs a variant case under the same oracle and returns its
    (classified) verdict."""
    essential = []
    for tag in features(case):
        variant = without(case, tag)
        if variant is not None and judge(variant) == "consistent":
            essential.append(tag)
    return Signature(verdict, oracle, skeleton(case), tuple(essential))
