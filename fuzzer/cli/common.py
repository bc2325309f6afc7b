"""What the command modules share: exit codes, :class:`UsageError`, the argument parser class, the
argparse ``type=`` converters and :func:`load_case`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..ir.errors import AffuzzError

if TYPE_CHECKING:
    from ..ir.case import Case

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(AffuzzError):
    """A bad command line (an unknown option, a bad value, options that do not go together): one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are :class:`UsageError` s, printed by :func:`fuzzer.cli.main`."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds, or a number with s, m or h (e.g. 90, 10m, 8h)"
        )
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a positive integer")
    return n


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}")
    return value


def fraction(text: str) -> float:
    """A fraction in [0, 1): 0 turns a thing off."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text!r}")
    return value


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a non-negative integer")
    return n


def seed_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be an integer") from None


def load_case_for(path: Path, oracle: str, command: str) -> Case:
    """:func:`load_case`, and a one-line usage error where ``oracle`` needs a mode field the case lacks
    (NOTE [oracle table]: ``compiled_vs_eager`` a ``compile``, ``checkpoint_vs_plain`` a ``checkpoint``)."""
    from ..ir.oracles import oracle_kind

    case = load_case(path)
    field = oracle_kind(oracle).mode_field
    if field is not None and getattr(case, field) is None:
        raise UsageError(
            f"affuzz {command}: {path} has no {field!r} field, which --oracle {oracle} needs; add one or choose "
            "another --oracle"
        )
    return case


def load_case(path: Path) -> Case:
    """The validated case in ``path``; a :class:`~fuzzer.ir.case.CaseError` gets a hint at what to do."""
    from ..ir.case import CaseError
    from ..ir.serde import load

    try:
        return load(str(path))
    except CaseError as e:
        raise CaseError(f"{e}; fix the file or regenerate it with affuzz") from None
