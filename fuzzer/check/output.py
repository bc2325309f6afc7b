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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..codegen.check_render import RULE_ORACLES, TORCH_ORACLES, render_check, side_names
from ..codegen.render import Expect
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.target import target_to_json
from ..publish.findings import expect_of
from ..publish.verify import run_repro, shows_fingerprint
from .engine import KINDS, CheckFinding, TargetReport

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
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:60]


def stage_finding(out: Path, f: CheckFinding, n: int) -> Path:
    """Write finding ``n``'s repro; returns its path (run it with :func:`run_repro`, then :func:`record`)."""
    folder = out / f.kind / f"{_slug(f.case.target.title)}-{f.case.oracle}-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "repro.py", repro(f))
    return folder / "repro.py"


def record(out: Path, f: CheckFinding, script: Path, ran: dict[str, Any]) -> dict[str, Any]:
    """Write ``finding.json`` from the repro's run ``ran``; returns the row check.json lists."""
    code, output = ran["exit_code"], ran["output_tail"]
    ok = reproduced(f, code, output, exception=ran["exception_line"])
    data = {
        "schema_version": SCHEMA_VERSION,
        "kind": f.kind,
        "kind_text": KINDS[f.kind],
        "target": target_to_json(f.case.target),
        "oracle": f.case.oracle,
        "sides": list(side_names(f.case.oracle)),
        "transforms": [t.name for t in f.case.transforms],
        "verdict": f.result.verdict,
        "fingerprint": f.result.fingerprint,
        "outcome": f.result.outcome.to_json() if f.result.outcome is not None else None,
        "shrink_attempts": f.tried,
        "reproduced": ok,
        "repro_exit_code": code,
        "repro_output_tail": output[-1500:],
    }
    atomic_write_json(script.parent / "finding.json", data)
    return {
        "dir": str(script.parent.relative_to(out)),
        **{k: data[k] for k in ("kind", "oracle", "transforms", "verdict", "fingerprint", "reproduced")},
    }


def cell(report: TargetReport, oracle: str) -> str:
    """A table cell: a rule oracle's verdict, or a torch oracle's verdict counts over the stacks."""
    if oracle in RULE_ORACLES:
        v = report.rules[oracle]
        text = {"consistent": "ok", "not_applicable": "n/a", "expected": "expected"}.get(v.verdict)
        return text or f"FINDING {v.verdict}"
    row = report.stacks.get(oracle, {})
    if not row:
        return "-"
    found = sum(n for v, n in row.items() if v not in ("consistent", "expected", "not_applicable", "nonfinite"))
    parts = [f"{row.get('consistent', 0)} ok"]
    if row.get("expected"):
        parts.append(f"{row['expected']} exp")
    if row.get("not_applicable"):
        parts.append(f"{row['not_applicable']} n/a")
    if found:
        parts.append(f"**{found} FINDING**")
    return ", ".join(parts)


def table(reports: list[TargetReport]) -> str:
    head = ["Function", *(_SHORT[o] for o in ORACLES)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in reports:
        lines.append("| " + " | ".join([r.target.title, *(cell(r, o) for o in ORACLES)]) + " |")
    return "\n".join(lines) + "\n"


def write(
    out: Path, reports: list[TargetReport], meta: dict[str, Any], *, python: str = sys.executable
) -> dict[str, Any]:
    """Write every finding (and verify its repro), ``check.json`` and ``table.md``; returns check.json."""
    out.mkdir(parents=True, exist_ok=True)
    # NOTE [parallel verification]
    # Each repro runs in its own fresh interpreter (~2-4 s, most of it importing torch); they are
    # independent, so they run side by side, one per core (only the subprocesses run in threads),
    # numbered and reported in the order the findings were made.
    found = [(f, module_root(f.case.target.module)) for r in reports for f in r.findings]
    scripts = [stage_finding(out, f, n) for n, (f, _) in enumerate(found, start=1)]

    def run(job: tuple[Path, Path | None]) -> dict[str, Any]:  # only the subprocess runs in the threads
        return run_repro(job[0], python=python, timeout=300.0, pythonpath=job[1])

    with ThreadPoolExecutor(max_workers=max(1, min(len(scripts), os.cpu_count() or 1))) as pool:
        runs = list(pool.map(run, [(script, root) for script, (_, root) in zip(scripts, found, strict=True)]))
    written = iter([record(out, f, script, ran) for (f, _), script, ran in zip(found, scripts, runs, strict=True)])
    targets = []
    for r in reports:
        findings = [next(written) for _ in r.findings]
        targets.append(
            {
                "target": target_to_json(r.target),
                "title": r.target.title,
                "cases": r.cases,
                "rules": {o: {"verdict": v.verdict, "reason": v.reason} for o, v in r.rules.items()},
                "stacks": r.stacks,
                "findings": findings,
            }
        )
    summary = {"schema_version": SCHEMA_VERSION, **meta, "targets": targets}
    atomic_write_json(out / "check.json", summary)
    atomic_write_text(out / "table.md", table(reports))
    return summary
