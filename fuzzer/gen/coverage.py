"""Where a campaign has looked: feature tag x transform cells, transform skeletons, and steering.

NOTE [coverage cells]
A case *covers* the cell (feature, transform) for every feature tag it exercises
(:func:`fuzzer.ir.features.features`) and every transform in its stack: ``saved_output x vmap`` is covered
by a case whose Function saves an output and whose stack has a ``vmap`` level. The grid has
``len(ALL_FEATURES) x len(TRANSFORMS)`` cells; some can never be covered (a legacy-style Function has
no ``setup_context``, forward AD never runs a custom ``vmap`` rule on its own...), so saturation is
reported as *cells covered* and as *the least-covered cell's count*, and a campaign is saturated when
no new cell has appeared for a long stretch of cases (like AFL's "cycles done" turning green). The grid
fills within the first minute; the finer measure is the distinct transform skeletons (``grad>vmap``,
hundreds), counted beside it with the cases since the last new one.

NOTE [steering]
Generation is steered toward the cells seen least by rejection: a drawn case is run with probability
``p = (r + 1) / (c + 1)``, clamped to ``[min_accept, 1]``, where ``c`` is the count of the case's
least-covered cell and ``r`` the count of the cell at the ``rare_quantile`` of covered cells. A case
that touches a rare cell always runs; one made only of common cells runs at least half the time.
A rejected draw costs its decoding (under 1 ms for a case of a group, NOTE [case groups] in
:mod:`strategies.cases`, against ~7 ms for running a case), and the ``min_accept``
floor of 1/2 bounds that to one extra draw per case run on average; the decoding of a buffer into a case does not
change: a buffer (and the shrinker fed with it) still gives the same case as without steering. The
decision uses a private ``random.Random`` and only the counts the worker started from plus what it ran
itself, so a worker's stream of cases is a function of ``--seed``, its slot and the counts it started
from (NOTE [worker streams] in
:mod:`fuzzer.gen.streams`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

Cell = tuple[str, str]


def cells(tags: Iterable[str], transforms: Iterable[str]) -> set[Cell]:
    """The (feature, transform) cells a case with these feature tags and transforms covers."""
    ts = set(transforms)
    return {(f, t) for f in tags for t in ts}


class Coverage:
    """Counts per cell and per skeleton; JSON round-trips for ``state.json``."""

    def __init__(self) -> None:
        self.cells: Counter[Cell] = Counter()
        self.skeletons: Counter[str] = Counter()
        self.cases = 0
        self.last_new_cell_case = 0
        self.last_new_skeleton_case = 0

    def add(self, tags: Iterable[str], transforms: Iterable[str]) -> set[Cell]:
        """Count one case; returns the cells it covered for the first time."""
        transforms = tuple(transforms)
        covered = cells(tags, transforms)
        new = {c for c in covered if c not in self.cells}
        self.cells.update(covered)
        stack = ">".join(transforms)
        self.cases += 1
        if stack not in self.skeletons:
            self.last_new_skeleton_case = self.cases
        self.skeletons[stack] += 1
        if new:
            self.last_new_cell_case = self.cases
        return new

    def merge(self, other: Coverage) -> None:
        self.cells.update(other.cells)
        self.skeletons.update(other.skeletons)
        self.cases += other.cases

    def saturation(self, features: Iterable[str], transforms: Iterable[str]) -> dict[str, Any]:
        possible = len(list(features)) * len(list(transforms))
        counts = sorted(self.cells.values())
        return {
            "cells_covered": len(self.cells),
            "cells_possible": possible,
            "least_covered_cell": min(self.cells, key=lambda c: (self.cells[c], c), default=None),
            "least_covered_count": counts[0] if counts else 0,
            "median_cell_count": counts[len(counts) // 2] if counts else 0,
            "skeletons": len(self.skeletons),
            "cases_since_new_cell": self.cases - self.last_new_cell_case,
            "cases_since_new_skeleton": self.cases - self.last_new_skeleton_case,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [[f, t, n] for (f, t), n in sorted(self.cells.items())],
            "skeletons": dict(sorted(self.skeletons.items())),
            "cases": self.cases,
            "last_new_cell_case": self.last_new_cell_case,
            "last_new_skeleton_case": self.last_new_skeleton_case,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        cov = cls()
        cov.cells = Counter({(f, t): int(n) for f, t, n in data.get("cells", [])})
        cov.skeletons = Counter({str(k): int(v) for k, v in data.get("skeletons", {}).items()})
        cov.cases = int(data.get("cases", 0))
        cov.last_new_cell_case = int(data.get("last_new_cell_case", 0))
        cov.last_new_skeleton_case = int(data.get("last_new_skeleton_case", 0))
        return cov


class Steering:
    """NOTE [steering]: accept or skip a drawn case by the rarity of the cells it covers."""

    def __init__(
        self,
        coverage: Coverage,
        *,
        seed: str,
        min_accept: float = 0.5,
        rare_quantile: float = 0.1,
        warmup: int = 200,
    ) -> None:
        if not 0.0 < min_accept <= 1.0:
            raise ValueError(f"min_accept must be in (0, 1], not {min_accept!r}")
        if not 0.0 <= rare_quantile <= 1.0:
            raise ValueError(f"rare_quantile must be in [0, 1], not {rare_quantile!r}")
        self.coverage = coverage
        self.min_accept = min_accept
        self.rare_quantile = rare_quantile
        self.warmup = warmup
        self._rng = random.Random(f"steer:{seed}")
        self._rare = 0
        self._since_refresh = 10**9

    def _rare_count(self) -> int:
        self._since_refresh += 1
        if self._since_refresh >= 50:  # a quantile over ~200 cells; refreshed every 50 decisions
            self._since_refresh = 0
            counts = sorted(self.coverage.cells.values())
            self._rare = counts[int(self.rare_quantile * (len(counts) - 1))] if counts else 0
        return self._rare

    def probability(self, tags: Iterable[str], transforms: Iterable[str]) -> float:
        if self.coverage.cases < self.warmup:
            return 1.0
        covered = cells(tags, transforms)
        if not covered:
            return 1.0
        least = min(self.coverage.cells.get(c, 0) for c in covered)
        return max(self.min_accept, min(1.0, (self._rare_count() + 1) / (least + 1)))

    def accept(self, tags: Iterable[str], transforms: Iterable[str]) -> bool:
        p = self.probability(tags, transforms)
        return p >= 1.0 or self._rng.random() < p
