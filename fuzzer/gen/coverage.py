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

NOTE [cost-aware steering]
Cases differ in cost by two orders of magnitude: a ``linearize`` level traces with ``make_fx`` (40-200 ms),
most other cases take about 1 ms. Steering by case *counts* gives every cell the same number of cases,
so most of a core's time goes to the expensive transform. With ``by="time"`` (the campaign's default,
``affuzz run --steer-by``) the cells are weighed in *core seconds* instead: each case adds its measured
duration (the whole case: oracles, float64 re-checks, triage) to every cell it covers, and

    p = k * (r + u) / (c + u),   k = min(1, u / e),   clamped to [min_accept * k, 1]

where ``c`` is the seconds of the case's least-weighed cell, ``r`` the seconds of the cell at the
``rare_quantile``, ``u`` the mean seconds of a case so far, and ``e`` the expected cost of this case:
the mean seconds of the cases that had its most expensive transform. A case that covers a cell never
covered (``c = 0``) always runs, so the grid still fills. A case of average cost (``k = 1``) is steered
as before, by rarity, at least every second one running; an expensive one runs ``k`` times as often,
even where it touches a rare cell (a cheaper case will reach that cell too): skipping it saves more
than its draw costs. The price: which positions run now depends on measured time, so two campaigns of one
seed run the same cases only with ``by="cases"`` (a position still names the same case: resume, crash
attribution and shrinking are unaffected). ``Coverage.transform_share`` (summary.json's
``coverage.transform_share``) is the core-time share per transform, a case's seconds split evenly
between the distinct transforms of its stack.
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
        self.cell_seconds: Counter[Cell] = Counter()  # NOTE [cost-aware steering]
        self.transform_cases: Counter[str] = Counter()  # cases with the transform in their stack
        self.transform_seconds: Counter[str] = Counter()  # their whole seconds
        self.transform_core: Counter[str] = Counter()  # each case's seconds split between its transforms
        self.seconds = 0.0
        self.skeletons: Counter[str] = Counter()
        self.cases = 0
        self.last_new_cell_case = 0
        self.last_new_skeleton_case = 0

    def add(self, tags: Iterable[str], transforms: Iterable[str], seconds: float = 0.0) -> set[Cell]:
        """Count one case that took ``seconds``; returns the cells it covered for the first time."""
        transforms = tuple(transforms)
        covered = cells(tags, transforms)
        new = {c for c in covered if c not in self.cells}
        self.cells.update(covered)
        seconds = max(0.0, float(seconds))
        self.seconds += seconds
        for c in covered:
            self.cell_seconds[c] += seconds
        distinct = set(transforms)
        for t in distinct:
            self.transform_cases[t] += 1
            self.transform_seconds[t] += seconds
            self.transform_core[t] += seconds / len(distinct)
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
        self.cell_seconds.update(other.cell_seconds)
        self.transform_cases.update(other.transform_cases)
        self.transform_seconds.update(other.transform_seconds)
        self.transform_core.update(other.transform_core)
        self.seconds += other.seconds
        self.skeletons.update(other.skeletons)
        self.cases += other.cases

    def mean_seconds(self) -> float:
        """Mean seconds of a case so far (0.0 before any)."""
        return self.seconds / self.cases if self.cases else 0.0

    def expected_seconds(self, transforms: Iterable[str]) -> float:
        """The mean seconds of the cases that had the most expensive of ``transforms`` (a transform not
        seen yet counts as the mean case)."""
        mean = self.mean_seconds()
        return max(
            (
                self.transform_seconds[t] / self.transform_cases[t] if self.transform_cases[t] else mean
                for t in transforms
            ),
            default=mean,
        )

    def transform_share(self) -> dict[str, float]:
        """Share of the cases' core seconds per transform (NOTE [cost-aware steering]), summing to 1."""
        total = sum(self.transform_core.values())
        return {t: round(v / total, 4) for t, v in sorted(self.transform_core.items())} if total else {}

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
            "core_seconds": round(self.seconds, 3),
            "transform_share": self.transform_share(),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [[f, t, n] for (f, t), n in sorted(self.cells.items())],
            "cell_seconds": [[f, t, round(v, 6)] for (f, t), v in sorted(self.cell_seconds.items())],
            "transforms": {
                t: [self.transform_cases[t], round(self.transform_seconds[t], 6), round(self.transform_core[t], 6)]
                for t in sorted(self.transform_cases)
            },
            "seconds": round(self.seconds, 6),
            "skeletons": dict(sorted(self.skeletons.items())),
            "cases": self.cases,
            "last_new_cell_case": self.last_new_cell_case,
            "last_new_skeleton_case": self.last_new_skeleton_case,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        cov = cls()
        cov.cells = Counter({(f, t): int(n) for f, t, n in data.get("cells", [])})
        cov.cell_seconds = Counter({(f, t): float(v) for f, t, v in data.get("cell_seconds", [])})
        for t, (n, sec, core) in data.get("transforms", {}).items():  # absent in a state saved before
            cov.transform_cases[t], cov.transform_seconds[t], cov.transform_core[t] = int(n), float(sec), float(core)
        cov.seconds = float(data.get("seconds", 0.0))
        cov.skeletons = Counter({str(k): int(v) for k, v in data.get("skeletons", {}).items()})
        cov.cases = int(data.get("cases", 0))
        cov.last_new_cell_case = int(data.get("last_new_cell_case", 0))
        cov.last_new_skeleton_case = int(data.get("last_new_skeleton_case", 0))
        return cov


