"""Bisect torch releases for the first one where a case's verdict changes.

Each probed release gets ``.venvs/torch-X.Y.Z`` through the same mechanism as ``make torch-venv``
(:func:`fuzzer.history.torchenv.ensure`: created once, reused after) and is evaluated by a replay worker (NOTE
[replay workers]); the release this interpreter runs is evaluated in process. Binary search assumes
the verdict changes once between the two ends (a fix, or a regression); it probes about log2(n)
releases and reports the first one whose verdict differs from the first release's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.case import Case
from ..ir.errors import AffuzzError
from .corpus import version_tuple

Evaluate = Callable[[str], tuple[str, str]]  # release -> (verdict, detail)


class BisectError(AffuzzError, ValueError):
    pass


def released_versions(low: str, high: str, *, python: str = sys.executable, timeout: float = 120.0) -> list[str]:
    """Final torch releases from ``low`` to ``high`` (inclusive), oldest first, as the package index
    lists them (``pip index versions torch``)."""
    try:
        proc = subprocess.run(
            [python, "-m", "pip", "index", "versions", "torch", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise BisectError(
            f"cannot list torch releases with pip (no answer in {timeout:.0f} s); pass --versions"
        ) from None
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise BisectError(
            f"cannot list torch releases with pip ({(proc.stderr or proc.stdout).strip()[-200:]}); pass --versions"
        )
    found = {v.strip() for v in m.group(1).split(",") if re.fullmatch(r"\d+\.\d+\.\d+", v.strip())}
    lo, hi = version_tuple(low), version_tuple(high)
    return sorted((v for v in found if lo <= version_tuple(v) <= hi), key=version_tuple)


@dataclass
class BisectResult:
    versions: list[str]
    verdicts: dict[str, str] = field(default_factory=dict)  # every probed release
    first_changed: str | None = None  # None: the two ends agree

    @property
    def before(self) -> str | None:
        """The newest release searched before :attr:`first_changed` (its verdict is the first release's)."""
        if self.first_changed is None:
            return None
        return self.versions[self.versions.index(self.first_changed) - 1]

    def summary(self) -> str:
        first, last = self.versions[0], self.versions[-1]
        if self.first_changed is None:
            return f"no change: {self.verdicts[first]} on {first} and on {last}"
        before = self.before
        return (
            f"first release where the verdict changed: {self.first_changed} "
            f"({self.verdicts[before]} on {before} -> {self.verdicts[self.first_changed]} on {self.first_changed})"
        )


def bisect(versions: list[str], evaluate: Evaluate, *, log: Callable[[str], None] = lambda s: None) -> BisectResult:
    if len(versions) < 2:
        raise BisectError(f"need at least two releases to bisect, got {versions}")
    result = BisectResult(list(versions))

    def verdict(i: int) -> str:
        v = versions[i]
        if v not in result.verdicts:
            result.verdicts[v], detail = evaluate(v)
            detail = " ".join(detail.split())  # a tensor's repr spans lines: one line per release
            log(f"torch {v}: {result.verdicts[v]}" + (f" ({detail[:160]})" if detail else ""))
        return result.verdicts[v]

    lo, hi = 0, len(versions) - 1
    if verdict(lo) == verdict(hi):
        return result
    base = verdict(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if verdict(mid) == base:
            lo = mid
        else:
            hi = mid
    result.first_changed = versions[hi]
    return result


def unprobed(result: BisectResult, releases: list[str]) -> list[str]:
    """The ``releases`` strictly between the last release searched before the change and the first
    changed one: the change may be in any of them (``--versions`` skipped them)."""
    if result.first_changed is None or result.before is None:
        return []
    lo, hi = version_tuple(result.before), version_tuple(result.first_changed)
    return sorted((v for v in releases if lo < version_tuple(v) < hi), key=version_tuple)


def bisected_status(status: str, result: BisectResult) -> str | None:
    """The status ``affuzz bisect --update`` records for an entry whose status is ``status``: ``fixed-in
    X`` when the verdict turned ``consistent`` at X; None when it did not (no change, or another verdict),
    or when the entry's own ``fixed-in F`` already lies in the span the bisection narrowed the fix to
    (after :attr:`BisectResult.before`, up to X): a search over fewer releases cannot move it."""
    if result.first_changed is None or result.verdicts[result.first_changed] != "consistent":
        return None
    m = re.fullmatch(r"fixed-in (\d+\.\d+\.\d+)", status)
    if m and result.before is not None:
        if version_tuple(result.before) < version_tuple(m.group(1)) <= version_tuple(result.first_changed):
            return None
    return f"fixed-in {result.first_changed}"


def evaluator(case: Case, oracle: str, *, timeout: float = 60.0, log: Callable[[str], None] = print) -> Evaluate:
    """Evaluate ``case`` on a release: in process when this interpreter runs it, else in its venv."""
    import torch

    from . import torchenv
    from .replay import ChildInterpreter, ThisInterpreter

    def evaluate(version: str) -> tuple[str, str]:
        if version_tuple(torch.__version__) == version_tuple(version):
            return ThisInterpreter().evaluate(case, oracle, timeout)
        log(f"torch {version}: preparing {torchenv.venv_dir(version)} ...")
        python = torchenv.ensure(version, quiet=True)
        worker = ChildInterpreter(str(python))
        try:
            return worker.evaluate(case, oracle, timeout)
        finally:
            worker.close()

    return evaluate
