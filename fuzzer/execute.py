"""Execute a case: render it, exec the script in a fresh namespace, and call its ``check()``.

NOTE [the repro is what runs]
The fuzzer never evaluates a case any other way: the verdict comes from the rendered script's own
``check()``, run from the rendered source. A repro file written later is that same source (plus
comments), so a finding cannot depend on affuzz code that the repro lacks. Before a finding is reported
the file is additionally run in a fresh interpreter (:mod:`fuzzer.findings`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .case import Case
from .render import render


@dataclass(frozen=True)
class Side:
    """What one mode produced: a value summary, or the error it raised."""

    value: str | None
    error_type: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def summary(self, limit: int = 300) -> str:
        text = self.value if self.ok else f"{self.error_type}: {self.error}"
        text = text or ""
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Outcome:
    verdict: str  # the script's own verdict
    functorch: Side
    reference: Side
    seconds: float


def _side(result: tuple[Any, BaseException | None]) -> Side:
    value, err = result
    if err is not None:
        msg = str(err).strip().splitlines()
        return Side(None, type(err).__name__, msg[0] if msg else "")
    return Side(str(value), None, None)


def run_source(source: str, name: str = "<affuzz case>") -> Outcome:
    """Exec ``source`` (a rendered repro) in a fresh namespace and run its ``check()``."""
    code = compile(source, name, "exec")
    ns: dict[str, Any] = {"__name__": "affuzz_case"}
    exec(code, ns)  # noqa: S102 (rendered from the closed IR vocabulary only)
    start = time.perf_counter()
    verdict, fc, ref = ns["check"]()
    return Outcome(verdict, _side(fc), _side(ref), time.perf_counter() - start)


def run_case(case: Case) -> Outcome:
    return run_source(render(case))
