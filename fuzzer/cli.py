"""Command line: ``affuzz run`` and ``affuzz render``. Only wiring lives here; ``main(argv) -> int``."""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from . import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds, or a number with s, m or h (e.g. 90, 10m, 8h)"
        )
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a positive integer")
    return n


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be an integer") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="affuzz",
        description="Differential consistency fuzzer for torch.func transforms vs plain autograd on custom autograd.Functions.",
    )
    p.add_argument("--version", action="version", version=f"affuzz {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run a fuzzing campaign",
        description="Generate random autograd.Functions and transform stacks, run each in functorch mode, in "
        "create_graph mode and under the metamorphic oracles that apply, and write every verified disagreement "
        "under OUT/findings/.",
    )
    limit = run.add_mutually_exclusive_group()
    limit.add_argument(
        "--duration", type=_duration, metavar="SECONDS", help="stop after this long (90, 10m, 8h; default 60 s)"
    )
    limit.add_argument("--max-cases", type=_positive_int, metavar="N", help="stop after N cases")
    run.add_argument(
        "--timeout",
        type=_duration,
        default=60.0,
        metavar="SECONDS",
        help="per-case limit for each side; a side that runs longer is a 'hang' finding (default 60 s)",
    )
    run.add_argument(
        "--seed", type=_seed, help="campaign seed; the same seed repeats the same cases (default: random, printed)"
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="output directory, must be new or empty (default: reports/run-<time>-seed<N>)",
    )
    render = sub.add_parser(
        "render",
        help="print the standalone repro script of a case",
        description="Print the repro script for CASE.json.",
    )
    render.add_argument("case", type=Path, metavar="CASE.json")
    return p


def _cmd_render(args: argparse.Namespace) -> int:
    from .case import CaseError, load
    from .render import render

    try:
        case = load(str(args.case))
    except CaseError as e:
        raise UsageError(f"{e}; fix the file or regenerate it with affuzz") from None
    sys.stdout.write(render(case))
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    out: Path = args.out or Path("reports") / f"run-{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"affuzz run: --out {out} already exists and is not an empty directory; choose a new one or remove it"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"affuzz run: cannot create --out {out} ({e.strerror})") from None

    from rich.console import Console

    from .campaign import Campaign, CampaignConfig
    from .compare import RegistryError
    from .report import LiveView, summary_table, write_report

    console = Console(width=None if sys.stdout.isatty() else 160)
    duration = args.duration if args.duration is not None or args.max_cases is not None else 60.0
    try:
        campaign = Campaign(
            CampaignConfig(out=out, seed=seed, duration=duration, max_cases=args.max_cases, case_timeout=args.timeout)
        )
    except RegistryError as e:
        raise UsageError(str(e)) from None
    console.print(
        f"affuzz {__version__}: seed {seed}, torch {campaign.torch_version}, writing to {out}", highlight=False
    )
    with LiveView(console) as view:
        campaign.run(on_tick=view.tick)
    summary = campaign.summary()
    write_report(out, summary)
    console.print(summary_table(summary))
    verified = sum(b["status"] == "verified" for b in summary["buckets"])
    console.print(
        f"report: {out / 'report.md'}  summary: {out / 'summary.json'}  verified findings: {verified}", highlight=False
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return {"run": _cmd_run, "render": _cmd_render}[args.command](args)
    except UsageError as e:
        print(
            f"error: {e}" if not str(e).startswith("affuzz") else str(e).replace(": ", ": error: ", 1), file=sys.stderr
        )
        return EXIT_USAGE
