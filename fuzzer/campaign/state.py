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
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..gen.coverage import Coverage
from ..ir.errors import AffuzzError
from ..ir.serde import case_from_json, case_to_json
from ..judge.execute import Outcome
from ..publish.findings import Finding, bucket_from_json, bucket_to_json
from ..triage.buckets import BucketBook, RawFinding, ShrinkJob
from ..triage.shrink import Goal
from ..triage.signature import Signature
from .config import Stats
from .schedule import Untriaged

if TYPE_CHECKING:
    from .driver import Campaign

STATE_SCHEMA_VERSION = 1


class StateError(AffuzzError, ValueError):
    """state.json cannot be used to resume (the message names the file and what to do)."""


def job_to_json(j: ShrinkJob) -> dict[str, Any]:
    return {
        "raw": j.raw.to_json(),
        "goal": j.goal.to_json(),
        "case": case_to_json(j.case),
        "outcome": j.outcome.to_json(),
        "buffer": j.buffer.hex() if j.buffer is not None else None,
        "seconds_to_find": j.seconds_to_find,
        "cases_to_find": j.cases_to_find,
        "hits": j.hits,
        "position": j.position,
        "slot": j.slot,
    }


def job_from_json(d: dict[str, Any]) -> ShrinkJob:
    return ShrinkJob(
        raw=Signature.from_json(d["raw"]),
        goal=Goal.from_json(d["goal"]),
        case=case_from_json(d["case"]),
        outcome=Outcome.from_json(d["outcome"]),
        buffer=bytes.fromhex(d["buffer"]) if d.get("buffer") else None,
        seconds_to_find=float(d["seconds_to_find"]),
        cases_to_find=int(d["cases_to_find"]),
        hits=int(d["hits"]),
        position=int(d.get("position", 0)),
        slot=int(d.get("slot", 0)),
    )


def untriaged_to_json(u: Untriaged) -> dict[str, Any]:
    rf = u.finding
    assert rf.case is not None and rf.outcome is not None
    return {
        "oracle": rf.oracle,
        "verdict": rf.verdict,
        "quick": rf.quick,
        "fingerprint": rf.fingerprint,
        "stack": list(rf.stack),
        "case": case_to_json(rf.case),
        "outcome": rf.outcome.to_json(),
        "slot": u.slot,
        "position": u.k,
        "hits": u.hits,
    }


def untriaged_from_json(d: dict[str, Any]) -> Untriaged:
    rf = RawFinding(
        d["oracle"],
        d["verdict"],
        d["quick"],
        d["fingerprint"],
        tuple(d["stack"]),
        case=case_from_json(d["case"]),
        outcome=Outcome.from_json(d["outcome"]),
        untriaged=True,
    )
    return Untriaged(rf, int(d["slot"]), int(d["position"]), int(d["hits"]))


def campaign_state(c: Campaign, saved: str) -> dict[str, Any]:
    """NOTE [resume]: everything ``--resume`` needs."""
    book = c.book
    return {
        "schema_version": STATE_SCHEMA_VERSION,
        "saved": saved,
        "torch_version": c.torch_version,
        "config": c.config.to_json(),
        "stats": c.stats.to_json(),
        "coverage": c.coverage.to_json(),
        "slots": [s.to_json() for s in c.slots],
        "rss_history": c.rss_history,
        "queue_history": c.queue_history,
        "progress_history": c.progress_history,
        "buckets": [bucket_to_json(b, c.config.out) for b in book.buckets.values()],
        "raw": book.raw,
        "quick": book.quick,
        "families": book.families,
        "jobs": [job_to_json(j) for j in [*c.scheduler.queue, *c.scheduler.running]],
        "untriaged": [untriaged_to_json(u) for u in c.scheduler.untriaged.values()],  # NOTE [triage share]
    }


def restore(c: Campaign, state: dict[str, Any]) -> None:
    """Load ``state`` (from :func:`load_state`) into a new campaign ``c`` (NOTE [resume])."""
    out = c.config.out
    c.stats = Stats.from_json(state["stats"])
    c.coverage = Coverage.from_json(state["coverage"])
    c.rss_history = list(state.get("rss_history", []))
    c.queue_history = list(state.get("queue_history", []))
    c.progress_history = list(state.get("progress_history", []))
    for d in state["slots"]:
        if d["index"] < len(c.slots):
            slot = c.slots[d["index"]]
            slot.next, slot.skip = int(d["next"]), set(d.get("skip", ()))
            slot.restarts, slot.recycles, slot.cases = d["restarts"], d["recycles"], d["cases"]
    book: BucketBook[Finding] = c.book
    for d in state["buckets"]:
        bucket = bucket_from_json(d, out)
        book.buckets[bucket.signature.id] = bucket
    book.raw = dict(state.get("raw", {}))
    book.quick = dict(state.get("quick", {}))
    book.families = {k: list(v) for k, v in state.get("families", {}).items()}
    queue = c.scheduler.queue
    for d in state.get("jobs", []):
        job = job_from_json(d)
        book.open(job)
        queue.append(job)
    # findings published after the last save
    for d in sorted((out / "findings").glob("*/finding.json")) if (out / "findings").exists() else []:
        bucket = book.buckets.get(d.parent.name)
        if bucket is not None and bucket.status == "verified":
            continue
        try:
            finding = Finding.from_dir(d.parent)
        except (OSError, ValueError, KeyError) as e:
            c.log_internal(f"--- resume: {d.parent}: cannot be read back ({e}); left as it is\n")
            continue
        sig = finding.signature
        book.found_published(sig, finding, Goal(sig.verdict, sig.oracle, sig.features), d.parent)
    queue[:] = [j for j in queue if j.raw.id in book.jobs]
    for d in state.get("untriaged", []):
        u = untriaged_from_json(d)
        if u.finding.quick not in book.quick:
            c.scheduler.untriaged[u.finding.quick] = u
    pending = out / ".pending"
    if pending.exists():
        shutil.rmtree(pending)  # staged but never verified: those buckets are verified again


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
