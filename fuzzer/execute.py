"""Execute a case: render it, exec the script in a fresh namespace, and call its ``check()``.

NOTE [the repro is what runs]
The fuzzer never evaluates a case any other way: the verdict comes from the rendered script's own
``check()``, run from the rendered source, so a verdict cannot depend on affuzz code that a repro lacks.
The published ``repro.py`` is the same template ended in the seed's style (NOTE [repro styles] in
:mod:`fuzzer.render`), and before a finding is reported that file is run in a fresh interpreter and
must print the same verdict (:mod:`fuzzer.findings`).
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

from .case import Case
from .oracles import MAIN
from .render import render


@dataclass(frozen=True)
class Side:
    """What one mode produced: a value summary, or the error it raised (type, first message line, the
    last torch frame it passed through, and whether PyTorch calls it a bug: the script's ``torch_bug``)."""

    value: str | None
    error_type: str | None
    error: str | None
    frame: str = ""
    torch_bug: bool = False
    key: str = ""  # the script's error_key(): type and first clause of the message, normalized

    @property
    def fingerprint(self) -> str:
        """The error's key and the torch frame that raised it: what makes two errors one bug."""
        if self.ok:
            return ""
        return f"{self.key or f'{self.error_type}: {self.error}'} @ {self.frame or '-'}"

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def summary(self, limit: int = 300) -> str:
        text = self.value if self.ok else f"{self.error_type}: {self.error}"
        text = text or ""
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Outcome:
    verdict: str  # the script's own verdict
    functorch: Side
    reference: Side
    seconds: float


def torch_frame(e: BaseException) -> str:
    """``torch/<path>:<function>`` of the frame that raised ``e`` when it is torch's Python code; '' when
    the innermost frame is the case's own code (an op it called raised from C++, and the message names
    the op): the torch frames further out only say which transform called the case."""
    frames = traceback.extract_tb(e.__traceback__)
    path = frames[-1].filename.replace("\\", "/") if frames else ""
    if "/torch/" not in path:
        return ""
    return f"torch/{path.rsplit('/torch/', 1)[1]}:{frames[-1].name}"


def _side(result: Any, ns: dict[str, Any]) -> Side:
    """A side's result as the script's ``outcome()`` gave it: a value, or the exception raised."""
    if isinstance(result, BaseException):
        msg = str(result).strip().splitlines()
        bug, key = bool(ns["torch_bug"](result)), str(ns["error_key"](result))  # the script's own
        return Side(None, type(result).__name__, msg[0] if msg else "", torch_frame(result), bug, key)
    return Side(str(result), None, None)


class CaseTimeout(BaseException):
    """Raised by the per-case timer; a BaseException so the script's ``except Exception`` lets it through."""


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM: main thread, POSIX); no limit when None."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# NOTE [compiling rendered scripts]
# Every rendered script repeats the same runtime functions (check, verdict, the create_graph twins...),
# and compiling ~200 lines costs about as much as a small case's torch work. So a script is compiled as
# its top-level blocks (split where a column-0 line follows two blank lines), and a block's code object
# is reused once the same text has been seen before. Executing the blocks in order into one namespace
# is executing the script: each block is whole top-level statements. Should a split ever fall inside a
# string, that block does not compile and the whole script is compiled as one, as before.
_BLOCKS = re.compile(r"\n\n\n(?=\S)")
_CODE: dict[str, CodeType] = {}  # block text -> code, for blocks seen at least twice
_SEEN: set[int] = set()  # hashes of blocks seen once (cleared when large)


def _compiled(source: str, name: str) -> list[CodeType]:
    codes = []
    try:
        for block in _BLOCKS.split(source):
            code = _CODE.get(block)
            if code is None:
                code = compile(block, name, "exec")
                key = hash(block)
                if key in _SEEN and len(_CODE) < 2048:
                    _CODE[block] = code
                elif len(_SEEN) < 200_000:
                    _SEEN.add(key)
                else:
                    _SEEN.clear()
            codes.append(code)
    except SyntaxError:
        return [compile(source, name, "exec")]
    return codes


def run_source(source: str, name: str = "<affuzz case>", *, timeout: float | None = None) -> Outcome:
    """Exec ``source`` (a rendered repro) in a fresh namespace and run its ``check()``.

    With ``timeout``, a case whose sides do not finish in time gets the verdict ``hang``; the side that
    was still running is reported as a ``Timeout`` error.
    """
    codes = _compiled(source, name)  # NOTE [compiling rendered scripts]
    ns: dict[str, Any] = {"__name__": "affuzz_case"}
    start = time.perf_counter()
    with warnings.catch_warnings():
        # torch's own deprecation and tracing warnings (e.g. linearize's make_fx) would flood a campaign
        warnings.simplefilter("ignore")
        for code in codes:
            exec(code, ns)  # noqa: S102 (rendered from the closed IR vocabulary only)
        try:
            with _deadline(timeout):
                verdict, fc, ref = ns["check"]()
        except CaseTimeout:
            done = ns.get("SECONDS", {})
            (_, mode_a, _), _ = ns["SIDES"]
            hung = Side(None, "Timeout", f"no result after {timeout} s")
            finished = Side(f"finished in {done.get(mode_a.__name__, 0.0):.3f} s", None, None)
            a_done = mode_a.__name__ in done
            return Outcome(
                "hang", finished if a_done else hung, hung if a_done else Side("not run", None, None), timeout or 0.0
            )
    seconds = time.perf_counter() - start
    if verdict in ("consistent", "nonfinite") and not isinstance(fc, BaseException):
        # nobody reads an agreeing value (and a tensor's repr costs about as much as a small case)
        return Outcome(verdict, Side("", None, None), Side("", None, None), seconds)
    return Outcome(verdict, _side(fc, ns), _side(ref, ns), seconds)


def run_case(case: Case, oracle: str = MAIN, *, timeout: float | None = None) -> Outcome:
    return run_source(render(case, oracle=oracle), timeout=timeout)


TRIAGE_LABELS = ("functorch_wrong", "reference_wrong", "both_wrong", "undetermined")


def triage_source(source: str, name: str = "<affuzz triage>") -> tuple[str, str]:
    """Run a rendered repro's ``check()`` then its finite-difference ``triage()``: (label, detail).

    Only meaningful for a value_mismatch; the label is one of :data:`TRIAGE_LABELS`.
    """
    ns: dict[str, Any] = {"__name__": "affuzz_case"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, name, "exec"), ns)  # noqa: S102
        verdict, fc, ref = ns["check"]()
        if verdict != "value_mismatch":
            return "undetermined", f"the case gave {verdict} when re-run"
        return ns["triage"](fc, ref)
