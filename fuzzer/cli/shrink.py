"""``affuzz shrink``: shrink a case that shows a disagreement into a minimal repro."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..ir.oracles import MAIN, ORACLES
from ..triage.shrink import DEFAULT_BUDGET
from .common import EXIT_OK, UsageError, load_case_for, positive_int


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        type=positive_int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs to spend (default {DEFAULT_BUDGET})",
    )
    shrink.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: print the repro only)")


def command(args: argparse.Namespace) -> int:
    import torch

    from ..codegen.render import render
    from ..ir.files import atomic_write_text
    from ..ir.serde import dumps
    from ..judge.judge import Judge
    from ..publish.findings import expect_of, repro_lines
    from ..triage.shrink import Shrinker, case_runner, goal_of

    case = load_case_for(args.case, args.oracle, "shrink")
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
    verdict = result.verdict or goal.verdict  # NOTE [one-sided errors]: may be narrower than the goal's
    shown = goal.verdict if verdict == goal.verdict else f"{goal.verdict} -> {verdict}"
    header = [
        f"affuzz shrink of {args.case.name} on torch {torch.__version__}: {shown} ({args.oracle}),"
        f" essential features: {'+'.join(goal.features) or '-'}",
        f"shrunk in {result.runs} runs ({result.seconds:.1f} s): {' '.join(result.steps) or 'no smaller case'}",
    ]
    # NOTE [repro styles]: the repro ends as the shrunk case's outcome needs (which side raises)
    judge = Judge(timeout=None)
    expects = [
        expect_of(v, j.outcome, goal.fingerprint) if j.outcome else None
        for v, j in ((v, judge(c, args.oracle)) for v, c in ((goal.verdict, case), (verdict, result.case)))
    ]
    before, after = repro_lines(case, args.oracle, expects[0]), repro_lines(result.case, args.oracle, expects[1])
    repro = render(result.case, header=header, oracle=args.oracle, style="repro", expect=expects[1])
    if args.out is None:
        sys.stdout.write(repro)
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "case.json", dumps(result.case))
        atomic_write_text(args.out / "repro.py", repro)
        test = render(result.case, header=header, oracle=args.oracle, style="pytest", expect=expects[1])
        atomic_write_text(args.out / "test_repro.py", test)
        print(
            f"{shown}: repro {before} -> {after} lines in {result.runs} runs ({result.seconds:.1f} s); wrote {args.out}/"
        )
    return EXIT_OK
