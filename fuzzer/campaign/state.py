"""A campaign's resumable state, ``OUT/state.json``, and the JSON forms of what it holds.

NOTE [resume]
The driver rewrites ``OUT/state.json`` atomically (every couple of seconds while something changed,
and at the end): the configuration, the counters, the coverage, every bucket with its first and
published finding, the signature memos, each worker slot's next stream position (NOTE [worker
streams]) and the shrink jobs still queued. ``affuzz run --resume OUT`` loads it and goes on: the same
buckets, counters and coverage, each slot continuing its stream. What happened after the last save
is redone, not lost: the cases run since then are drawn again from the same positions (so a resumed
campaign counts them once), a finding whose directory reached ``OUT/findings/`` after the last save is
taken back from its ``finding.json``, and a bucket whose verification had not finished is verified
again. Because every file is replaced atomically and ``events.jsonl`` is appended one whole line per
write, ``kill -9`` of the driver at any moment leaves no truncated file.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError
from ..ir.serde import case_from_json, case_to_json
from ..judge.execute import Outcome, Side
from ..publish.findings import Finding
from ..triage.shrink import Goal
from ..triage.signature import Signature

STATE_SCHEMA_VERSION = 1


class StateError(AffuzzError, ValueError):
    """state.json cannot be used to resume (the message names the file and what to do)."""


def signature_to_json(s: Signature) -> dict[str, Any]:
    return {
        "verdict": s.verdict,
        "oracle": s.oracle,
        "skeleton": list(s.skeleton),
        "features": list(s.features),
        "error": s.error,
    }


def signature_from_json(d: dict[str, Any]) -> Signature:
    return Signature(d["verdict"], d["oracle"], tuple(d["skeleton"]), tuple(d["features"]), d.get("error", ""))


def goal_to_json(g: Goal) -> dict[str, Any]:
    return {"verdict": g.verdict, "oracle": g.oracle, "features": list(g.features), "fingerprint": g.fingerprint}


def goal_from_json(d: dict[str, Any]) -> Goal:
    return Goal(d["verdict"], d["oracle"], tuple(d["features"]), d.get("fingerprint", ""))


def outcome_to_json(o: Outcome) -> dict[str, Any]:
    return {
        "verdict": o.verdict,
        "functorch": asdict(o.functorch),
        "reference": asdict(o.reference),
        "seconds": o.seconds,
    }


def outcome_from_json(d: dict[str, Any]) -> Outcome:
    return Outcome(d["verdict"], Side(**d["functorch"]), Side(**d["reference"]), float(d["seconds"]))


def finding_to_json(f: Finding) -> dict[str, Any]:
    return {
        "case": case_to_json(f.case),
        "signature": signature_to_json(f.signature),
        "features": list(f.features),
        "outcome": outcome_to_json(f.outcome),
        "seconds_to_find": f.seconds_to_find,
        "cases_to_find": f.cases_to_find,
        "torch_version": f.torch_version,
        "found_by": f.found_by,
        "original": case_to_json(f.original) if f.original is not None else None,
        "shrink": f.shrink,
        "extra": f.extra,
    }


def finding_from_json(d: dict[str, Any]) -> Finding:
    return Finding(
        case=case_from_json(d["case"]),
        signature=signature_from_json(d["signature"]),
        features=tuple(d["features"]),
        outcome=outcome_from_json(d["outcome"]),
        seconds_to_find=float(d["seconds_to_find"]),
        cases_to_find=int(d["cases_to_find"]),
        torch_version=d["torch_version"],
        found_by=d["found_by"],
        original=case_from_json(d["original"]) if d.get("original") else None,
        shrink=dict(d.get("shrink") or {}),
        extra=dict(d.get("extra") or {}),
    )


def finding_from_dir(d: Path) -> Finding:
    """A published finding directory (``finding.json`` + ``case.json``) as a :class:`Finding`."""
    record = json.loads((d / "finding.json").read_text(encoding="utf-8"))
    case = case_from_json(json.loads((d / "case.json").read_text(encoding="utf-8")))
    original = d / "original.json"
    verdict = record["verdict"]
    skeleton = tuple(record["transforms"])
    known = {
        "schema_version",
        "signature",
        "id",
        "verdict",
        "oracle",
        "transforms",
        "features",
        "signature_features",
        "torch_version",
        "python_version",
        "seconds_to_find",
        "cases_to_find",
        "found_by",
        "functorch",
        "reference",
        "verification",
        "shrink",
        "error",
    }
    return Finding(
        case=case,
        signature=Signature(
            verdict, record["oracle"], skeleton, tuple(record["signature_features"]), record.get("error", "")
        ),
        features=tuple(record["features"]),
        outcome=Outcome(verdict, Side(record["functorch"], None, None), Side(record["reference"], None, None), 0.0),
        seconds_to_find=float(record["seconds_to_find"]),
        cases_to_find=int(record["cases_to_find"]),
        torch_version=record["torch_version"],
        found_by=record["found_by"],
        original=case_from_json(json.loads(original.read_text(encoding="utf-8"))) if original.exists() else None,
        shrink=dict(record.get("shrink") or {}),
        extra={k: v for k, v in record.items() if k not in known},
    )


def load_state(out: Path) -> dict[str, Any]:
    path = out / "state.json"
    if not path.exists():
        raise StateError(f"{path}: no such file; --resume needs the OUT directory of an earlier affuzz run")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise StateError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); it cannot be resumed") from None
    if not isinstance(state, dict) or state.get("schema_version") != STATE_SCHEMA_VERSION:
        version = state.get("schema_version") if isinstance(state, dict) else None
        raise StateError(
            f"{path}: state schema version {version!r}, this affuzz reads {STATE_SCHEMA_VERSION}; "
            "resume it with the affuzz that wrote it"
        )
    return state
