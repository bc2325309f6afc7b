"""``affuzz corpus add`` and ``affuzz corpus list``: the checked-in corpus of known disagreements."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE, Parser, UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    corpus = sub.add_parser(
        "corpus",
        help="manage the checked-in corpus of known disagreements",
        description="The corpus (default: corpus/) holds one directory per bucket: case.json, repro.py, meta.json.",
    )
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True, parser_class=Parser)
    add = corpus_sub.add_parser(
        "add",
        help="promote findings into the corpus",
        description="Add OUT/findings/<id> directories (or whole OUT/findings directories) to the corpus, deduplicated "
        "by signature; of two repros of one signature the smaller is kept.",
    )
    add.add_argument("findings", type=Path, nargs="+", metavar="FINDING_DIR")
    add.add_argument("--corpus", type=Path, default=Path("corpus"), metavar="DIR", help="default: corpus/")
    ls = corpus_sub.add_parser("list", help="one line per corpus entry", description="List the corpus entries.")
    ls.add_argument("paths", type=Path, nargs="*", metavar="PATH", help="default: corpus/")


def command(args: argparse.Namespace) -> int:
    return _add(args) if args.corpus_command == "add" else _list(args)


def _add(args: argparse.Namespace) -> int:
    from ..history.corpus import add_findings

    missing = [str(p) for p in args.findings if not p.exists()]
    if missing:
        raise UsageError(f"affuzz corpus add: {missing[0]}: no such directory; pass OUT/findings/<id> directories")
    result = add_findings(args.corpus, args.findings)
    for e in result.errors:
        print(f"error: {e}", file=sys.stderr)
    print(
        f"{args.corpus}: added {len(result.added)}, replaced with a smaller repro {len(result.replaced)}, "
        f"already there {len(result.kept)}"
    )
    return EXIT_USAGE if result.errors else EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from ..history.corpus import load_corpus

    entries, errors = load_corpus(args.paths or [Path("corpus")])
    for e in entries:
        m = e.meta
        print(
            f"{e.id}\t{m.get('status', '-')}\t{m.get('verdict', '-')}\t{m.get('signature', '-')}\t{m.get('upstream') or ''}"
        )
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return EXIT_USAGE if errors else EXIT_OK
