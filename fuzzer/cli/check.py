"""``affuzz check``: check your own autograd.Function (or torch's autograd_function_db) for consistency."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .common import EXIT_FINDINGS, EXIT_OK, UsageError, duration, positive_int, seed_int

FAIL_ON = ("function", "torch")


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if text.strip() == "any":
        return FAIL_ON
    if text.strip() == "none":
        return ()
    bad = [k for k in kinds if k not in FAIL_ON]
    if bad or not kinds:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(FAIL_ON)}, or any, or none")
    return kinds


def _rules(text: str) -> tuple[str, ...]:
    rules = tuple(k.strip() for k in text.split(",") if k.strip())
    if not rules or not set(rules) <= {"backward", "jvp"}:
        raise argparse.ArgumentTypeError("expected backward, jvp or backward,jvp")
    return rules


def _stacks(text: str) -> tuple[Any, ...]:
    from ..check.stacks import parse_stacks

    try:
        return parse_stacks(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check your own autograd.Function or custom op: its rules, and torch.func vs plain autograd on it",
        description=(
            "Import TARGET (pkg.module:Name for an autograd.Function or a torch.library custom op, pkg.module for "
            "every one defined in it, or torch.ops.namespace.name with --import) and judge it: first its rules on "
            "each sample (backward and jvp vs finite differences, backward vs jvp, the second-order rules vs "
            "finite differences, its vmap staticmethod vs a loop, torch.library.opcheck for an op), then every "
            "transform stack of depth <= 2 under the fuzzer's oracles (torch.func vs plain autograd, jacrev vs "
            "jacfwd, vmap vs a loop, forward- vs reverse-over-reverse, compiled vs eager). Findings come in two "
            "kinds, written apart under OUT/function/ (the Function's rules disagree) and OUT/torch/ (torch "
            "disagrees with itself on a Function whose rules check out); each is shrunk over its stack and its repro.py "
            "(importing your module) is run in a fresh process before it is reported. Exit 0: no finding of "
            "the kinds --fail-on names (default: function); 1: some; 2: bad target or command line."
        ),
    )
    p.add_argument(
        "target", nargs="?", metavar="TARGET", help="pkg.module:Name, pkg.module, or torch.ops.namespace.name"
    )
    p.add_argument(
        "--torch-db", action="store_true", help="check every Function of torch's autograd_function_db instead"
    )
    p.add_argument(
        "--inputs",
        metavar="SPEC",
        help="the arguments, comma-separated: 3x4 (a float64 tensor to differentiate), 3x4:float32, scalar, "
        "3x4:const (a float tensor never differentiated), 3:int64 or 3:bool (a constant tensor), =LITERAL (a Python "
        "literal passed as is, commas allowed inside brackets), @pkg.module:name (imported and passed, e.g. a "
        "callable); default: found by trial (one shape for every positional argument). Values are drawn from "
        "several ranges (positive, mixed signs, zeros/ties/large)",
    )
    p.add_argument(
        "--inputs-from",
        metavar="MOD:FN",
        help="call FN() for the samples: a list of argument tuples, like OpInfo's sample_inputs; floating-point "
        "tensors that require grad are differentiated (if none does, every floating-point tensor is), every "
        "other item is passed as FN made it; the shrinker keeps to these samples",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (the module that registers a torch.ops.namespace.name TARGET)",
    )
    p.add_argument(
        "--not-derivative",
        type=_rules,
        default=(),
        metavar="RULES",
        help="backward, jvp or backward,jvp: rules deliberately not the forward's derivative (a straight-through "
        "estimator, a surrogate gradient): not compared with finite differences, still checked across "
        "transforms (a Function can say it itself: affuzz_not_derivative = ('backward',))",
    )
    p.add_argument("--max-cases", type=positive_int, metavar="N", help="at most N stacks per Function")
    p.add_argument(
        "--stacks",
        type=_stacks,
        metavar="S,S",
        help="only these stacks (levels outermost first, joined by >: jacfwd>hessian,grad), e.g. to check again "
        "what a finding showed; default: every stack of depth <= 2",
    )
    p.add_argument(
        "--duration",
        type=duration,
        metavar="S",
        help="stop after S in all, shared out between the Functions (past the depth-2 stacks: random depth-3 ones)",
    )
    p.add_argument("--out", type=Path, default=Path("reports/check"), metavar="DIR", help="default reports/check")
    p.add_argument("--seed", type=seed_int, default=0, help="samples and random stacks (default 0)")
    p.add_argument("--no-shrink", action="store_true", help="report findings as found")
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="per script, for a 16-element input; scaled with the input's size, at most 10x (default 60). A "
        "script past it is a timeout note, never a finding",
    )
    p.add_argument(
        "--max-memory",
        type=float,
        default=8192.0,
        metavar="MIB",
        help="memory a script may add (default 8192 MiB); past it the script fails with a memory note, and the "
        "check goes on",
    )
    p.add_argument(
        "--fail-on",
        type=_kinds,
        default=("function",),
        metavar="KINDS",
        help="exit 1 for reproduced findings of these kinds: function (the default: your rules), torch, "
        "function,torch (or any), none",
    )
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
    if args.torch_db and (args.inputs or args.inputs_from):
        raise UsageError(
            "affuzz check: --inputs and --inputs-from are for a TARGET (torch's db brings its own samples)"
        )
    if args.inputs and args.inputs_from:
        raise UsageError("affuzz check: give --inputs or --inputs-from, not both")
    from dataclasses import replace

    import torch

    from ..check import output, targets
    from ..check.engine import CHECK_COMPILE, KINDS, Checker

    if args.torch_db:
        found = targets.torch_db()
    else:
        found = targets.resolve(
            args.target,
            args.inputs,
            inputs_from=args.inputs_from,
            not_derivative=args.not_derivative,
            imports=tuple(args.imports),
            seed=args.seed,
        )
    compiled = None if args.compile_backend == "none" else replace(CHECK_COMPILE, backend=args.compile_backend)
    checker = Checker(timeout=args.timeout, compile=compiled, max_memory_mb=args.max_memory)
    meta = {
        "target": "--torch-db" if args.torch_db else args.target,
        "inputs": args.inputs,
        "inputs_from": args.inputs_from,
        "max_cases": args.max_cases,
        "duration": args.duration,
        "seed": args.seed,
        "fail_on": list(args.fail_on),
        "torch_version": torch.__version__,
    }
    writer = output.Writer(args.out, meta)
    start = time.monotonic()
    for i, t in enumerate(found):
        print(f"checking {t.title} ...", file=sys.stderr, flush=True)
        if t.constants:
            which = ", ".join(t.arg_name(j) for j in t.constants)
            print(f"  {which}: the backward returns None for it: passed as a constant", file=sys.stderr)
        for note in t.notes:
            print(f"  {note}", file=sys.stderr)
        # --duration is shared out: each Function gets until its share of the whole has passed
        deadline = start + args.duration * (i + 1) / len(found) if args.duration else None
        report = checker.check(
            t,
            max_cases=args.max_cases,
            deadline=deadline,
            seed=args.seed,
            shrink=not args.no_shrink,
            progress=writer.progress,
            only=args.stacks,
        )
        writer.add(report)
        for hint in report.hints():
            print(f"  hint: {hint}", file=sys.stderr)
    for leak in checker.leaked:
        print(f"warning: a script left torch's state changed past repair: {leak}", file=sys.stderr)
    summary = writer.finish()
    print(output.table(writer.reports))
    counts = {"function": 0, "torch": 0}
    missed = 0
    for t in summary["targets"]:
        for f in t["findings"]:
            if not f["reproduced"]:
                missed += 1
                continue
            counts[f["kind"]] += 1
            stack = " > ".join(f["transforms"]) or "-"
            known = f"  (known upstream: {f['known_upstream']})" if f["known_upstream"] else ""
            sample = f" ({f['sample']} sample)" if f["sample"] and not f["transforms"] else ""
            print(
                f"{f['kind']:8} {t['title']}: {f['oracle']}{sample} [{stack}] {output.shown(f['oracle'], f['verdict'])}  "
                f"{args.out / f['dir']}/repro.py{known}"
            )
    if any(counts.values()):
        print("\n(a table cell counts stacks; a finding above stands for every stack of one cause)")
    if missed:
        print(f"\n{missed} disagreement(s) did not reproduce in a fresh process: not reported (listed in check.json)")
    failing = sum(counts[k] for k in args.fail_on)
    print(
        f"\n{counts['function']} finding(s) of kind function ({KINDS['function']}), "
        f"{counts['torch']} of kind torch ({KINDS['torch']}); torch {torch.__version__}; {args.out}/check.json"
    )
    return EXIT_FINDINGS if failing else EXIT_OK
