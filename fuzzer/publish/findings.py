"""Findings on disk, and their verification in a fresh process.

A finding is staged under ``OUT/.pending/<signature id>/``: ``case.json`` (the shrunk case),
``original.json`` (the case as the campaign drew it), ``repro.py`` and ``test_repro.py`` (NOTE [repro
styles] in :mod:`fuzzer.codegen.render`). Its ``repro.py`` is run with a fresh interpreter, and only if that
exits 1 and prints the finding's verdict is ``finding.json`` written and the directory renamed to
``OUT/findings/<signature id>/`` (see NOTE [the repro is what runs] in :mod:`fuzzer.judge.execute`). A repro
that does not reproduce is kept under ``OUT/unverified/`` with the output it printed, and is not
reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codegen.render import render
from ..ir.case import Case
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.serde import dumps
from ..judge.execute import Outcome
from ..triage.signature import Signature
from .forkserver import ForkServer

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

    def short_header(self) -> list[str]:
        """Two lines for the published repro: signature and torch version; how it was found and shrunk."""
        sig = self.signature
        how = f"found by `{self.found_by}` (case {self.cases_to_find}, {self.seconds_to_find:.1f} s)"
        if self.shrink.get("runs"):
            how += f", shrunk in {self.shrink['runs']} runs ({self.shrink['seconds']:.1f} s)"
        if "triage" in self.extra:
            how += f"; triage: {self.extra['triage']}"
        return [f"affuzz {sig.id} on torch {self.torch_version}: {sig.text}", how]

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
            "Run: python repro.py   (exit 1 while the two sides disagree, 0 once they agree)",
            "",
        ]

    def record(self, verification: dict[str, Any]) -> dict[str, Any]:
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
            **self.extra,
        }


def repro_lines(case: Case, oracle: str) -> int:
    """Non-blank lines of the published repro of ``case``, its two header lines (short_header) included."""
    return 2 + sum(1 for line in render(case, oracle=oracle, style="repro").splitlines() if line.strip())


def stage(out: Path, finding: Finding) -> Path:
    d = out / ".pending" / finding.signature.id
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    oracle = finding.signature.oracle
    atomic_write_text(d / "case.json", dumps(finding.case))
    if finding.original is not None and finding.original != finding.case:
        atomic_write_text(d / "original.json", dumps(finding.original))
    # a slow finding needs the timing of the full script (NOTE [slow findings])
    if finding.signature.verdict == "slow":
        repro = render(finding.case, header=finding.header(), oracle=oracle)
    else:
        repro = render(finding.case, header=finding.short_header(), oracle=oracle, style="repro")
    atomic_write_text(d / "repro.py", repro)
    atomic_write_text(
        d / "test_repro.py", render(finding.case, header=finding.short_header(), oracle=oracle, style="pytest")
    )
    return d


def run_repro(repro: Path, *, python: str = sys.executable, timeout: float = 600.0) -> dict[str, Any]:
    """Run a repro script in a fresh interpreter; returns exit code, seconds and the output tail."""
    start = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        proc = subprocess.run(
            [python, repro.name],
            cwd=repro.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        code, output = proc.returncode, (proc.stdout + proc.stderr)
    except subprocess.TimeoutExpired as e:
        code, output = None, f"timed out after {timeout} s\n{e.stdout or ''}"
    return {
        "exit_code": code,
        "seconds": round(time.monotonic() - start, 3),
        "python": python,
        "method": "subprocess",
        "output_tail": output[-2000:],
    }


def verify_and_publish(
    out: Path,
    staged: Path,
    finding: Finding,
    *,
    python: str = sys.executable,
    case_timeout: float | None = 60.0,
    server: ForkServer | None = None,
) -> tuple[bool, Path]:
    """Run the staged repro in a fresh process (a fork-server child when ``server`` is given, see NOTE
    [verification fork server]); publish it as a finding if it exited 1 *and* printed the same verdict
    (an unexpected crash also exits 1). A ``crash`` is verified by a plain run killed by a signal. A ``hang`` is verified by a plain run that does not finish within
    twice the per-case timeout, plus start-up. Returns (verified, final dir)."""
    verdict = finding.signature.verdict
    if verdict == "hang":
        result = run_repro(staged / "repro.py", python=python, timeout=2 * (case_timeout or 60.0) + 30)
        verified = result["exit_code"] is None
    elif verdict == "crash":
        # a worker died on this case (NOTE [campaign driver]): the repro must die by a signal too
        result = run_repro(staged / "repro.py", python=python, timeout=2 * (case_timeout or 60.0) + 30)
        verified = result["exit_code"] is not None and result["exit_code"] < 0
    else:
        if server is not None:
            code, output, seconds = server.run(staged / "repro.py")
            result = {
                "exit_code": code,
                "seconds": round(seconds, 3),
                "python": python,
                "method": "fork server",
                "output_tail": output[-2000:],
            }
        else:
            result = run_repro(staged / "repro.py", python=python)
        verified = result["exit_code"] == 1 and f"verdict: {verdict}" in result["output_tail"]
    dest_root = out / ("findings" if verified else "unverified")
    dest_root.mkdir(parents=True, exist_ok=True)
    dest = dest_root / staged.name
    atomic_write_json(staged / "finding.json", finding.record(result))
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(staged, dest)
    return verified, dest
