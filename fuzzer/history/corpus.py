"""The corpus: checked-in known disagreements, one directory per bucket. Torch-free.

NOTE [corpus entries]
``corpus/<id>/`` holds ``case.json`` (the case IR, with ``schema_version``; older versions are migrated
on load by :func:`fuzzer.ir.case.case_from_json`), ``repro.py`` (its published repro, for people: replay
never runs it) and ``meta.json``::

    {"schema_version": 1, "id": ..., "signature": ..., "verdict": ..., "oracle": ...,
     "first_seen": {"torch_version": "2.0.1", "date": "2026-12-02"},
     "upstream": null | "https://...", "status": "open" | "fixed-in 2.1.0" | "expected",
     "history": [{"torch_version": ..., "verdict": ..., "date": ...}, ...], "notes": "..."}

``status`` says what a replay should see: ``open`` -- the recorded disagreement (``verdict``) on every
torch; ``fixed-in X`` -- the disagreement before X, ``consistent`` from X on; ``expected`` -- a
documented limitation (verdict ``expected``). The corpus is the project's memory and outlives
Hypothesis versions: nothing in it depends on Hypothesis's example database (a cache) or on code.
Every file is written atomically; an entry that cannot be read is reported with its path and the
reason, and every other entry still loads (:func:`load_corpus`).
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ir.case import Case, CaseError
from ..ir.errors import AffuzzError
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.serde import dumps, loads

META_SCHEMA_VERSION = 1
READABLE_META_VERSIONS = (1,)
STATUS = re.compile(r"^(open|expected|fixed-in (\d+\.\d+\.\d+))$")


class CorpusError(AffuzzError, ValueError):
    """One corpus entry (or file) cannot be used; ``str(err)`` names the path and the problem."""


def history_verdict(meta: dict[str, Any], torch_version: str) -> str | None:
    """The last verdict recorded for exactly this torch release, if any."""
    for h in reversed(meta.get("history", [])):
        if isinstance(h, dict) and version_tuple(str(h.get("torch_version") or "")) == version_tuple(torch_version):
            return h.get("verdict")
    return None


def version_tuple(v: str) -> tuple[int, ...]:
    """``2.13.0+cpu`` -> (2, 13, 0)."""
    return tuple(int(p) for p in re.findall(r"\d+", v.split("+")[0])[:3])


def today() -> str:
    return datetime.date.today().isoformat()


@dataclass
class Entry:
    """One corpus entry. ``path`` is its directory (or the bare case file it was loaded from)."""

    path: Path
    case: Case
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(self.meta.get("id") or self.path.name)

    @property
    def verdict(self) -> str | None:
        return self.meta.get("verdict")

    @property
    def oracle(self) -> str:
        return str(self.meta.get("oracle") or "functorch_vs_create_graph")

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "open")

    def expected_verdict(self, torch_version: str) -> str | None:
        """What the corpus says ``torch_version`` should give: the verdict last recorded for that release,
        else what the status implies (None: nothing recorded)."""
        seen = history_verdict(self.meta, torch_version)
        if seen is not None:
            return seen
        m = STATUS.match(self.status)
        if m is None or self.verdict is None:
            return None
        if m.group(1) == "expected":
            return "expected"
        if m.group(2) and version_tuple(torch_version) >= version_tuple(m.group(2)):
            return "consistent"
        return self.verdict


def _meta_from_json(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: must be a JSON object")
    version = data.get("schema_version")
    if version not in READABLE_META_VERSIONS or isinstance(version, bool):
        raise CorpusError(
            f"{where}: schema_version: unsupported version {version!r} "
            f"(this affuzz reads {', '.join(map(str, READABLE_META_VERSIONS))}); upgrade affuzz"
        )
    status = data.get("status", "open")
    if not isinstance(status, str) or not STATUS.match(status):
        raise CorpusError(f"{where}: status: {status!r} is not 'open', 'expected' or 'fixed-in X.Y.Z'")
    for key in ("verdict", "oracle", "signature", "upstream", "notes"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise CorpusError(f"{where}: {key}: must be a string")
    if not isinstance(data.get("history", []), list):
        raise CorpusError(f"{where}: history: must be a list")
    return data


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CorpusError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


def load_entry(path: Path) -> Entry:
    """An entry directory, or a bare ``case.json`` (no metadata). Raises :class:`CorpusError`."""
    if path.is_dir():
        case_path, meta_path = path / "case.json", path / "meta.json"
        if not case_path.exists():
            raise CorpusError(f"{path}: no case.json in this corpus entry")
        meta = _meta_from_json(_read_json(meta_path), str(meta_path)) if meta_path.exists() else {}
    else:
        case_path, meta = path, {}
    try:
        case = loads(case_path.read_text(encoding="utf-8"), source=str(case_path))
    except CaseError as e:
        raise CorpusError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusError(f"{case_path}: cannot read ({e})") from None
    return Entry(path if path.is_dir() else case_path, case, meta)


def _entry_paths(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "case.json").exists():
        return [path]
    if not path.is_dir():
        raise CorpusError(f"{path}: no such file or directory")
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def load_corpus(paths: list[Path]) -> tuple[list[Entry], list[str]]:
    """Every entry under ``paths`` (corpus directories, entry directories or case files), and one error
    line per entry that could not be loaded (path and reason). Never raises for a bad entry."""
    entries: list[Entry] = []
    errors: list[str] = []
    for root in paths:
        try:
            candidates = _entry_paths(root)
        except CorpusError as e:
            errors.append(str(e))
            continue
        for p in candidates:
            try:
                entries.append(load_entry(p))
            except CorpusError as e:
                errors.append(str(e))
    return entries, errors


def write_entry(corpus: Path, entry_id: str, case: Case, meta: dict[str, Any], repro: str) -> Path:
    """Write (or replace) ``corpus/<entry_id>/`` as a whole: built in a temporary directory, then renamed,
    so a reader never sees half an entry."""
    corpus.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry_id}.", dir=corpus))
    try:
        atomic_write_text(tmp / "case.json", dumps(case))
        atomic_write_text(tmp / "repro.py", repro)
        atomic_write_json(tmp / "meta.json", {"schema_version": META_SCHEMA_VERSION, **meta})
        dest = corpus / entry_id
        if dest.exists():
            old = corpus / f".{entry_id}.old"
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
        return dest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def update_meta(entry: Entry, **changes: Any) -> None:
    meta = {**entry.meta, **changes}
    meta.setdefault("schema_version", META_SCHEMA_VERSION)
    atomic_write_json(entry.path / "meta.json", meta)
    entry.meta = meta


@dataclass
class AddResult:
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # a smaller repro of a known signature
    kept: list[str] = field(default_factory=list)  # known signature, the corpus repro is no larger
    errors: list[str] = field(default_factory=list)


def _nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def add_findings(corpus: Path, finding_dirs: list[Path]) -> AddResult:
    """Promote findings (``OUT/findings/<id>/`` directories, or an ``OUT/findings`` directory) into the
    corpus: deduplicated by signature; of two repros of one signature the smaller one is kept."""
    from ..triage.reduce import size

    result = AddResult()
    existing, errors = load_corpus([corpus]) if corpus.exists() else ([], [])
    result.errors += errors
    by_signature = {e.meta.get("signature"): e for e in existing if e.meta.get("signature")}
    dirs: list[Path] = []
    for d in finding_dirs:
        dirs += (
            sorted(p for p in d.iterdir() if p.is_dir()) if not (d / "finding.json").exists() and d.is_dir() else [d]
        )
    for d in dirs:
        try:
            record = _read_json(d / "finding.json")
            if not isinstance(record, dict) or not isinstance(record.get("signature"), str):
                raise CorpusError(f"{d / 'finding.json'}: not an affuzz finding (no signature)")
            case = load_entry(d / "case.json").case
            repro = (d / "repro.py").read_text(encoding="utf-8")
        except (CorpusError, OSError) as e:
            result.errors.append(str(e) if isinstance(e, CorpusError) else f"{d}: cannot read ({e})")
            continue
        sig = record["signature"]
        known = by_signature.get(sig)
        if known is not None:
            known_repro = (
                (known.path / "repro.py").read_text(encoding="utf-8") if (known.path / "repro.py").exists() else ""
            )
            smaller = (size(case), _nonblank(repro)) < (size(known.case), _nonblank(known_repro))
            if not smaller:
                result.kept.append(known.id)
                continue
            meta = {**known.meta}
            meta["history"] = [*meta.get("history", []), _history(record)]
            write_entry(corpus, known.id, case, meta, repro)
            result.replaced.append(known.id)
            continue
        meta = {
            "id": record["id"],
            "signature": sig,
            "verdict": record["verdict"],
            "oracle": record.get("oracle", "functorch_vs_create_graph"),
            "transforms": record.get("transforms", []),
            "essential_features": record.get("signature_features", []),
            "first_seen": {"torch_version": record.get("torch_version"), "date": today()},
            "found_by": record.get("found_by"),
            "triage": record.get("triage"),
            "upstream": None,
            "status": "open",
            "history": [_history(record)],
        }
        entry_path = write_entry(corpus, record["id"], case, meta, repro)
        by_signature[sig] = Entry(entry_path, case, {"schema_version": META_SCHEMA_VERSION, **meta})
        result.added.append(record["id"])
    return result


def _history(record: dict[str, Any]) -> dict[str, Any]:
    return {"torch_version": record.get("torch_version"), "verdict": record.get("verdict"), "date": today()}


def recorded(entry: Entry, torch_version: str, verdict: str, status: str | None = None) -> None:
    """Append a replay result to the entry's history (and set a new status)."""
    history = [*entry.meta.get("history", []), {"torch_version": torch_version, "verdict": verdict, "date": today()}]
    changes: dict[str, Any] = {"history": history}
    if status is not None:
        changes["status"] = status
    update_meta(entry, **changes)
