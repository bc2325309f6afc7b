"""What ``affuzz check`` writes: one folder per finding, under ``function/`` (the Function's rules disagree)
or ``torch/`` (torch disagrees with itself), each with ``repro.py`` and ``finding.json``; ``check.json``
(every target: rule verdicts, torch verdict counts per oracle, findings) and ``table.md`` (the table
Function x oracle). NOTE [the repro is what runs]: a finding is reported only once its ``repro.py``,
run in a fresh interpreter, reproduced it; one that did not is listed with ``reproduced: false``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..codegen.check_render import RULE_ORACLES, TORCH_ORACLES, render_check, side_names
from ..codegen.render import Expect
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.target import CheckCase, Target, target_to_json
from ..publish.findings import expect_of
from ..publish.upstream import KnownIssue, known_issue
from ..publish.verify import run_repro, shows_fingerprint
from .engine import KINDS, CheckFinding, TargetReport, finding_key

SCHEMA_VERSION = 1
ORACLES = RULE_ORACLES + TORCH_ORACLES
_SHORT = {
    "backward_vs_fd": "backward/fd",
    "jvp_vs_fd": "jvp/fd",
    "backward_vs_jvp": "backward/jvp",
    "double_backward_vs_fd": "2x backward/fd",
    "jvp_of_backward_vs_fd": "fwd of bwd/fd",
    "backward_of_jvp_vs_fd": "bwd of jvp/fd",
    "vmap_rule_vs_loop": "vmap rule/loop",
    "opcheck": "opcheck",
    "functorch_vs_create_graph": "func/create_graph",
    "jacrev_vs_jacfwd": "jacrev/jacfwd",
    "vmap_vs_loop": "vmap/loop",
    "forward_over_reverse": "fwd/rev order",
    "compiled_vs_eager": "compiled/eager",
}


def module_root(module: str) -> Path | None:
    """The folder to put on ``sys.path`` for ``import module`` to work (None: it is installed)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).resolve()
    depth = module.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.parents[depth]
    return None if "site-packages" in root.parts else root


def stack_text(f: CheckFinding) -> str:
    return " > ".join(t.name for t in f.case.transforms) or "-"


def _expect(f: CheckFinding) -> Expect | None:
    """How the repro ends (NOTE [repro styles]); of two errors, the uncaught one is the one no limitation
    explains (the finding's fingerprint), whichever side raised it."""
    o = f.result.outcome
    return expect_of(f.result.verdict, o, f.result.fingerprint) if o is not None else None


def repro(f: CheckFinding) -> str:
    expect = _expect(f)
    a, b = side_names(f.case.oracle)
    head = [
        f"affuzz check: {f.case.target.title}: {KINDS[f.kind]} ({f.case.oracle}: {a} vs {b}"
        + (f", stack {stack_text(f)})" if f.case.transforms else ")"),
        f"run where `import {f.case.target.module}` works (your project's root, or with PYTHONPATH)",
    ]
    return render_check(f.case, style="repro", expect=expect, header=head)


def reproduced(f: CheckFinding, code: int | None, output: str, *, exception: str | None = None) -> bool:
    """The repro exited 1 showing the finding: assert_close failing on the two values, or the raising
    side's error as the last line of its traceback (``exception``: that line, when the output was cut).
    NOTE [the repro shows the bucket]."""
    o = f.result.outcome
    if code != 1 or o is None:
        return False
    expect = _expect(f)
    if expect is None or (not expect.a_raises and not expect.b_raises):
        return "AssertionError" in output
    side = o.functorch if expect.last == 0 else o.reference
    return shows_fingerprint(output, f.result.fingerprint, side, exception=exception)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def stage_finding(out: Path, f: CheckFinding, n: int) -> Path:
    """Write finding ``n``'s repro; returns its path (run it with :func:`run_repro`, then :func:`record`)."""
    t = f.case.target
    folder = out / f.kind / f"{_slug(t.label or t.name.rpartition('.')[2])}-{f.case.oracle}-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "repro.py", repro(f))
    return folder / "repro.py"


def known(f: CheckFinding) -> KnownIssue | None:
    """The known upstream issue a torch finding is (``fuzzer/publish/known_issues.json``), by the rules an
    ``affuzz check`` finding can be held to: its error, verdict, oracle, stack and the rules the target
    defines (the campaign's other case features are unknown here, so a rule that needs one never holds)."""
    if f.kind != "torch":
        return None
    t = f.case.target
    features = tuple(_FEATURES[r] for r in t.rules if r in _FEATURES) + (("custom_op",) if t.op else ())
    compiled = f.case.oracle == "compiled_vs_eager" and f.case.compile is not None
    signature = (f.result.fingerprint or f.result.verdict) + (f"/{f.case.compile.placement}" if compiled else "")
    bucket = {
        "id": "",
        "signature": signature,
        "verdict": f.result.verdict,
        "oracle": f.case.oracle,
        "transforms": [x.name for x in f.case.transforms],
        "signature_features": list(features),
        "features": list(features),
    }
    return known_issue(bucket)


