"""A campaign's OUT directory read back as plain data, finished or still running: what ``affuzz report``,
the HTML report, the issue drafts and ``affuzz file`` work from.

A finished campaign has ``summary.json``; a running one has ``stats.json`` (rewritten every few seconds)
and ``state.json`` (every bucket so far). Verified buckets have ``findings/<id>/`` (``finding.json``,
``repro.py``, ``case.json``). Every file is written atomically, so reading while a campaign runs sees
whole files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError
from .findings import bucket_from_json, bucket_row


class RunDataError(AffuzzError, ValueError):
    pass


@dataclass
class BucketData:
    """One bucket as ``summary.json`` lists it, plus its published files when it was verified."""

    summary: dict[str, Any]  # id, signature, verdict, oracle, transforms, features, signature_features, hits, ...
    record: dict[str, Any] | None = None  # findings/<id>/finding.json
    repro: str | None = None  # findings/<id>/repro.py
    path: Path | None = None  # findings/<id>/

    @property
    def id(self) -> str:
        return str(self.summary["id"])

    @property
    def verified(self) -> bool:
        return self.status == "verified" and self.record is not None

    @property
    def unshrunk(self) -> str | None:
        """Why the campaign published it without shrinking it (None: it was shrunk)."""
        why = ((self.record or {}).get("shrink") or {}).get("skipped")
        return str(why) if why else None

    # typed views of the summary's fields (what the publish layer reads)
    @property
    def verdict(self) -> str:
        return str(self.summary["verdict"])

    @property
    def oracle(self) -> str:
        return str(self.summary["oracle"])

    @property
    def status(self) -> str | None:
        return self.summary.get("status")

    @property
    def signature_text(self) -> str:
        return str(self.summary.get("signature", ""))

    @property
    def transforms(self) -> tuple[str, ...]:
        """The stack's transform names, outermost first."""
        return tuple(self.summary.get("transforms") or ())

    @property
    def features(self) -> tuple[str, ...]:
        """The published case's features, essential or not."""
        return tuple(self.summary.get("features") or ())

    @property
    def signature_features(self) -> tuple[str, ...]:
        """The features essential to the bug (NOTE [signatures])."""
        return tuple(self.summary.get("signature_features") or ())

    @property
    def stacks(self) -> dict[str, int]:
        """Every ``oracle: stack`` the bucket was hit under, with its hits."""
        return dict(self.summary.get("stacks") or {})

    @property
    def compile(self) -> dict[str, Any] | None:
        """NOTE [compiled mode]: how its repro calls torch.compile (summary, else finding.json)."""
        return self.summary.get("compile") or (self.record or {}).get("compile")

    @property
    def triage(self) -> str | None:
        """The finite-difference triage label (summary, else finding.json)."""
        return self.summary.get("triage") or (self.record or {}).get("triage")


@dataclass
class RunData:
    out: Path
    numbers: dict[str, Any]  # summary.json when finished, else stats.json
    finished: bool
    buckets: list[BucketData] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise RunDataError(f"{path}: cannot be read ({e}); is it an affuzz run's OUT directory?") from None


def load_run(out: Path) -> RunData:
    """Read OUT (raises :class:`RunDataError`, one line, when it is not a campaign's directory)."""
    if (out / "summary.json").exists():
        numbers, finished = _json(out / "summary.json"), True
        buckets = list(numbers.get("buckets", []))
    elif (out / "stats.json").exists():
        numbers, finished = _json(out / "stats.json"), False
        state = _json(out / "state.json") if (out / "state.json").exists() else {"buckets": []}
        buckets = [bucket_row(bucket_from_json(d, out), out, {}) for d in state.get("buckets", [])]
    else:
        raise RunDataError(f"{out}: no summary.json or stats.json; pass the OUT directory of an affuzz run")
    run = RunData(out=out, numbers=numbers, finished=finished)
    for b in buckets:
        data = BucketData(summary=b)
        d = out / "findings" / b["id"]
        if (d / "finding.json").exists():
            data.record, data.path = _json(d / "finding.json"), d
            data.repro = (d / "repro.py").read_text(encoding="utf-8") if (d / "repro.py").exists() else None
        run.buckets.append(data)
    events = out / "events.jsonl"
    if events.exists():
        for line in events.read_text(encoding="utf-8").splitlines():
            try:
                run.events.append(json.loads(line))
            except ValueError:
                continue  # a line being written
    return run
