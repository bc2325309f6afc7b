"""Command line: ``affuzz run``, ``shrink``, ``render``, ``corpus``, ``replay``, ``bisect``, ``report``, ``file`` and ``check``.

Only wiring lives here: each command is a module (``run``, ``render``, ...) with ``add_parser(sub)``, its
options, and ``command(args) -> int``, which imports the layers below it (torch, rich) only when it runs, so
``affuzz --help`` stays fast. :func:`main` is the one place that turns an :class:`~fuzzer.ir.errors.AffuzzError`
into one line on stderr and exit code 2 (NOTE [user errors])."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from .. import __version__
from ..ir.errors import AffuzzError
from . import check, corpus, file, render, replay, report, run, shrink, torch_bisect
from .common import EXIT_USAGE, Parser

__all__ = ["build_parser", "main"]

COMMANDS = {
    "run": run,
    "render": render,
    "shrink": shrink,
    "corpus": corpus,
    "replay": replay,
    "bisect": torch_bisect,
    "report": report,
    "file": file,
    "check": check,
}
"""The subcommands, in the order ``affuzz --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="affuzz",
        description="Differential consistency fuzzer for torch.func transforms vs plain autograd on custom autograd.Functions.",
    )
    p.add_argument("--version", action="version", version=f"affuzz {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def _error_line(error: AffuzzError, prog: str) -> str:
    """``affuzz run: error: <message>``; a message that names no command yet gets ``prog`` in front."""
    message = str(error)
    if not re.match(r"affuzz(?: [a-z]+)*: ", message):
        message = f"{prog}: {message}"
    return message.replace(": ", ": error: ", 1)


def main(argv: Sequence[str] | None = None) -> int:
    prog = "affuzz"
    try:
        args = build_parser().parse_args(argv)
        prog = " ".join(["affuzz", args.command] + ([args.corpus_command] if args.command == "corpus" else []))
        return COMMANDS[args.command].command(args)
    except AffuzzError as e:
        print(_error_line(e, prog), file=sys.stderr)
        return EXIT_USAGE
