"""A corpus entry's ``repro.py`` in the current published style, rendered from a replay that shows its bug.

NOTE [corpus repros]
A corpus repro is written the way a campaign publishes a finding (NOTE [repro styles], NOTE [the repro
shows the bucket]) and, like a finding, only after it reproduced in a fresh process: under the
interpreter whose torch showed the entry's recorded disagreement in the replay (the entry's own verdict,
and for an error entry the same fingerprint its signature names). ``affuzz replay --update`` does it for
every entry whose bug one of the replayed torches shows, with the newest such torch; an entry whose bug no
replayed torch shows (fixed everywhere it was replayed) keeps the repro it has, which showed the bug on
the torch it was found on. A re-rendered repro that does not reproduce is not written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..ir.files import atomic_write_text
from ..judge.execute import Outcome
from ..publish.findings import Finding
from ..publish.verify import stage, verify_and_publish
from ..triage.signature import Signature, compile_key
from .corpus import Entry, version_tuple
from .replay import ReplayResult


def entry_finding(entry: Entry, result: ReplayResult) -> Finding | None:
    """The entry as a :class:`Finding` on the torch of a replay ``result``; None when that replay is not
    the entry's recorded bug: another verdict, or an error signature with another fingerprint (an entry
    recorded before signatures were error-keyed is matched by verdict and oracle)."""
    meta = entry.meta
    verdict = meta.get("verdict")
    if not verdict or result.verdict != verdict or result.outcome is None:
        return None
    sig = Signature(
        verdict,
        entry.oracle,
        tuple(meta.get("transforms") or ()),
        tuple(meta.get("essential_features") or ()),
        result.fingerprint,
        compile_key(entry.case, entry.oracle),
    )
    recorded = str(meta.get("signature") or "")
    if recorded != sig.text and recorded.split("|")[1:2] != [entry.oracle]:
        return None
    return Finding(
        case=entry.case,
        signature=sig,
        features=sig.features,
        outcome=Outcome.from_json(result.outcome),
        seconds_to_find=0.0,
        cases_to_find=0,
        torch_version=result.torch_version,
        found_by=str(meta.get("found_by") or "corpus"),
        extra={"repro_header": header(entry, result.torch_version)},
    )


def rerender_from_replay(results: list[ReplayResult]) -> list[str]:
    """``affuzz replay --update``: each entry's repro re-rendered from the newest replayed torch that shows
    its bug (NOTE [corpus repros]); one line per entry whose repro.py was rewritten or could not be."""
    lines = []
    by_entry: dict[Path, list[ReplayResult]] = {}
    for r in results:
        if r.entry.meta and (r.entry.path / "meta.json").exists():
            by_entry.setdefault(r.entry.path, []).append(r)
    for rs in by_entry.values():
        for r in sorted(rs, key=lambda r: version_tuple(r.torch_version), reverse=True):
            finding = entry_finding(r.entry, r)
            if finding is None:
                continue
            written, why = rerender(r.entry, finding, r.python)
            if why != "unchanged":
                lines.append(f"{r.entry.id}: {why}")
            break
    return lines


def header(entry: Entry, torch_version: str) -> list[str]:
    """Two lines: the entry, its signature and the torch it is shown on; its root cause (or notes)."""
    about = str(entry.meta.get("root_cause") or entry.meta.get("notes") or "").strip()
    about = " ".join(about.split())
    if len(about) > 200:
        about = about[:197] + "..."
    head = [f"affuzz corpus entry {entry.id}, shown on torch {torch_version}: {entry.meta.get('signature')}"]
    return head + ([about] if about else [])


def rerender(entry: Entry, finding: Finding, python: str) -> tuple[bool, str]:
    """Render ``finding`` (an entry's, :func:`entry_finding`) as a published repro, run it with ``python``
    in a fresh process and, if it reproduced, make it the entry's ``repro.py``. Returns (written, why)."""
    with tempfile.TemporaryDirectory(prefix="affuzz-corpus-") as tmp:
        out = Path(tmp)
        staged = stage(out, finding)
        ok, dest = verify_and_publish(out, staged, finding, python=python)
        if not ok:
            return False, f"the re-rendered repro did not reproduce under {python}; kept the old one"
        new = (dest / "repro.py").read_text(encoding="utf-8")
        old_path = entry.path / "repro.py"
        old = old_path.read_text(encoding="utf-8") if old_path.exists() else ""
        if new == old:
            return False, "unchanged"
        atomic_write_text(old_path, new)
    return True, f"repro.py re-rendered and reproduced on torch {finding.torch_version}"
