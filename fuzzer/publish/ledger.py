"""``OUT/filed.json``, the ledger of ``affuzz file``: what was filed where and what was skipped, versioned JSON
written atomically after every issue, so a run interrupted half-way never files one twice (NOTE
[filing] in :mod:`fuzzer.publish.filing`).
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError
from ..ir.files import atomic_write_json

LEDGER = "filed.json"
LEDGER_SCHEMA_VERSION = 1


class FilingError(AffuzzError):
    """Something stopped filing (a bad ledger or draft, a gh call that failed): one line, exit 2. What was
    filed before it is in the ledger."""


def ledger_path(out: Path) -> Path:
    return out / LEDGER


def load_ledger(out: Path) -> list[dict[str, Any]]:
    """The ``filed`` records of ``OUT/filed.json`` ([] when there is none)."""
    return list(_read_ledger(out)["filed"])


def load_skipped(out: Path) -> list[dict[str, Any]]:
    """The ``skipped`` records of ``OUT/filed.json``: per bucket and repository, why the last ``--yes`` run
    skipped it ([] when there is none)."""
    return list(_read_ledger(out).get("skipped") or [])


def _read_ledger(out: Path) -> dict[str, Any]:
    path = ledger_path(out)
    if not path.exists():
        return {"schema_version": LEDGER_SCHEMA_VERSION, "filed": [], "skipped": []}
    problem = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        data, problem = None, str(e)
    if problem is None:
        if not isinstance(data, dict) or not isinstance(data.get("filed"), list):
            problem = "not {schema_version, filed: [...]}"
        elif data.get("schema_version") != LEDGER_SCHEMA_VERSION:
            problem = f"unsupported schema_version {data.get('schema_version')!r} (this affuzz reads 1)"
        elif not all(isinstance(r, dict) and {"bucket", "repo", "url"} <= set(r) for r in data["filed"]):
            problem = "a record lacks bucket, repo or url"
        elif not isinstance(data.get("skipped", []), list) or not all(
            isinstance(r, dict) and {"bucket", "repo", "reason"} <= set(r) for r in data.get("skipped", [])
        ):
            problem = "a skipped record lacks bucket, repo or reason"
    if problem is not None:
        raise FilingError(f"{path}: cannot be read ({problem}); it records what was filed: fix it, don't delete it")
    return data


def _write_ledger(out: Path, filed: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> None:
    data: dict[str, Any] = {"schema_version": LEDGER_SCHEMA_VERSION, "filed": filed}
    if skipped:
        data["skipped"] = skipped
    atomic_write_json(ledger_path(out), data)


def _others(records: list[dict[str, Any]], bucket: str, repo: str) -> list[dict[str, Any]]:
    return [r for r in records if (r.get("bucket"), r.get("repo")) != (bucket, repo)]


def record_filed(out: Path, record: dict[str, Any]) -> None:
    """Add a filed issue to the ledger (and drop the bucket's skipped record for that repository)."""
    data = _read_ledger(out)
    skipped = _others(list(data.get("skipped") or []), record["bucket"], record["repo"])
    _write_ledger(out, [*data["filed"], record], skipped)


def record_skipped(out: Path, record: dict[str, Any]) -> None:
    """Record why a ``--yes`` run skipped a bucket (replacing what an earlier run recorded for it)."""
    data = _read_ledger(out)
    skipped = _others(list(data.get("skipped") or []), record["bucket"], record["repo"])
    _write_ledger(out, list(data["filed"]), [*skipped, record])


# ---------------------------------------------------------------------------------------------- the plan


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
