"""``affuzz render``: print the standalone repro script of a case."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..codegen.render import SCRIPT_STYLES
from ..ir.oracles import MAIN, ORACLES
from .common import EXIT_OK, load_case_for


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    render = sub.add_parser(
        "render",
        help="print the standalone repro script of a case",
        description="Print the repro script for CASE.json.",
    )
    render.add_argument("case", type=Path, metavar="CASE.json")
    render.add_argument("--oracle", choices=ORACLES, default=MAIN, help=f"which two sides to compare (default {MAIN})")
    render.add_argument(
        "--style",
        choices=SCRIPT_STYLES,
        default="repro",
        help="repro: the published repro.py; pytest: test_repro.py; full: the script the fuzzer runs (default repro)",
    )


def command(args: argparse.Namespace) -> int:
    from ..codegen.render import render

    sys.stdout.write(render(load_case_for(args.case, args.oracle, "render"), oracle=args.oracle, style=args.style))
    return EXIT_OK
