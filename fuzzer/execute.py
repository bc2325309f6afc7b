"""Execute a case: render it, exec the script in a fresh namespace, and call its ``check()``.

NOTE [the repro is what runs]
The fuzzer never evaluates a case any other way: the verdict comes from the rendered script's own
``check()``, run from the rendered source. A repro file written later is that same source (plus
comments), so a finding cannot depend on affuzz code that the repro lacks. Before a finding is reported
the file is additionally run in a fresh interpreter (:mod:`fuzzer.findings`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

from .case import Case
from .oracles import MAIN
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
    start = time.perf_counter()
    with warnings.catch_warnings():
        # torch's own deprecation and tracing warnings (e.g. linearize's make_fx) would flood a campaign
        warnings.simplefilter("ignore")
        exec(code, ns)  # noqa: S102 (rendered from the closed IR vocabulary only)
        verdict, fc, ref = ns["check"]()
    return Outcome(verdict, _side(fc), _side(ref), time.perf_counter() - start)


def run_case(case: Case, oracle: str = MAIN) -> Outcome:
    return run_source(render(case, oracle=oracle))


TRIAGE_LABELS = ("functorch_wrong", "reference_wrong", "both_wrong", "undetermined")


def triage_source(source: str, name: str = "<affuzz triage>") -> tuple[str, str]:
    """Run a rendered repro's ``check()`` then its finite-difference ``triage()``: (label, detail).

    Only meaningful for a value_mismatch; the label is one of :data:`TRIAGE_LABELS`.
    """
    ns: dict[str, Any] = {"__name__": "affuzz_case"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, name, "exec"), ns)  # noqa: S102
        verdict, fc, ref = ns["check"]()
        if verdict != "value_mismatch":
            return "undetermined", f"the case gave {verdict} when re-run"
        return ns["triage"](fc[0], ref[0])
