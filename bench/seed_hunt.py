"""Acceptance check: does affuzz find the seed bug class by itself, and how fast?

Runs ``affuzz run --duration D --seed S`` under a torch venv for several seeds, then for each run
reports the first verified ``value_mismatch`` whose (shrunk) case still has ``output_is_input`` and
``saved_output`` (the bug class of ../shared/seed/), its ``seconds_to_find``, whether both features are
essential, the shape of its shrunk repro (non-blank lines, inputs, transform levels), and re-runs its
``repro.py`` in a fresh process to confirm it exits 1. Prints the median seconds_to_find, per arm:
``swarm`` (the default generation, NOTE [swarm] in fuzzer/gen/swarm.py) and ``no-swarm`` (``--no-swarm``).

    python bench/seed_hunt.py --python .venvs/torch-2.0.1/bin/python --seeds 1,2,3,4,5 --duration 120 [--arms swarm,no-swarm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=".venvs/torch-2.0.1/bin/python")
    p.add_argument("--seeds", default="1,2,3,4,5")
    p.add_argument("--duration", type=float, default=120)
    p.add_argument("--out", type=Path, default=Path("reports/seed-hunt"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--arms", default="swarm,no-swarm", help="comma-separated: swarm, no-swarm")
    args = p.parse_args(argv)
    args.python = os.path.abspath(args.python)  # not resolve(): a venv's python is a symlink
    arms = [a for a in args.arms.split(",") if a]
    if not arms or set(arms) - {"swarm", "no-swarm"}:
        p.error(f"--arms {args.arms!r}: a comma-separated list of swarm, no-swarm")
    ok = True
    for arm in arms:
        ok &= hunt(args, arm)
    return 0 if ok else 1


def hunt(args: argparse.Namespace, arm: str) -> bool:
    """One arm's runs and table; True when every run found the class and its repro exited 1."""
    times = []
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        out = args.out / arm / f"seed{seed}"
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(
            [
                args.python,
                "-m",
                "fuzzer",
                "run",
                "--duration",
                str(args.duration),
                "--seed",
                str(seed),
                "--out",
                str(out),
                "--workers",
                str(args.workers),
                *(["--no-swarm"] if arm == "no-swarm" else []),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        summary = json.loads((out / "summary.json").read_text())
        hits = [
            b
            for b in summary["buckets"]
            if b["status"] == "verified"
            and b["verdict"] == "value_mismatch"
            and {"output_is_input", "saved_output"} <= set(b["features"])
        ]
        if not hits:
            rows.append((seed, summary["cases"], None, None, None, len(summary["buckets"]), "-"))
            continue
        # prefer the bucket where both features are essential (the seed bug itself), then the earliest
        first = min(
            hits,
            key=lambda b: (
                not {"output_is_input", "saved_output"} <= set(b["signature_features"]),
                b["seconds_to_find"],
            ),
        )
        repro = out / first["path"] / "repro.py"
        code = subprocess.run([args.python, repro.name], cwd=repro.parent, capture_output=True).returncode
        case = json.loads((repro.parent / "case.json").read_text())
        lines = sum(1 for line in repro.read_text().splitlines() if line.strip())
        shape = (
            f"{lines} lines, {case['function']['n_inputs']} input(s), {len(case['transforms'])} level(s)"
            f" [{'>'.join(first['transforms'])}], essential: {'+'.join(first['signature_features'])}"
        )
        times.append(first["seconds_to_find"])
        rows.append(
            (
                seed,
                summary["cases"],
                first["seconds_to_find"],
                first["cases_to_find"],
                code,
                len(summary["buckets"]),
                shape,
            )
        )
    print(f"arm: {arm}")
    print(
        f"{'seed':>4} {'cases':>7} {'s_to_find':>9} {'cases_to_find':>13} {'repro_rc':>8} {'buckets':>7}  shrunk repro"
    )
    for seed, cases, secs, n, code, buckets, shape in rows:
        print(
            f"{seed:>4} {cases:>7} {secs if secs is not None else '-':>9} {n if n is not None else '-':>13} {code if code is not None else '-':>8} {buckets:>7}  {shape}"
        )
    found = sum(r[2] is not None for r in rows)
    print(
        f"{arm}: found the seed class in {found}/{len(rows)} runs; median seconds_to_find:"
        f" {statistics.median(times) if times else '-'}"
    )
    return found == len(rows) and all(r[4] == 1 for r in rows if r[2] is not None)


if __name__ == "__main__":
    sys.exit(main())