STEER_BY = ("time", "cases")


class Steering:
    """NOTE [steering]: accept or skip a drawn case by the rarity of the cells it covers, weighed in core
    seconds (``by="time"``, NOTE [cost-aware steering]) or in cases (``by="cases"``)."""

    def __init__(
        self,
        coverage: Coverage,
        *,
        seed: str,
        by: str = "time",
        min_accept: float = 0.5,
        rare_quantile: float = 0.1,
        warmup: int = 200,
    ) -> None:
        if by not in STEER_BY:
            raise ValueError(f"by must be one of {STEER_BY}, not {by!r}")
        if not 0.0 < min_accept <= 1.0:
            raise ValueError(f"min_accept must be in (0, 1], not {min_accept!r}")
        if not 0.0 <= rare_quantile <= 1.0:
            raise ValueError(f"rare_quantile must be in [0, 1], not {rare_quantile!r}")
        self.coverage = coverage
        self.by = by
        self.min_accept = min_accept
        self.rare_quantile = rare_quantile
        self.warmup = warmup
        self._rng = random.Random(f"steer:{seed}")
        self._rare: float = 0
        self._since_refresh = 10**9

    def _weights(self) -> Counter[Cell]:
        return self.coverage.cell_seconds if self.by == "time" else self.coverage.cells

    def _rare_count(self) -> float:
        self._since_refresh += 1
        if self._since_refresh >= 50:  # a quantile over ~200 cells; refreshed every 50 decisions
            self._since_refresh = 0
            counts = sorted(self._weights().values())
            self._rare = counts[int(self.rare_quantile * (len(counts) - 1))] if counts else 0
        return self._rare

    def probability(self, tags: Iterable[str], transforms: Iterable[str]) -> float:
        if self.coverage.cases < self.warmup:
            return 1.0
        covered = cells(tags, transforms)
        if not covered:
            return 1.0
        weights = self._weights()
        least = min(weights.get(c, 0) for c in covered)
        if self.by == "cases":
            return max(self.min_accept, min(1.0, (self._rare_count() + 1) / (least + 1)))
        if least == 0:  # a cell never covered always runs
            return 1.0
        cov = self.coverage  # NOTE [cost-aware steering]
        unit = cov.mean_seconds() or 1e-3
        cost = min(1.0, unit / max(cov.expected_seconds(transforms), 1e-9))
        return max(self.min_accept * cost, min(1.0, cost * (self._rare_count() + unit) / (least + unit)))

    def accept(self, tags: Iterable[str], transforms: Iterable[str]) -> bool:
        p = self.probability(tags, transforms)
        return p >= 1.0 or self._rng.random() < p
