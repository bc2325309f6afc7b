"""``affuzz bisect``: find the first torch release where a case's verdict changed.

(Inside the package this module is ``fuzzer.cli.bisect``; it does not shadow the stdlib ``bisect``.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..ir.oracles import MAIN, ORACLES
from .common import EXIT_OK, UsageError, duration

_RELEASE = re.compile(r"\d+\.\d+\.\d+")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bisect = sub.add_parser(
        "bisect",
        help="find the first torch release where a case's verdict changed",
        description="Binary-search torch releases for the first one whose verdict for CASE differs from the oldest's. "
        "Each probed release gets .venvs/torch-X.Y.Z (created once, as by make torch-venv; several GB each).",
    )
    bisect.add_argument("case", type=Path, metavar="CASE", help="a corpus entry directory or a case.json")
    where = bisect.add_mutually_exclusive_group(required=True)
    where.add_argument("--versions", metavar="V1,V2,...", help="the releases to search, oldest first")
    where.add_argument("--range", metavar="LOW..HIGH", help="every final release from LOW to HIGH (from pip's index)")
    bisect.add_argument("--oracle", choices=ORACLES, help="default: the entry's oracle, else " + MAIN)
    bisect.add_argument("--timeout", type=duration, default=60.0, metavar="SECONDS", help="per case (default 60 s)")
    bisect.add_argument("--update", action="store_true", help="record the result as the entry's status (fixed-in X)")


def command(args: argparse.Namespace) -> int:
    from ..history.corpus import CorpusError, load_entry, update_meta
    from ..history.torch_bisect import BisectError, bisect, bisected_status, evaluator, released_versions, unprobed

    try:
        entry = load_entry(args.case)
    except CorpusError as e:
        raise CorpusError(f"{e}; fix the file or pass another case") from None
    if args.versions:
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
        bad = [v for v in versions if not _RELEASE.fullmatch(v)]
        if bad:
            raise UsageError(f"affuzz bisect: --versions: {bad[0]!r} is not a release like 2.1.0")
    else:
        low, sep, high = args.range.partition("..")
        if not sep or not _RELEASE.fullmatch(low) or not _RELEASE.fullmatch(high):
            raise UsageError(f"affuzz bisect: --range {args.range!r}: use LOW..HIGH, e.g. 2.0.1..2.13.0")
        versions = released_versions(low, high)
    if any(v.startswith(("0.", "1.")) for v in versions):
        raise UsageError("affuzz bisect: affuzz supports torch >= 2.0")
    oracle = args.oracle or entry.oracle
    print(f"bisecting {entry.id} ({oracle}) over {len(versions)} releases: {', '.join(versions)}", flush=True)
    result = bisect(versions, evaluator(entry.case, oracle, timeout=args.timeout), log=lambda s: print(s, flush=True))
    print(result.summary())
    if args.versions and result.first_changed is not None and result.before is not None:
        try:  # best effort: the package index may be out of reach
            skipped = unprobed(result, released_versions(result.before, result.first_changed))
        except (BisectError, OSError):
            skipped = []
        if skipped:
            named = skipped[0] if len(skipped) == 1 else f"{len(skipped)} releases ({skipped[0]} to {skipped[-1]})"
            print(
                f"note: {named} between {result.before} and {result.first_changed} "
                f"{'was' if len(skipped) == 1 else 'were'} not probed: the change is in "
                f"{skipped[0] if len(skipped) == 1 else 'one of them'} or in {result.first_changed} "
                f"(--range {result.before}..{result.first_changed} pins it)"
            )
    if args.update and entry.meta:
        status = bisected_status(entry.status, result)
        if status is not None:
            update_meta(entry, status=status)
            print(f"recorded: {entry.id}: status {status}")
        elif result.first_changed is not None and result.verdicts[result.first_changed] == "consistent":
            print(f"kept: {entry.id}: status {entry.status} (within {result.before}..{result.first_changed})")
    return EXIT_OK
