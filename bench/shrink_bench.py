"""Shrinking benchmark: time per bucket and repro size, beside the seed's hand-minimized script.

Runs one campaign (``affuzz run --duration D --seed S --workers 0``) under an interpreter, then reads its
``summary.json`` and every ``findings/*/finding.json``: shrink seconds and case runs per bucket, and
the non-blank lines of each published repro before and after shrinking. The reference is the repro a
maintainer minimized by hand in ../shared/seed/ (its code, non-blank lines). Also shrinks the seed case
itself (``affuzz shrink tests/data/seed_case.json``) when the interpreter's torch shows the seed bug.
Prints a table and merges the numbers into ``bench/results.json`` under ``"shrink"`` -> torch version.

    python bench/shrink_bench.py [--python .venv/bin/python] [--duration 120] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_TEXT = ROOT.parent / "shared" / "seed" / "functorch-autograd-function-issue.txt"


def hand_minimized_lines() -> int | None:
    """Non-blank lines of the seed's hand-minimized repro (from ``import torch`` to its last print)."""
    if not SEED_TEXT.exists():
        return None
    lines = SEED_TEXT.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "import torch")
    end = max(i for i, line in enumerate(lines) if line.strip() == "print(expected)")
    return sum(1 for line in lines[start : end + 1] if line.strip())


def nonblank(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "max": None, "n": 0}
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3), "n": len(values)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable, help="interpreter whose torch to run (default: this one)")
    p.add_argument("--duration", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-shrink")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results.json")
    args = p.parse_args(argv)
    python = os.path.abspath(args.python)  # not resolve(): a venv's python is a symlink
    shutil.rmtree(args.out, ignore_errors=True)
    # in process, with no limit on the final grace: every bucket is shrunk, so each one has a shrink time
    cmd = [
        python,
        "-m",
        "fuzzer",
        "run",
        "--duration",
        str(args.duration),
        "--seed",
        str(args.seed),
        "--workers",
        "0",
        "--shrink-grace",
        "100000",
    ]
    subprocess.run([*cmd, "--out", str(args.out)], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    summary = json.loads((args.out / "summary.json").read_text())
    seconds, runs, before, after = [], [], [], []
    for d in sorted((args.out / "findings").glob("*/")):
        record = json.loads((d / "finding.json").read_text())
        shrink = record.get("shrink") or {}
        if "skipped" in shrink:
            continue
        seconds.append(shrink.get("seconds", 0.0))
        runs.append(shrink.get("runs", 0))
        before.append(shrink.get("lines_before", 0))
        after.append(nonblank(d / "repro.py"))
    torch_version = summary["torch_version"]
    seed_row = None
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [python, "-m", "fuzzer", "shrink", "tests/data/seed_case.json", "--out", tmp],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            repro = Path(tmp) / "repro.py"
            rc = subprocess.run([python, repro.name], cwd=tmp, capture_output=True).returncode
            seed_row = {"repro_lines": nonblank(repro), "exit_code": rc, "output": proc.stdout.strip()}
    result = {
        "torch_version": torch_version,
        "command": " ".join(cmd[1:]),
        "cases": summary["cases"],
        "buckets": len(summary["buckets"]),
        "shrink_seconds_per_bucket": _stats(seconds),
        "shrink_runs_per_bucket": _stats([float(r) for r in runs]),
        "repro_lines_before_shrinking": _stats([float(b) for b in before]),
        "repro_lines_after_shrinking": _stats([float(a) for a in after]),
        "hand_minimized_seed_repro_lines": hand_minimized_lines(),
        "seed_case_shrunk": seed_row,
    }
    rows = [
        ("torch", torch_version),
        ("campaign", f"{result['command']}: {summary['cases']} cases, {len(summary['buckets'])} buckets"),
        ("shrink seconds / bucket", "median {median}, max {max} (n={n})".format(**result["shrink_seconds_per_bucket"])),
        ("shrink runs / bucket", "median {median}, max {max}".format(**result["shrink_runs_per_bucket"])),
        (
            "repro lines",
            "before shrinking: median {median}, max {max}".format(**result["repro_lines_before_shrinking"])
            + "; after: median {median}, max {max}".format(**result["repro_lines_after_shrinking"]),
        ),
        ("seed, minimized by hand", f"{result['hand_minimized_seed_repro_lines']} lines (no verdict, no exit code)"),
        (
            "seed case, shrunk by affuzz",
            f"{seed_row['repro_lines']} lines, exit {seed_row['exit_code']}"
            if seed_row
            else "no disagreement on this torch (the seed bug is fixed here)",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    all_results = json.loads(args.results.read_text()) if args.results.exists() else {}
    all_results.setdefault("shrink", {})[torch_version] = result
    args.results.write_text(json.dumps(all_results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
