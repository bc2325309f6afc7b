"""Finding power as bugs per core-hour: fixed-length campaigns per arm and seed, one table.

Runs ``affuzz run --duration D --workers W --seed S`` for every arm and seed under one interpreter, then
reads each run's ``summary.json``: verified buckets (distinct bucket fingerprints, NOTE [error buckets]),
bug families (verdict, oracle and error or essential features: the stacks of one root cause, NOTE
[bucket families]), cases, core-hours (elapsed x workers), buckets per core-hour, the seconds to the
first verified bucket, cells covered and the core-time share of ``linearize`` (NOTE [cost-aware
steering]). Then per arm the union over its seeds, and the bucket ids only one arm found. Arms:

* ``swarm``: today's default generation (swarm configurations, NOTE [swarm]; steering by core time);
* ``no-swarm``: ``--no-swarm``, every case drawn from the whole vocabulary;
* ``by-cases``: swarm, steering by case counts (``--steer-by cases``), the steering before cost-awareness.

    python bench/finding_power.py --seeds 1,2,3 --duration 600 [--arms swarm,no-swarm] [--python PY]

The seed hunt on torch 2.0.1 is ``bench/seed_hunt.py`` (same arms). Generation is the campaign's own:
nothing here biases it toward a bug.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ARMS = {"swarm": [], "no-swarm": ["--no-swarm"], "by-cases": ["--steer-by", "cases"]}


def family(b: dict[str, Any]) -> str:
    """A summary row's family (NOTE [bucket families]): an error bucket is its fingerprint already; a value
    bucket's signature without its stack (verdict, oracle, essential features), so the stacks of one
    mechanism count once."""
    parts = b["signature"].split("|")
    if " @ " in b["signature"] or len(parts) < 4:
        return b["signature"]
    return "|".join([parts[0], parts[1], parts[3]])


def run(python: str, out: Path, arm: str, seed: int, duration: float, workers: int) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [python, "-m", "fuzzer", "run", "--out", str(out), "--seed", str(seed), "--duration", str(duration)]
    cmd += ["--workers", str(workers), *ARMS[arm]]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = json.loads((out / "summary.json").read_text())
    verified = [b for b in s["buckets"] if b["status"] == "verified"]
    core_hours = s["elapsed_seconds"] * s["workers"] / 3600
    share = s["coverage"].get("transform_share", {})
    return {
        "arm": arm,
        "seed": seed,
        "cases": s["cases"],
        "core_hours": core_hours,
        "buckets": sorted(b["id"] for b in verified),
        "families": sorted({family(b) for b in verified}),
        "first_seconds": min((b["seconds_to_find"] for b in verified), default=None),
        "cells": s["coverage"]["cells_covered"],
        "cells_possible": s["coverage"]["cells_possible"],
        "linearize_share": share.get("linearize"),
        "out": str(out),
    }


def table(rows: list[dict[str, Any]], arms: list[str]) -> str:
    lines = [
        "| arm | seed | cases | core-h | buckets | families | buckets/core-h | cells | linearize core share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share = "-" if r["linearize_share"] is None else f"{r['linearize_share']:.1%}"
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r['cases']} | {r['core_hours']:.3f} | {len(r['buckets'])} | "
            f"{len(r['families'])} | {len(r['buckets']) / r['core_hours']:.0f} | {r['cells']}/{r['cells_possible']} | {share} |"
        )
    union = {a: set().union(*[set(r["buckets"]) for r in rows if r["arm"] == a]) for a in arms}
    fam = {a: set().union(*[set(r["families"]) for r in rows if r["arm"] == a]) for a in arms}
    lines.append("")
    for a in arms:
        mine = [r for r in rows if r["arm"] == a]
        per = [len(r["buckets"]) / r["core_hours"] for r in mine]
        lines.append(
            f"{a}: {len(union[a])} distinct buckets, {len(fam[a])} families over {len(mine)} runs; "
            f"median {statistics.median(per):.0f} buckets per core-hour"
        )
    for a in arms:
        others = set().union(*[fam[b] for b in arms if b != a])
        only = sorted(fam[a] - others)
        lines.append(f"families only {a} found ({len(only)}):")
        lines += [f"  {f}" for f in only]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--arms", default="swarm,no-swarm", help=f"comma-separated: {', '.join(ARMS)}")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "finding-power")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    if not arms or set(arms) - set(ARMS):
        p.error(f"--arms {args.arms!r}: a comma-separated list of {', '.join(ARMS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    python = os.path.abspath(args.python)  # not resolve(): a venv's python is a symlink
    rows = []
    for seed in seeds:  # arms interleaved, so a drift of the machine's speed hits both alike
        for arm in arms:
            rows.append(run(python, args.out / f"{arm}-seed{seed}", arm, seed, args.duration, args.workers))
            print(f"{arm} seed {seed}: {len(rows[-1]['buckets'])} buckets", flush=True)
    print(table(rows, arms))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
