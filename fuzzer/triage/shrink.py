"""Shrinking a finding into the smallest case that still shows the same bug.

NOTE [shrinking]
Two stages, both deterministic (the same finding and budget give the same result):

1. Hypothesis's own shrinker over the strategies, fed with the exact bytes the campaign drew the case
   from: ``fuzz_one_input(buffer)`` stores the failing example in a private in-memory example database,
   and re-running the test with phases ``reuse`` + ``shrink`` (and ``@seed(0)``) shrinks it the way
   any Hypothesis failure is shrunk. Skipped for cases that did not come from a buffer (a hand-written or
   corpus case).
2. IR reductions (:func:`fuzzer.triage.reduce.candidates`) to a fixed point, in sweeps over the passes
   (NOTE [reduction sweeps]): until no candidate of any pass shows the bug.

"The same bug" is :class:`Goal`: the same verdict (or its one-sided form, NOTE [one-sided errors]) under
the same oracle, the same error types (and error message, digits ignored) on each side for error
verdicts, and the same *essential* features (NOTE [signatures]): every essential feature is still there
and still essential, and no other feature has become essential. So a step may drop a transform level, but can never trade the bug for another
one that happens to share its verdict. Every step is checked for all of it but the last clause, which
costs a run per feature of the case; that one is checked on the result, and if it fails there the
walk backs up to the newest accepted case that passes it and goes on from there checking everything. The bucket's signature is taken from the shrunk case: its
transform skeleton is the smallest stack that still shows the bug, which is what collapses the many
stacks a campaign finds one bug under into one bucket.

NOTE [reduction sweeps]
The reductions go pass by pass, biggest cuts first (:data:`fuzzer.triage.reduce.PASSES`): a pass's
first candidate that still shows the bug is taken and the same pass tries again on it, until none of
its candidates does; then the next pass. A sweep that took anything is followed by another, from the
first pass (a node dropped can let a level go), so the result is a fixed point of every pass.
Starting over from the first pass after every step would re-run the candidates of the passes before
it, which a later pass's step rarely changes; on a compiled finding each of those runs is a compile.

NOTE [one-sided errors]
An error bucket is its fingerprint's error (NOTE [error buckets] in :mod:`fuzzer.judge.compare`), whatever
the other side did. A ``different_errors`` finding often pairs torch's unexplained error with the other
side's documented one, which the program itself caused (a view of a multi-view output modified in
place, a saved tensor modified in place): a maintainer reading that repro closes it as an invalid
program. So for a ``different_errors`` goal a case where only the side with the fingerprint's error
raises it (``error_functorch_only``/``error_reference_only``, same fingerprint) is the same bug, and once
the walk takes such a case the goal narrows to that verdict: the reductions then look for the smallest
program on which the other side *runs*, and the repro shows torch's error on a program it accepts
elsewhere. A one-sided goal never widens back (the other side starting to fail is a different case).
:attr:`ShrinkResult.verdict` is the shrunk case's verdict, which the published finding carries.

Cost is bounded by ``budget``: the number of case runs (each memoized). Past it every new candidate
counts as "not the same bug", so the walk stops with the smallest case so far; a count, not a clock, so
the result does not depend on the machine's speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import Phase, given, seed
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from ..gen.profile import campaign_settings
from ..ir.case import Case
from ..ir.features import features
from ..ir.oracles import oracle_kind
from .ablate import without
from .reduce import PASSES, candidates, size

#: Default number of case runs one shrink may spend (both stages together).
DEFAULT_BUDGET = 400
#: Runs stage 1 may spend at most. The IR reductions are targeted at this IR and do most of the work
#: (measured on torch 2.0.1 findings: Hypothesis used its whole share on almost every finding, for a
#: fraction of the reduction), so they get the rest of the budget.
HYPOTHESIS_RUNS = 30
#: NOTE [one-sided errors]: the verdicts a goal of the key's verdict narrows to.
ONE_SIDED = {"different_errors": ("error_functorch_only", "error_reference_only")}


@dataclass(frozen=True)
class Goal:
    verdict: str
    oracle: str
    features: tuple[str, ...]  # the essential features
    fingerprint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "oracle": self.oracle,
            "features": list(self.features),
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Goal:
        return cls(d["verdict"], d["oracle"], tuple(d["features"]), d.get("fingerprint", ""))


#: Runs a case under the goal's oracle: (classified verdict, error fingerprint for that verdict).
Runner = Callable[[Case], tuple[str, str]]


def narrowed(goal: Goal, verdict: str) -> str:
    """The verdict a finding shrunk for ``goal`` is published with: the shrunk case's ``verdict`` where it is
    the goal's one-sided form (NOTE [one-sided errors]), else the goal's."""
    return verdict if verdict in ONE_SIDED.get(goal.verdict, ()) else goal.verdict


class _OutOfBudget(Exception):
    pass


class _SameBug(Exception):
    """Raised inside the Hypothesis test when a case still shows the bug."""


@dataclass
class ShrinkResult:
    case: Case
    original: Case
    steps: list[str] = field(default_factory=list)  # "hypothesis", then the reduction pass of each step
    runs: int = 0
    seconds: float = 0.0
    exhausted: bool = False  # the budget ran out before a fixed point
    verdict: str = ""  # the shrunk case's verdict: the goal's, or its one-sided form (NOTE [one-sided errors])


class Shrinker:
    """Shrink cases for one goal. ``progress(stage, runs, best)`` is called after every new run."""

    def __init__(
        self,
        goal: Goal,
        run: Runner,
        *,
        budget: int = DEFAULT_BUDGET,
        progress: Callable[[str, int, Case], None] | None = None,
    ) -> None:
        self.goal = goal
        self._run = run
        self.budget = budget
        self.progress = progress
        self.runs = 0
        self._cache: dict[Case, tuple[str, str]] = {}
        self._same: dict[tuple[Case, bool], bool] = {}
        self.stage = "check"
        self.best: Case | None = None
        self._limit = budget  # runs allowed until the end of the current stage

    def _outcome(self, case: Case) -> tuple[str, str]:
        hit = self._cache.get(case)
        if hit is None:
            if self.runs >= self._limit:
                raise _OutOfBudget
            self.runs += 1
            hit = self._cache[case] = self._run(case)
            if self.progress is not None and self.best is not None:
                self.progress(self.stage, self.runs, self.best)
        return hit

    def same_bug(self, case: Case, *, full: bool = True) -> bool:
        """True when ``case`` shows the goal's bug (see NOTE [shrinking]); False past the budget. Without
        ``full``, other features becoming essential is not checked."""
        key = (case, full)
        known = self._same.get(key)
        if known is not None:
            return known
        try:
            result = self._check(case, full)
        except _OutOfBudget:
            return False
        self._same[key] = result
        return result

    def _check(self, case: Case, full: bool) -> bool:
        g = self.goal
        verdict, fingerprint = self._outcome(case)
        if fingerprint != g.fingerprint or verdict not in (g.verdict, *ONE_SIDED.get(g.verdict, ())):
            return False
        tags = features(case)
        if not set(g.features) <= set(tags):
            return False
        needed = oracle_kind(g.oracle).needs_tags  # essential by definition (the oracle's own tags)
        for tag in g.features if not full else sorted(tags, key=lambda t: t not in g.features):
            if tag in needed:
                continue
            variant = without(case, tag)
            agrees = variant is not None and self._outcome(variant)[0] == "consistent"
            if agrees != (tag in g.features):
                return False
        return True

    def _adopt(self, case: Case) -> None:
        """NOTE [one-sided errors]: a taken case whose verdict is the goal's one-sided form narrows the goal."""
        verdict = self._cache[case][0] if case in self._cache else self.goal.verdict
        if verdict != self.goal.verdict and verdict in ONE_SIDED.get(self.goal.verdict, ()):
            self.goal = replace(self.goal, verdict=verdict)
            self._same.clear()  # answers under the wider goal

    # ------------------------------------------------------------------------------------ stages

    def hypothesis_stage(self, strategy: st.SearchStrategy[Case], buffer: bytes) -> Case | None:
        """Stage 1: the smallest case (by :func:`fuzzer.triage.reduce.size`) Hypothesis's shrinker reached from
        ``buffer`` that still shows the bug; None if the buffer does not reproduce it."""
        self.stage = "hypothesis"
        self._limit = min(self.budget, self.runs + max(1, min(HYPOTHESIS_RUNS, self.budget // 3)))
        found: list[Case] = []

        @campaign_settings(  # NOTE [hypothesis settings]
            database=InMemoryExampleDatabase(),
            phases=(Phase.reuse, Phase.shrink),
            report_multiple_bugs=False,
        )
        @seed(0)
        @given(strategy)
        def test(case: Case) -> None:
            if self.same_bug(case, full=False):
                if self.best is None or size(case) < size(self.best):
                    self.best = case
                found.append(case)
                raise _SameBug

        try:
            test.hypothesis.fuzz_one_input(buffer)
        except _SameBug:
            pass
        if not found:
            return None
        try:
            test()
        except Exception:  # noqa: BLE001 (_SameBug, or Hypothesis's Flaky when the budget ran out)
            pass
        finally:
            self._limit = self.budget
        return min(found, key=size)

    def reduce_stage(
        self, case: Case, steps: list[str], *, full: bool = False, chain: list[Case] | None = None
    ) -> Case:
        """Stage 2: IR reductions to a fixed point (or until the budget is spent). Accepted cases are
        appended to ``chain``."""
        self.stage = "reduce"
        self._limit = self.budget
        self.best = case
        progress = True
        while progress and self.runs < self.budget:  # NOTE [reduction sweeps]
            progress = False
            i = 0
            while i < len(PASSES) and self.runs < self.budget:
                taken = None
                for name, candidate in candidates(case, PASSES[i : i + 1]):
                    if self.same_bug(candidate, full=full):
                        taken = name, candidate
                        break
                    if self.runs >= self.budget:
                        break
                if taken is None:
                    i += 1  # this pass is done with this case: the next one
                    continue
                name, case = taken
                self._adopt(case)
                self.best = case
                steps.append(name)
                if chain is not None:
                    chain.append(case)
                progress = True
        return case

    def _confirm(self, chain: list[Case], steps: list[str]) -> Case:
        """The newest case of ``chain`` (oldest first; ``chain[0]`` is the original, correct by
        definition) that passes the full check; if that is not the last one, the walk goes on from it
        with full checks. The final check may spend a little past the budget (a run per feature)."""
        self.stage = "confirm"
        for i in range(len(chain) - 1, 0, -1):
            self._limit = self.runs + len(features(chain[i])) + 1
            if self.same_bug(chain[i], full=True):
                if i == len(chain) - 1:
                    return chain[i]
                del steps[i:]
                return self.reduce_stage(chain[i], steps, full=True)
        del steps[:]
        return self.reduce_stage(chain[0], steps, full=True)

    def shrink(
        self, case: Case, *, strategy: st.SearchStrategy[Case] | None = None, buffer: bytes | None = None
    ) -> ShrinkResult:
        start = time.monotonic()
        verdict = self.goal.verdict  # the original's (the goal was taken from it)
        self.best = case
        steps: list[str] = []
        chain = [case]
        self._same[(case, True)] = True  # the goal was taken from it
        if strategy is not None and buffer is not None:
            smaller = self.hypothesis_stage(strategy, buffer)
            if smaller is not None and size(smaller) < size(case):
                self._adopt(smaller)
                chain.append(smaller)
                steps.append("hypothesis")
        self.reduce_stage(chain[-1], steps, chain=chain)
        current = self._confirm(chain, steps)
        return ShrinkResult(
            case=current,
            original=case,
            steps=steps,
            runs=self.runs,
            seconds=time.monotonic() - start,
            exhausted=self.runs >= self.budget,
            verdict=self._cache[current][0] if current in self._cache and current != case else verdict,
        )


def case_runner(oracle: str, *, timeout: float | None = 60.0, subject: str = "torch") -> Runner:
    """A :data:`Runner` over the real thing: the judge (:mod:`fuzzer.judge.judge`)."""
    from ..judge.judge import Judge

    judge = Judge(timeout=timeout, subject=subject)

    def run(case: Case) -> tuple[str, str]:
        j = judge(case, oracle)
        return j.verdict, j.fingerprint

    return run


def goal_of(case: Case, oracle: str, run: Runner) -> Goal:
    """The goal that shrinking ``case`` keeps: its verdict, error fingerprint and essential features."""
    from .signature import signature

    verdict, fp = run(case)
    return Goal(verdict, oracle, signature(case, verdict, lambda c: run(c)[0], oracle=oracle).features, fp)
