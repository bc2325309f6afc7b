"""Command line: ``affuzz run``, ``affuzz shrink`` and ``affuzz render``. Only wiring lives here; ``main(argv) -> int``."""

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
from .oracles import MAIN, ORACLES
from .render import STYLES
from .shrink import DEFAULT_BUDGET

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


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a non-negative integer")
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
    run.add_argument(
        "--shrink-budget",
        type=_count,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs one shrink may spend on a new finding; 0 publishes findings unshrunk (default {DEFAULT_BUDGET})",
    )
    render = sub.add_parser(
        "render",
        help="print the standalone repro script of a case",
        description="Print the repro script for CASE.json.",
    )
    render.add_argument("case", type=Path, metavar="CASE.json")
    render.add_argument("--oracle", choices=ORACLES, default=MAIN, help=f"which two sides to compare (default {MAIN})")
    render.add_argument(
        "--style",
        choices=STYLES,
        default="repro",
        help="repro: the published repro.py; pytest: test_repro.py; full: the script the fuzzer runs (default repro)",
    )
    shrink = sub.add_parser(
        "shrink",
        help="shrink a case that shows a disagreement into a minimal repro",
        description="Shrink CASE.json (a finding's case.json, a corpus case or a hand-written one) under this torch, "
        "keeping its verdict, error types and essential features, and write case.json, repro.py and test_repro.py "
        "to OUT.",
    )
    shrink.add_argument("case", type=Path, metavar="CASE.json")
    shrink.add_argument("--oracle", choices=ORACLES, default=MAIN, help=f"which two sides to compare (default {MAIN})")
    shrink.add_argument(
        "--budget",
        type=_positive_int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs to spend (default {DEFAULT_BUDGET})",
    )
    shrink.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: print the repro only)")
    return p


def _load_case(path: Path):  # noqa: ANN202 (fuzzer.case is imported lazily)
    from .case import CaseError, load

    try:
        return load(str(path))
    except CaseError as e:
        raise UsageError(f"{e}; fix the file or regenerate it with affuzz") from None


def _cmd_render(args: argparse.Namespace) -> int:
    from .render import render

    sys.stdout.write(render(_load_case(args.case), oracle=args.oracle, style=args.style))
    return EXIT_OK


def _cmd_shrink(args: argparse.Namespace) -> int:
    import torch

    from .case import dumps
    from .findings import repro_lines
    from .fsutil import atomic_write_text
    from .render import render
    from .shrink import Shrinker, case_runner, goal_of

    case = _load_case(args.case)
    run = case_runner(args.oracle)
    goal = goal_of(case, args.oracle, run)
    if goal.verdict in ("consistent", "expected"):
        raise UsageError(
            f"affuzz shrink: {args.case}: {goal.verdict} under "
            f"{args.oracle} on torch {torch.__version__}, so there is nothing to shrink; try another --oracle"
        )
    err = sys.stderr

    def progress(stage: str, runs: int, best: object) -> None:
        if err.isatty():
            err.write(f"\rshrinking: {stage}, run {runs}/{args.budget}   ")

    result = Shrinker(goal, run, budget=args.budget, progress=progress).shrink(case)
    if err.isatty():
        err.write("\n")
    header = [
        f"affuzz shrink of {args.case.name} on torch {torch.__version__}: {goal.verdict} ({args.oracle}),"
        f" essential features: {'+'.join(goal.features) or '-'}",
        f"shrunk in {result.runs} runs ({result.seconds:.1f} s): {' '.join(result.steps) or 'no smaller case'}",
    ]
    before, after = repro_lines(case, args.oracle), repro_lines(result.case, args.oracle)
    if args.out is None:
        sys.stdout.write(render(result.case, header=header, oracle=args.oracle, style="repro"))
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "case.json", dumps(result.case))
        atomic_write_text(args.out / "repro.py", render(result.case, header=header, oracle=args.oracle, style="repro"))
        atomic_write_text(
            args.out / "test_repro.py", render(result.case, header=header, oracle=args.oracle, style="pytest")
        )
        print(
            f"{goal.verdict}: repro {before} -> {after} lines in {result.runs} runs ({result.seconds:.1f} s); wrote {args.out}/"
        )
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
            CampaignConfig(
                out=out,
                seed=seed,
                duration=duration,
                max_cases=args.max_cases,
                case_timeout=args.timeout,
                shrink_budget=args.shrink_budget,
            )
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
        return {"run": _cmd_run, "render": _cmd_render, "shrink": _cmd_shrink}[args.command](args)
    except UsageError as e:
        print(
            f"error: {e}" if not str(e).startswith("affuzz") else str(e).replace(": ", ": error: ", 1), file=sys.stderr
        )
        return EXIT_USAGE