#: Target rules as the campaign's feature tags (NOTE [feature tags]), for :func:`known`.
_FEATURES = {"jvp": "custom_jvp", "generate_vmap_rule": "generate_vmap_rule", "vmap": "custom_vmap"}


def record(out: Path, f: CheckFinding, script: Path, ran: dict[str, Any]) -> dict[str, Any]:
    """Write ``finding.json`` from the repro's run ``ran``; returns the row check.json lists."""
    code, output = ran["exit_code"], ran["output_tail"]
    ok = reproduced(f, code, output, exception=ran["exception_line"])
    f.reproduced = ok
    issue = known(f)
    f.known = None if issue is None else issue.ref
    data = {
        "schema_version": SCHEMA_VERSION,
        "kind": f.kind,
        "kind_text": KINDS[f.kind],
        "target": target_to_json(f.case.target),
        "sample": f.case.target.sample,
        "oracle": f.case.oracle,
        "sides": list(side_names(f.case.oracle)),
        "transforms": [t.name for t in f.case.transforms],
        "verdict": f.result.verdict,
        "fingerprint": f.result.fingerprint,
        "outcome": f.result.outcome.to_json() if f.result.outcome is not None else None,
        "shrink_attempts": f.tried,
        "shrunk": f.original is not None,
        "reproduced": ok,
        "known_upstream": None
        if issue is None
        else {"issue": issue.issue, "ref": issue.ref, "state": issue.state_text},
        "repro_exit_code": code,
        "repro_output_tail": output[-1500:],
    }
    atomic_write_json(script.parent / "finding.json", data)
    return {
        "dir": str(script.parent.relative_to(out)),
        "known_upstream": None if issue is None else issue.ref,
        **{k: data[k] for k in ("kind", "oracle", "sample", "transforms", "verdict", "fingerprint", "reproduced")},
    }


def shown(oracle: str, verdict: str) -> str:
    """A verdict as output says it: an error by the side that raised (neither side of a rule oracle is
    torch.func's, and compiled_vs_eager's side B is the compiled one)."""
    a, b = side_names(oracle)
    if oracle not in RULE_ORACLES:
        a, b = "torch.func" if a == "functorch" else a, b.replace("_", " ")
    words = {
        "error_functorch_only": f"{a} raises",
        "error_reference_only": f"{b} raises",
        "different_errors": f"{a} and {b} raise differently",
    }
    return words.get(verdict, verdict)


def _confirmed(report: TargetReport) -> dict[tuple[object, ...], str | None]:
    """The key of each disagreement a reproduced finding stands for, and the upstream issue it is known as."""
    return {k: f.known for f in report.findings if f.reproduced for k in f.keys | {f.key}}


def cell(report: TargetReport, oracle: str) -> str:
    """A table cell: a rule oracle's verdict, or a torch oracle's verdict counts over the stacks. A
    disagreement whose repro did not reproduce it in a fresh process is ``unconfirmed``, never a FINDING
    (NOTE [the repro is what runs]); one that is a known upstream issue is counted as ``known (#N)``;
    stacks whose two sides raised the same error are ``same error``, not ``ok``. A count is of stacks:
    the findings printed group them (NOTE [check findings])."""
    confirmed = _confirmed(report)
    if oracle in RULE_ORACLES:
        v = report.rules[oracle]
        if v.finding:
            key = finding_key("function", CheckCase(report.target, (), oracle), v)
            return f"FINDING {shown(oracle, v.verdict)}" if key in confirmed else "unconfirmed"
        text = {"consistent": "ok", "not_applicable": "n/a", "not_smooth": "not smooth"}.get(v.verdict, v.verdict)
        kinks = sum(w.verdict == "not_smooth" for w in report.samples.get(oracle, {}).values())
        return f"{text}, {kinks} not smooth" if kinks and v.verdict != "not_smooth" else text
    row = report.stacks.get(oracle, {})
    if not row:
        return "-"
    keys = report.found.get(oracle, [])
    known = sorted({str(confirmed[k]) for k in keys if confirmed.get(k)})
    n_known = sum(bool(confirmed.get(k)) for k in keys)
    found = sum(k in confirmed for k in keys) - n_known
    parts = [f"{row.get('consistent', 0)} ok"]
    words = (("same_error", "same error"), ("expected", "exp"), ("not_applicable", "n/a"))
    for verdict, word in (*words, ("timeout", "timeout"), ("memory", "memory")):
        if row.get(verdict):
            parts.append(f"{row[verdict]} {word}")
    if len(keys) - found - n_known:
        parts.append(f"{len(keys) - found - n_known} unconfirmed")
    if n_known:
        parts.append(f"{n_known} known ({', '.join(known)})")
    if found:
        parts.append(f"**{found} FINDING**")
    return ", ".join(parts)


