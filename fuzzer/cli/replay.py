"""``affuzz replay``: replay corpus cases under one or more torch versions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, duration


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay corpus cases under one or more torch versions",
        description="Replay every case under PATH (corpus directories, entries or case.json files; default corpus/) "
        "under this interpreter's torch and each --python, and show case x torch version -> verdict, with what "
        "changed since the entry's recorded status. Exit status: 0 as recorded, 1 when a case regressed or its "
        "verdict changed, 2 when an entry could not be read (the others still replay).",
    )
    replay.add_argument("paths", type=Path, nargs="*", metavar="PATH")
    replay.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PY",
        help="another interpreter to replay under, e.g. .venvs/torch-2.0.1/bin/python (repeatable); with --python "
        "given, this interpreter replays too only if it is listed",
    )
    replay.add_argument("--json", type=Path, metavar="FILE", help="write one record per case x interpreter")
    replay.add_argument(
        "--update",
        action="store_true",
        help="record new verdicts and statuses (fixed-in X) in the corpus, and re-render each entry's repro.py "
        "in the current style from the newest replayed torch that shows its bug (kept only if it reproduces there)",
    )
    replay.add_argument("--timeout", type=duration, default=60.0, metavar="SECONDS", help="per case (default 60 s)")


def command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..history.corpus import load_corpus
    from ..history.replay import INFORMATIONAL, open_interpreter, replay, update_corpus, write_json
    from ..publish.report import replay_table

    entries, errors = load_corpus(args.paths or [Path("corpus")])
    for e in errors:
        print(f"error: {e}", file=sys.stderr)  # one line each, never wrapped
    console = Console(width=None if sys.stdout.isatty() else 200)
    interpreters = []
    try:
        for py in args.python or [sys.executable]:
            interpreters.append(open_interpreter(py))
    except (OSError, TimeoutError, Exception) as e:  # noqa: BLE001 (any failure to start is one line)
        for i in interpreters:
            i.close()
        raise UsageError(f"affuzz replay: cannot start a replay worker with --python {py}: {e}") from None
    try:
        with console.status("replaying") as status:

            def progress(r: Any) -> None:
                status.update(f"replaying: torch {r.torch_version}, {r.entry.id}: {r.verdict}")

            results = replay(entries, interpreters, timeout=args.timeout, on_result=progress)
    finally:
        for i in interpreters:
            i.close()
    versions = list(dict.fromkeys(i.torch_version for i in interpreters))
    console.print(replay_table(results, versions))
    changed = [r for r in results if r.change and r.change not in INFORMATIONAL]
    noted = [r for r in results if r.change]
    console.print(
        f"{len(entries)} cases x {len(versions)} torch versions; "
        + (
            ", ".join(f"{c} {sum(r.change == c for r in noted)}" for c in dict.fromkeys(r.change for r in noted))
            or "all as recorded"
        )
        + (f"; {len(errors)} {'entry' if len(errors) == 1 else 'entries'} could not be read" if errors else ""),
        highlight=False,
    )
    if args.json:
        write_json(args.json, results, errors)
    if args.update:
        for line in update_corpus(results):
            console.print(f"recorded: {line}", highlight=False)
        from ..history.rerender import rerender_from_replay

        for line in rerender_from_replay(results):  # NOTE [corpus repros]
            console.print(f"repro: {line}", highlight=False)
    if errors:
        return EXIT_USAGE
    if args.update:
        return EXIT_FINDINGS if any(r.change in ("regressed", "crash", "hang") for r in results) else EXIT_OK
    return EXIT_FINDINGS if changed else EXIT_OK
