"""``affuzz check``: check your own autograd.Function (or torch's autograd_function_db) for consistency."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .common import EXIT_FINDINGS, EXIT_OK, UsageError, duration, positive_int, seed_int


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check your own autograd.Function: its rules, and torch.func vs plain autograd on it",
        description=(
            "Import TARGET (pkg.module:FunctionName, or pkg.module for every Function defined in it) and judge "
            "it: first its rules (backward and jvp vs finite differences, backward vs jvp, the second-order rules "
            "vs finite differences, its vmap staticmethod vs a loop), then every transform stack of depth <= 2 "
            "under the fuzzer's oracles (torch.func vs plain autograd, jacrev vs jacfwd, vmap vs a loop, "
            "forward- vs reverse-over-reverse, compiled vs eager). Findings come in two kinds, written apart under OUT/function/ "
            "(the Function's rules disagree) and OUT/torch/ (torch disagrees with itself on a Function whose "
            "rules check out); each is shrunk and its repro.py (importing your module) is run in a fresh "
            "process before it is reported. Exit 0: no finding; 1: findings; 2: bad target or command line."
        ),
    )
    p.add_argument("target", nargs="?", metavar="TARGET", help="pkg.module:FunctionName or pkg.module")
    p.add_argument(
        "--torch-db", action="store_true", help="check every Function of torch's autograd_function_db instead"
    )
    p.add_argument(
        "--inputs",
        metavar="SPEC",
        help="the Function's arguments, comma-separated: 3x4 (a float64 tensor), 3x4:float32, scalar, =LITERAL "
        "(passed as is); default: found by trial (one shape for every positional argument)",
    )
    p.add_argument("--max-cases", type=positive_int, metavar="N", help="at most N stacks per Function")
    p.add_argument(
        "--duration",
        type=duration,
        metavar="S",
        help="stop after S in all, shared out between the Functions (past the depth-2 stacks: random depth-3 ones)",
    )
    p.add_argument("--out", type=Path, default=Path("reports/check"), metavar="DIR", help="default reports/check")
    p.add_argument("--seed", type=seed_int, default=0, help="samples and random stacks (default 0)")
    p.add_argument("--no-shrink", action="store_true", help="report findings as found")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per script (default 60)")
    p.add_argument(
        "--compile-backend",
        choices=("eager", "aot_eager", "inductor", "none"),
        default="aot_eager",
        help="also run each stack under torch.compile(stack(f), backend=..., fullgraph=False) beside it eagerly "
        "(the compiled_vs_eager oracle: is the Function safe under torch.compile?); none: do not (default "
        "aot_eager: Dynamo and AOTAutograd, no C++ compile)",
    )


def command(args: argparse.Namespace) -> int:
    if bool(args.target) == bool(args.torch_db):
        raise UsageError("affuzz check: give a TARGET (pkg.module:FunctionName) or --torch-db, not both or neither")
    if args.torch_db and args.inputs:
        raise UsageError("affuzz check: --inputs is for a TARGET (torch's db brings its own samples)")
    from dataclasses import replace

    import torch

    from ..check import output, targets
    from ..check.engine import CHECK_COMPILE, KINDS, Checker

    found = targets.torch_db() if args.torch_db else targets.resolve(args.target, args.inputs, seed=args.seed)
    compiled = None if args.compile_backend == "none" else replace(CHECK_COMPILE, backend=args.compile_backend)
    checker = Checker(timeout=args.timeout, compile=compiled)
    start = time.monotonic()
    reports = []
    for i, t in enumerate(found):
        print(f"checking {t.title} ...", file=sys.stderr, flush=True)
        if t.constants:
            which = ", ".join(str(j + 1) for j in t.constants)
            print(f"  argument(s) {which}: backward returns None for it, passed as a constant", file=sys.stderr)
        # --duration is shared out: each Function gets until its share of the whole has passed
        deadline = start + args.duration * (i + 1) / len(found) if args.duration else None
        reports.append(
            checker.check(t, max_cases=args.max_cases, deadline=deadline, seed=args.seed, shrink=not args.no_shrink)
        )
    meta = {
        "target": "--torch-db" if args.torch_db else args.target,
        "inputs": args.inputs,
        "max_cases": args.max_cases,
        "duration": args.duration,
        "seed": args.seed,
        "torch_version": torch.__version__,
    }
    summary = output.write(args.out, reports, meta)
    print(output.table(reports))
    counts = {"function": 0, "torch": 0}
    for t in summary["targets"]:
        for f in t["findings"]:
            mark = "" if f["reproduced"] else "  (NOT reproduced by its repro.py: not counted)"
            if f["reproduced"]:
                counts[f["kind"]] += 1
            stack = " > ".join(f["transforms"]) or "-"
            print(
                f"{f['kind']:8} {t['title']}: {f['oracle']} [{stack}] {f['verdict']}  {args.out / f['dir']}/repro.py{mark}"
            )
    print(
        f"\n{counts['function']} finding(s) of kind function ({KINDS['function']}), "
        f"{counts['torch']} of kind torch ({KINDS['torch']}); torch {torch.__version__}; {args.out}/check.json"
    )
    return EXIT_FINDINGS if any(counts.values()) else EXIT_OK
