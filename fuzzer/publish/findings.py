"""A finding: the case, its signature and outcome, how it was found and shrunk; and its two JSON forms,
``finding.json`` (:meth:`Finding.record`, read back by :meth:`Finding.from_dir`) and the complete one in
``state.json`` (:meth:`Finding.to_json` / :meth:`Finding.from_json`). Verification and the directory
layout below are :mod:`fuzzer.publish.verify`'s. A bucket of findings has its state form too
(:func:`bucket_to_json`) and its row in ``summary.json`` (:func:`bucket_row`), read by the campaign and by
:mod:`fuzzer.publish.rundata` alike.

A finding is staged under ``OUT/.pending/<signature id>/``: ``case.json`` (the shrunk case),
``original.json`` (the case as the campaign drew it), ``repro.py`` and ``test_repro.py`` (NOTE [repro
styles] in :mod:`fuzzer.codegen.render`). Its ``repro.py`` is run with a fresh interpreter, and only if that
exits 1 and prints the finding's verdict is ``finding.json`` written and the directory renamed to
``OUT/findings/<signature id>/`` (see NOTE [the repro is what runs] in :mod:`fuzzer.judge.execute`). A repro
that does not reproduce is kept under ``OUT/unverified/`` with the output it printed, and is not
reported.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codegen.render import Expect, render
from ..ir.case import Case
from ..ir.oracles import CHECKPOINT, COMPILED
from ..ir.serde import case_from_json, case_to_json
from ..ir.validity import RULES, not_applicable
from ..judge.execute import Outcome, Side
from ..triage.buckets import Bucket
from ..triage.shrink import Goal
from ..triage.signature import Signature, compile_key

FINDING_SCHEMA_VERSION = 1


@dataclass
class Finding:
    case: Case
    signature: Signature
    features: tuple[str, ...]
    outcome: Outcome
    seconds_to_find: float
    cases_to_find: int
    torch_version: str
    found_by: str
    original: Case | None = None  # the case as drawn, before shrinking
    shrink: dict[str, Any] = field(default_factory=dict)  # what shrinking took (runs, seconds, steps, lines)
    extra: dict[str, Any] = field(default_factory=dict)

    def expect(self) -> Expect | None:
        """How its published repro ends (NOTE [the repro shows the bucket], at :func:`expect_of`)."""
        return expect_of(self.signature.verdict, self.outcome, self.signature.error)

    @property
    def broken_rule(self) -> str | None:
        """NOTE [broken rules]: the rule the Function breaks, for a torch-bug error found in a comparison
        the validity table calls not applicable (None otherwise)."""
        if self.signature.verdict not in ("torch_bug_error", "promise_broken"):
            return None
        return not_applicable(self.case, self.signature.oracle)

    def short_header(self) -> list[str]:
        """The published repro's header: one line, signature and torch version, and the triage's word on
        which side is wrong where it has one (how it was found and shrunk is in ``finding.json``); a corpus
        entry's own lines where ``extra`` has them (NOTE [corpus repros])."""
        if "repro_header" in self.extra:
            return list(self.extra["repro_header"])
        sig = self.signature
        triage = f"; triage: {self.extra['triage']}" if "triage" in self.extra else ""
        broken = self.broken_rule
        rule = f"; the Function breaks a rule ({broken}), torch's internal error stands" if broken else ""
        return [f"affuzz {sig.id} on torch {self.torch_version}: {sig.text}{triage}{rule}"]

    def header(self) -> list[str]:
        sig = self.signature
        return [
            f"affuzz finding {sig.id}: {sig.verdict} ({sig.oracle})",
            f"signature: {sig.text}",
            f"transforms (outermost first): {' > '.join(sig.skeleton)}",
            f"features: {', '.join(self.features) or '-'} (essential: {', '.join(sig.features) or '-'})",
            f"found by {self.found_by} on torch {self.torch_version}, case {self.cases_to_find}"
            f" after {self.seconds_to_find:.1f} s",
            *([f"triage: {self.extra['triage']}"] if "triage" in self.extra else []),
            *([f"broken rule: {RULES[self.broken_rule]} ({self.broken_rule})"] if self.broken_rule else []),
            "Run: python repro.py   (exit 1 while the two sides disagree, 0 once they agree)",
            "",
        ]

    # ---------------------------------------------------------------- finding.json and state.json

    def record(self, verification: dict[str, Any]) -> dict[str, Any]:
        """``finding.json``: what a user reads (and :meth:`from_dir` reads back)."""
        sig = self.signature
        return {
            "schema_version": FINDING_SCHEMA_VERSION,
            "signature": sig.text,
            "id": sig.id,
            "verdict": sig.verdict,
            "oracle": sig.oracle,
            "transforms": list(sig.skeleton),
            "features": list(self.features),
            "signature_features": list(sig.features),
            **({"error": sig.error} if sig.error else {}),
            "torch_version": self.torch_version,
            "python_version": sys.version.split()[0],
            "seconds_to_find": round(self.seconds_to_find, 3),
            "cases_to_find": self.cases_to_find,
            "found_by": self.found_by,
            "functorch": self.outcome.functorch.summary(),
            "reference": self.outcome.reference.summary(),
            "verification": verification,
            "shrink": self.shrink,
            **({"broken_rule": self.broken_rule} if self.broken_rule else {}),
            **({"compile": _compile_json(self.case)} if sig.oracle == COMPILED and self.case.compile else {}),
            **(
                {"checkpoint": _checkpoint_json(self.case)} if sig.oracle == CHECKPOINT and self.case.checkpoint else {}
            ),
            **self.extra,
        }

    @classmethod
    def from_dir(cls, d: Path) -> Finding:
        """A published finding directory (``finding.json`` + ``case.json``, ``original.json``), as
        :meth:`record` and :func:`fuzzer.publish.verify.stage` wrote it."""
        record = json.loads((d / "finding.json").read_text(encoding="utf-8"))
        case = case_from_json(json.loads((d / "case.json").read_text(encoding="utf-8")))
        original = d / "original.json"
        verdict = record["verdict"]
        return cls(
            case=case,
            signature=Signature(
                verdict,
                record["oracle"],
                tuple(record["transforms"]),
                tuple(record["signature_features"]),
                record.get("error", ""),
                compile_key(case, record["oracle"]),
            ),
            features=tuple(record["features"]),
            outcome=Outcome(verdict, Side(record["functorch"], None, None), Side(record["reference"], None, None), 0.0),
            seconds_to_find=float(record["seconds_to_find"]),
            cases_to_find=int(record["cases_to_find"]),
            torch_version=record["torch_version"],
            found_by=record["found_by"],
            original=case_from_json(json.loads(original.read_text(encoding="utf-8"))) if original.exists() else None,
            shrink=dict(record.get("shrink") or {}),
            extra={k: v for k, v in record.items() if k not in RECORD_KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        """The complete finding, for ``state.json`` (NOTE [resume])."""
        return {
            "case": case_to_json(self.case),
            "signature": self.signature.to_json(),
            "features": list(self.features),
            "outcome": self.outcome.to_json(),
            "seconds_to_find": self.seconds_to_find,
            "cases_to_find": self.cases_to_find,
            "torch_version": self.torch_version,
            "found_by": self.found_by,
            "original": case_to_json(self.original) if self.original is not None else None,
            "shrink": self.shrink,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Finding:
        return cls(
            case=case_from_json(d["case"]),
            signature=Signature.from_json(d["signature"]),
            features=tuple(d["features"]),
            outcome=Outcome.from_json(d["outcome"]),
            seconds_to_find=float(d["seconds_to_find"]),
            cases_to_find=int(d["cases_to_find"]),
            torch_version=d["torch_version"],
            found_by=d["found_by"],
            original=case_from_json(d["original"]) if d.get("original") else None,
            shrink=dict(d.get("shrink") or {}),
            extra=dict(d.get("extra") or {}),
        )


#: The keys :meth:`Finding.record` writes itself; every other key of a ``finding.json`` is ``extra``.
def _compile_json(case: Case) -> dict[str, Any]:
    """NOTE [compiled mode]: how a compiled finding's repro calls torch.compile (its smallest backend: the
    compiler layer a maintainer triages first)."""
    c = case.compile
    assert c is not None
    return {
        "backend": c.backend,
        "fullgraph": c.fullgraph,
        "placement": c.placement,
        **({"autograd": True} if c.autograd else {}),
    }


def _checkpoint_json(case: Case) -> dict[str, Any]:
    """NOTE [checkpoint mode]: how a checkpoint finding's side B keeps its saved tensors."""
    k = case.checkpoint
    assert k is not None
    return {"kind": k.kind, "placement": k.placement}


RECORD_KEYS = frozenset(
    {
        "checkpoint",
        "compile",
        "schema_version",
        "signature",
        "id",
        "verdict",
        "oracle",
        "transforms",
        "features",
        "signature_features",
        "error",
        "torch_version",
        "python_version",
        "seconds_to_find",
        "cases_to_find",
        "found_by",
        "functorch",
        "reference",
        "verification",
        "shrink",
        "broken_rule",
    }
)


def expect_of(verdict: str, outcome: Outcome, fingerprint: str) -> Expect | None:
    """How the published repro of a finding ends (NOTE [repro styles]): which side raises and which runs
    last (uncaught); None for the verdicts that keep the generic comparison (structure mismatch, slow,
    crash, hang).

    NOTE [the repro shows the bucket]
    The side that runs last, uncaught, is the side whose error *is* the finding's ``fingerprint`` (NOTE
    [error buckets]: the error no documented limitation explains, or the one PyTorch calls a bug), so the
    repro's traceback ends on the very error that names its bucket, its header and its issue draft, and
    verification (:func:`fuzzer.publish.verify.reproduced`) checks that line against the fingerprint.
    The other side's error, often a documented limitation, is only stated in a comment. Only without a
    matching side (a fingerprint from an older affuzz) does the old order hold: side A, else the side
    PyTorch calls a bug."""
    a, b = not outcome.functorch.ok, not outcome.reference.ok
    if verdict == "value_mismatch":
        return Expect()
    if verdict == "promise_broken":  # NOTE [promises]: both sides run, the one that returns is the bug
        return Expect(a_raises=a, b_raises=b, promise=True)
    if verdict not in ("error_functorch_only", "error_reference_only", "different_errors", "torch_bug_error"):
        return None
    if not (a or b):
        return None
    matching = [
        i for i, s in enumerate((outcome.functorch, outcome.reference)) if not s.ok and s.fingerprint == fingerprint
    ]
    if matching:
        last = matching[0]
    elif verdict == "torch_bug_error":
        last = 0 if (outcome.functorch.torch_bug or not b) else 1
    else:
        last = 0 if a else 1
    other = (outcome.reference if last == 0 else outcome.functorch).summary(100)
    return Expect(a_raises=a, b_raises=b, last=last, other=other)


def repro_lines(case: Case, oracle: str, expect: Expect | None = None) -> int:
    """Non-blank lines of the published repro of ``case``, its header line (short_header) included."""
    text = render(case, oracle=oracle, style="repro", expect=expect)
    return 1 + sum(1 for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------------------------------------- buckets


def bucket_to_json(b: Bucket[Finding], out: Path) -> dict[str, Any]:
    return {
        "signature": b.signature.to_json(),
        "first": b.first.to_json(),
        "finding": b.finding.to_json() if b.finding is not None else None,
        "hits": b.hits,
        "status": b.status,
        "path": str(b.path.relative_to(out)) if b.path else None,
        "goal": b.goal.to_json() if b.goal is not None else None,
        "raw_signatures": b.raw_signatures,
        "shrink_seconds": b.shrink_seconds,
        "announced": b.announced,
    }


def bucket_from_json(d: dict[str, Any], out: Path) -> Bucket[Finding]:
    return Bucket(
        Signature.from_json(d["signature"]),
        Finding.from_json(d["first"]),
        hits=int(d["hits"]),
        status=d["status"],
        path=out / d["path"] if d.get("path") else None,
        finding=Finding.from_json(d["finding"]) if d.get("finding") else None,
        goal=Goal.from_json(d["goal"]) if d.get("goal") else None,
        raw_signatures=int(d.get("raw_signatures", 1)),
        shrink_seconds=list(d.get("shrink_seconds", [])),
        announced=bool(d.get("announced")),
    )


def bucket_row(b: Bucket[Finding], out: Path, stacks: dict[str, int]) -> dict[str, Any]:
    """A bucket as ``summary.json`` lists it (``stacks``: "oracle: stack" -> hits)."""
    rule = b.published.broken_rule
    triage = b.published.extra.get("triage") or (f"breaks {rule}" if rule else None)
    if b.path is not None and _plain_forward(b.path):  # NOTE [plain forward]
        triage = f"{triage}; no Function needed" if triage else "no Function needed"
    return {
        "id": b.signature.id,
        "signature": b.signature.text,
        "verdict": b.signature.verdict,
        "oracle": b.signature.oracle,
        "transforms": list(b.signature.skeleton),
        "features": list(b.published.features),
        "signature_features": list(b.signature.features),
        "hits": b.hits,
        "raw_signatures": b.raw_signatures,
        "stacks": dict(stacks),
        "status": b.status,
        # NOTE [broken rules]: a torch-bug error of a Function that breaks a rule says which, where the
        # triage of a value finding would be
        "triage": triage,
        "broken_rule": rule,
        **({"compile": _compile_json(b.published.case)} if b.published.case.compile is not None else {}),
        **({"checkpoint": _checkpoint_json(b.published.case)} if b.published.case.checkpoint is not None else {}),
        "shrink_seconds": b.shrink_seconds,
        **({"unshrunk": b.published.shrink["skipped"]} if "skipped" in b.published.shrink else {}),
        "repro_lines": _repro_lines(b.path) or b.published.shrink.get("lines_after"),
        "seconds_to_find": round(b.first.seconds_to_find, 3),
        "cases_to_find": b.first.cases_to_find,
        "path": str(b.path.relative_to(out)) if b.path else None,
    }


def _repro_lines(d: Path | None) -> int | None:
    """Non-blank lines of the published ``repro.py`` in ``d``, its header included: what a reader of the
    report counts when they open it (None where it is not published)."""
    try:
        text = (d / "repro.py").read_text(encoding="utf-8") if d is not None else None
    except OSError:
        return None
    return None if text is None else sum(1 for line in text.splitlines() if line.strip())


def _plain_forward(d: Path) -> bool:
    """Whether the verified repro in ``d`` is written without the custom Function (NOTE [plain forward])."""
    try:
        record = json.loads((d / "finding.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    verification = record.get("verification") if isinstance(record, dict) else None
    return isinstance(verification, dict) and bool(verification.get("plain_forward"))
