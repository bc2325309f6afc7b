"""From the script's raw verdict to affuzz's verdict: the known-limitations registry.

The rendered script decides ``consistent`` / ``value_mismatch`` / ``error_functorch_only`` /
``error_reference_only`` / ``different_errors`` by itself (``torch.testing.assert_close`` tolerances for
the dtype; both sides raising the same exception type is consistent). Here, an error explained by a
documented limitation (``known_limitations.json``: name, regex on the message, mode, docs link,
upstream issue) turns a disagreement into ``expected``: counted, never reported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .execute import Outcome, Side

VERDICTS = (
    "consistent",
    "value_mismatch",
    "error_functorch_only",
    "error_reference_only",
    "different_errors",
    "hang",  # a side did not finish within the per-case timeout
    "slow",  # values agree, one side far slower (NOTE [slow findings] in fuzzer/render.py)
    "crash",  # the worker process died running the case (NOTE [campaign driver] in fuzzer/campaign.py)
)
#: Verdicts that are findings (``expected`` and ``consistent`` are not).
FINDING_VERDICTS = VERDICTS[1:]
ALL_VERDICTS = ("consistent", "expected", *FINDING_VERDICTS)
MODES = ("functorch", "reference", "both")
DEFAULT_REGISTRY = Path(__file__).with_name("known_limitations.json")


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class Limitation:
    name: str
    mode: str
    pattern: re.Pattern[str]
    docs: str
    issue: str | None = None

    def explains(self, side: Side, mode: str) -> bool:
        return (
            not side.ok
            and self.mode in (mode, "both")
            and self.pattern.search(f"{side.error_type}: {side.error}") is not None
        )


def load_registry(path: Path | str = DEFAULT_REGISTRY) -> tuple[Limitation, ...]:
    """Parse and check the registry; errors name the file and the entry."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise RegistryError(f"{path}: cannot read known limitations ({e})") from None
    if not isinstance(data, dict) or data.get("schema_version") != 1 or not isinstance(data.get("limitations"), list):
        raise RegistryError(f"{path}: expected {{'schema_version': 1, 'limitations': [...]}}")
    out = []
    for i, e in enumerate(data["limitations"]):
        where = f"{path}: limitations[{i}]"
        if not isinstance(e, dict) or not {"name", "mode", "pattern", "docs"} <= set(e):
            raise RegistryError(f"{where}: needs name, mode, pattern and docs")
        if e["mode"] not in MODES:
            raise RegistryError(f"{where}: mode {e['mode']!r} is not one of {', '.join(MODES)}")
        try:
            pattern = re.compile(e["pattern"])
        except re.error as err:
            raise RegistryError(f"{where}: bad pattern ({err})") from None
        out.append(Limitation(e["name"], e["mode"], pattern, e["docs"], e.get("issue")))
    return tuple(out)


def classify(outcome: Outcome, registry: tuple[Limitation, ...]) -> tuple[str, str | None]:
    """(verdict, name of the limitation that explains it or None)."""
    v = outcome.verdict
    if v in ("consistent", "value_mismatch", "hang", "slow"):
        return v, None
    blamed = []
    if not outcome.functorch.ok:
        blamed.append((outcome.functorch, "functorch"))
    if not outcome.reference.ok:
        blamed.append((outcome.reference, "reference"))
    # One explained error is enough: a side that refuses the case by design makes the comparison moot,
    # whatever the other side did.
    names = [lim.name for side, mode in blamed for lim in registry if lim.explains(side, mode)]
    if not names:
        return v, None
    return "expected", "+".join(dict.fromkeys(names))