def table(reports: list[TargetReport]) -> str:
    oracles = [o for o in ORACLES if o != "opcheck" or any(r.target.op for r in reports)]
    head = ["Function", *(_SHORT[o] for o in oracles)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        lines.append("| " + " | ".join([r.target.title, *(cell(r, o) for o in oracles)]) + " |")
    return "\n".join(lines) + "\n"


def _entry(r: TargetReport, findings: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "target": target_to_json(r.target),
        "title": r.target.title,
        "samples": [t.sample for t in r.target.samples],
        "notes": list(r.target.notes),
        "hints": r.hints(),
        "cases": r.cases,
        "seconds": round(r.seconds, 1),
        "rules": {o: {"verdict": v.verdict, "reason": v.reason} for o, v in r.rules.items()},
        "rule_samples": {o: {k: v.verdict for k, v in each.items()} for o, each in r.samples.items()},
        "stacks": r.stacks,
        "stack_reasons": r.reasons,
        "findings": findings,
    }


def _pythonpath(target: Target) -> str:
    """PYTHONPATH of a repro's fresh interpreter: the folder of the target's module, then what the
    checking process was given (a package beside it, the module of ``--inputs-from``), then the directory
    affuzz ran in (where ``pkg.module`` resolved from, like pytest)."""
    root = module_root(target.module)
    given = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(root) if root else "", given, str(Path.cwd())) if p)


class Writer:
    """Writes ``affuzz check``'s results as they come (NOTE [check budgets]): each target's findings
    verified and written, then ``check.json`` (``complete`` false until :meth:`finish`) and ``table.md``
    rewritten, so a check stopped or killed midway leaves what it had."""

    def __init__(self, out: Path, meta: dict[str, Any], *, python: str = sys.executable) -> None:
        self.out, self.meta, self.python = out, meta, python
        self.reports: list[TargetReport] = []
        self.entries: list[dict[str, Any]] = []
        self.n = 0
        self.last = 0.0
        out.mkdir(parents=True, exist_ok=True)

    def progress(self, report: TargetReport) -> None:
        """The target being checked, as far as it got (at most every few seconds)."""
        if time.monotonic() - self.last >= 5.0:
            self._write(running=_entry(report, []))

    def add(self, report: TargetReport) -> dict[str, Any]:
        """Verify and write ``report``'s findings (NOTE [parallel verification]); its check.json entry."""
        rows = self._verify(report.findings, report.target)
        entry = _entry(report, rows)
        self.reports.append(report)
        self.entries.append(entry)
        self._write()
        return entry

    def finish(self) -> dict[str, Any]:
        return self._write(complete=True)

    def _write(self, *, running: dict[str, Any] | None = None, complete: bool = False) -> dict[str, Any]:
        summary = {"schema_version": SCHEMA_VERSION, **self.meta, "complete": complete, "targets": self.entries}
        if running is not None:
            summary["running"] = running
        atomic_write_json(self.out / "check.json", summary)
        atomic_write_text(self.out / "table.md", table(self.reports))
        self.last = time.monotonic()
        return summary

    def _verify(self, findings: list[CheckFinding], target: Target) -> list[dict[str, Any]]:
        # NOTE [parallel verification]
        # Each repro runs in its own fresh interpreter (~2-4 s, most of it importing torch); they are
        # independent, so they run side by side, one per core (only the subprocesses run in threads). A
        # shrunk finding whose repro does not reproduce it (a disagreement of the shrinker's process
        # alone) is tried as it was found before it is listed as not reproduced.
        root = _pythonpath(target)
        scripts = []
        for f in findings:
            self.n += 1
            scripts.append(stage_finding(self.out, f, self.n))
        rows = self._run(findings, scripts, root)
        retry = [i for i, f in enumerate(findings) if not f.reproduced and f.original is not None]
        if retry:
            again = [findings[i].original for i in retry]
            for i, g in zip(retry, again, strict=True):
                assert g is not None
                g.keys |= findings[i].keys
                atomic_write_text(scripts[i], repro(g))
            for i, g, row in zip(retry, again, self._run(again, [scripts[i] for i in retry], root), strict=True):
                if g is not None and g.reproduced:
                    findings[i], rows[i] = g, row
        return rows

    def _run(self, findings: list[Any], scripts: list[Path], root: str) -> list[dict[str, Any]]:
        def run(script: Path) -> dict[str, Any]:  # only the subprocess runs in the threads
            return run_repro(script, python=self.python, timeout=300.0, pythonpath=root)

        with ThreadPoolExecutor(max_workers=max(1, min(len(scripts), os.cpu_count() or 1))) as pool:
            runs = list(pool.map(run, scripts))
        return [record(self.out, f, script, ran) for f, script, ran in zip(findings, scripts, runs, strict=True)]


def write(
    out: Path, reports: list[TargetReport], meta: dict[str, Any], *, python: str = sys.executable
) -> dict[str, Any]:
    """Write every finding (and verify its repro), ``check.json`` and ``table.md``; returns check.json."""
    writer = Writer(out, meta, python=python)
    for r in reports:
        writer.add(r)
    return writer.finish()
