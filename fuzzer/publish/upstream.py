"""Known upstream issues: a small checked-in table (``known_issues.json``) from what a bucket shows to the
PyTorch issue that already reports it. A bucket that matches gets "known: #N" instead of an issue draft,
and is never filed again.

An entry's ``match`` holds any of: ``fingerprint`` (a regex searched in the bucket's signature text, which
for an error is its fingerprint), ``verdict``, ``oracle``, ``features`` (all of them among the bucket's
essential features) and ``ids`` (bucket ids). Every key present must hold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError

DEFAULT_TABLE = Path(__file__).with_name("known_issues.json")


class KnownIssuesError(AffuzzError, ValueError):
    pass


@dataclass(frozen=True)
class KnownIssue:
    issue: str  # its URL
    number: int
    summary: str  # what the issue is about, in our words (not its title)
    match: dict[str, Any]
    note: str = ""

    def matches(self, *, signature: str, verdict: str, oracle: str, features: tuple[str, ...], bucket_id: str) -> bool:
        m = self.match
        if "fingerprint" in m and not re.search(m["fingerprint"], signature):
            return False
        if "verdict" in m and m["verdict"] != verdict:
            return False
        if "oracle" in m and m["oracle"] != oracle:
            return False
        if "features" in m and not set(m["features"]) <= set(features):
            return False
        return not ("ids" in m and bucket_id not in m["ids"])


def load_known_issues(path: Path = DEFAULT_TABLE) -> tuple[KnownIssue, ...]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple(KnownIssue(**entry) for entry in data["issues"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise KnownIssuesError(f"{path}: cannot be read as a known-issues table ({e}); fix or restore it") from None


def known_issue(bucket: dict[str, Any], table: tuple[KnownIssue, ...] | None = None) -> KnownIssue | None:
    """The known upstream issue of a bucket (a ``summary.json`` bucket: id, signature, verdict, oracle,
    signature_features), or None."""
    for entry in load_known_issues() if table is None else table:
        if entry.matches(
            signature=bucket["signature"],
            verdict=bucket["verdict"],
            oracle=bucket["oracle"],
            features=tuple(bucket.get("signature_features") or ()),
            bucket_id=bucket["id"],
        ):
            return entry
    return None
