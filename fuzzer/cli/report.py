"""``affuzz report OUT``: the morning report of a campaign, finished or still running."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write OUT/report.html and OUT/issues/ for a campaign, finished or running",
        description=(
            "Write OUT/report.html (summary, plots, coverage heatmap, a section per bucket) and, for every "
            "verified bucket, OUT/issues/<bucket>.md (a PyTorch bug-report draft) from what OUT holds now. "
            "Safe while a campaign still runs in OUT (it only reads the files the driver replaces atomically, "
            "and writes report.html and issues/). `affuzz run` writes both at its end."
        ),
    )
    p.add_argument("out", type=Path, metavar="OUT", help="the OUT directory of an affuzz run")
    p.add_argument(
        "--python",
        default=None,
        metavar="PY",
        help="the interpreter whose torch ran the cases, for the drafts' Versions (default: this one)",
    )
    p.add_argument("--no-drafts", action="store_true", help="write report.html only")


def command(args: argparse.Namespace) -> int:
    from ..publish.drafts import write_drafts
    from ..publish.html import write_html

    path = write_html(args.out)
    drafts = [] if args.no_drafts else write_drafts(args.out, python=args.python)
    print(f"report: {path}" + (f"  issue drafts: {len(drafts)} in {args.out / 'issues'}" if drafts else ""))
    sys.stdout.flush()
    return EXIT_OK
