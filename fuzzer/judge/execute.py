"""Execute a case: render it, exec the script in a fresh namespace, and call its ``check()``.

NOTE [the repro is what runs]
The fuzzer never evaluates a case any other way: the verdict comes from the rendered script's own
``check()``, run from the rendered source, so a verdict cannot depend on affuzz code that a repro lacks.
The published ``repro.py`` is the same template ended in the seed's style (NOTE [repro styles] in
:mod:`fuzzer.codegen.render`), and before a finding is reported that file is run in a fresh interpreter and
must print the same verdict (:mod:`fuzzer.publish.findings`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import linecache
import re
import signal
import sys
import threading
import time
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from types import CodeType
from typing import Any

from ..codegen.error_key import dynamo_inner_error, message_key
from ..codegen.render import render
from ..ir.case import Case
from ..ir.oracles import MAIN
from .torch_state import (
    drop_custom_ops,
    drop_guard_finalizers,
    forget_metric_edits,
    freeze_heap,
    release_exception,
    repair_torch_state,
    restore_torch_state,
)


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
    # NOTE [errors Dynamo wraps] in fuzzer/codegen/error_key.py: the program's own error inside Dynamo's
    # fake-tensor wrapper, as "Type: first line" ('' for any other error)
    inner: str = ""

    def program_error(self) -> Side:
        """This side as the program's own error: a Dynamo-wrapped one unwrapped (NOTE [errors Dynamo
        wraps]); the key is then that of the inner error, so two sides that raise it agree. Fingerprints
        stay the wrapper's (what a repro's traceback ends on)."""
        if not self.inner:
            return self
        name, _, text = self.inner.partition(": ")
        return replace(self, error_type=name, error=text, key=message_key(name, text), inner="")

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
    functorch: Side  # side A (NOTE [oracles]: what the oracle runs through torch.func)
    reference: Side  # side B (the oracle's reference: create_graph loops, jacfwd for jacrev, ...)
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "functorch": asdict(self.functorch),
            "reference": asdict(self.reference),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Outcome:
        return cls(d["verdict"], Side(**d["functorch"]), Side(**d["reference"]), float(d["seconds"]))


def torch_frame(e: BaseException) -> str:
    """``torch/<path>:<function>`` of the frame that raised ``e`` when it is torch's Python code; '' when
    the innermost frame is the case's own code (an op it called raised from C++, and the message names
    the op): the torch frames further out only say which transform called the case. (Read from the code
    object: no source lines are looked up, so nothing enters ``linecache``.)"""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    code = tb.tb_frame.f_code
    path = code.co_filename.replace("\\", "/")
    if "/torch/" not in path:
        return ""
    return f"torch/{path.rsplit('/torch/', 1)[1]}:{code.co_name}"


def _side(result: Any, ns: dict[str, Any]) -> Side:
    """A side's result as the script's ``outcome()`` gave it: a value, or the exception raised."""
    if isinstance(result, BaseException):
        text = str(result)
        msg = text.strip().splitlines()
        bug, key = bool(ns["torch_bug"](result)), str(ns["error_key"](result))  # the script's own
        inner = dynamo_inner_error(type(result).__name__, text)
        first = (inner[1].strip().splitlines() or [""])[0] if inner else ""
        wrapped = f"{inner[0]}: {first}" if inner else ""
        return Side(None, type(result).__name__, msg[0] if msg else "", torch_frame(result), bug, key, wrapped)
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
# is reused while the same text is among the last :data:`_CODE_BLOCKS` blocks used: the runtime's
# blocks, and the Function and ``f`` a group of cases shares (NOTE [case groups] in strategies/cases.py).
# Executing the blocks in order into one namespace is executing the script: each block is whole
# top-level statements. Should a split ever fall inside a string, that block does not compile and the
# whole script is compiled as one, as before.
_BLOCKS = re.compile(r"\n\n\n(?=\S)")
_CODE_BLOCKS = 512
_CODE: OrderedDict[str, CodeType] = OrderedDict()  # block text -> code, least recently used first


def _compiled(source: str, name: str) -> list[CodeType]:
    codes = []
    try:
        for block in _BLOCKS.split(source):
            code = _CODE.get(block)
            if code is None:
                code = _CODE[block] = compile(block, name, "exec")
                if len(_CODE) > _CODE_BLOCKS:
                    _CODE.popitem(last=False)
            else:
                _CODE.move_to_end(block)
            codes.append(code)
    except SyntaxError:
        return [compile(source, name, "exec")]
    return codes


# NOTE [generated code and linecache]
# torch.fx (linearize's make_fx, generate_vmap_rule's tracing on some versions) execs the code of every
# graph it builds and registers it with ``linecache.lazycache`` under ``<eval_with_key>.N``, keeping a
# copy of the graph module's globals alive with it, plus the source in ``torch.fx.graph_module._loader``.
# Nothing ever removes them: a campaign's worker grew by megabytes a minute. After each case the
# fuzzer drops them (a published repro runs in its own process and keeps them, for its tracebacks).
def release_generated_code() -> None:
    """Forget the source torch.fx registered for the graphs of the case just run."""
    gm = sys.modules.get("torch.fx.graph_module")
    cache = getattr(getattr(gm, "_loader", None), "eval_cache", None)
    if isinstance(cache, dict) and cache:
        cache.clear()
        for key in [k for k in linecache.cache if isinstance(k, str) and k.startswith("<eval_with_key>")]:
            linecache.cache.pop(key, None)


# NOTE [the case module]
# A script runs in the namespace of a module registered in ``sys.modules`` under a name of its own
# (``affuzz_case_<n>``), not in a bare dict: torch.compile's Dynamo looks up the module a traced
# function's globals name (its guards read globals through it), as it would ``__main__`` for a published
# repro. One name for every script made a guard read the helpers of the next script's module. The
# module leaves ``sys.modules`` when its script is done (:func:`drop_namespace`).
_MODULES = itertools.count()


def case_namespace() -> dict[str, Any]:
    """A fresh namespace for one script (NOTE [the case module])."""
    module = types.ModuleType(f"affuzz_case_{next(_MODULES)}")
    sys.modules[module.__name__] = module
    return module.__dict__


def drop_namespace(ns: dict[str, Any]) -> None:
    sys.modules.pop(ns.get("__name__", ""), None)


# NOTE [compiled cases]
# A script that calls torch.compile (NOTE [compiled mode] in fuzzer/ir/case.py) leaves Dynamo's caches
# full: every case's torch.func wrapper is one more entry on the same torch code object, and past the
# recompile limit Dynamo would silently run the next cases eagerly. So the limit is made a hard error
# (``fail_on_recompile_limit_hit``: a case that reaches it says so instead of comparing eager with
# eager; the judge counts such a case not_applicable, ``compile_recompile_limit``, which summary.json shows)
# and Dynamo is reset before and after every compiled script, which also keeps a worker's memory flat. A
# compiled script is compiled whole, not from the shared blocks of NOTE [compiling rendered scripts]:
# Dynamo keeps state on the code objects it traced, and a finding that only a process's history shows is
# one its repro, in a fresh process, does not reproduce.
COMPILE_CALL = "torch.compile("
OPCHECK_CALL = "torch.library.opcheck("  # NOTE [custom op mode]: opcheck compiles the op


@functools.cache
def compile_unavailable() -> str | None:
    """Why torch.compile cannot run with this torch and Python (torch 2.0 on Python 3.11 has none), or
    None where it can."""
    try:
        import torch._dynamo

        torch._dynamo.eval_frame.check_if_dynamo_supported()
    except Exception as e:  # noqa: BLE001 (any reason is the reason)
        return f"{type(e).__name__}: {e}"
    return None


@functools.cache
def _prepare_compiler() -> None:
    """Once per process: the recompile limit an error (NOTE [compiled cases]), and torch.compile's own
    logging (a traceback on stderr for every fake-tensor failure it recovers from) quiet: what a case
    raises is its outcome, and the campaign's output is its own."""
    import logging

    import torch._dynamo

    config = torch._dynamo.config
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True
    sys.unraisablehook = quiet_dynamo_cleanup(sys.unraisablehook)
    for name in (
        "torch._dynamo",
        "torch._inductor",
        "torch._functorch",
        "torch._higher_order_ops",  # (the selective checkpoint's warning under compile: NOTE [checkpoint mode])
        "torch._subclasses",
        "torch._guards",
        "torch.fx",
    ):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def quiet_dynamo_cleanup(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` without one message: Dynamo's ``CleanupHook`` (a weakref callback that
    deletes a global it installed, e.g. ``__builtins_dict___3``) raising ``KeyError`` when the global is gone
    already, as at interpreter exit once module dicts are torn down (one message per compiled frame of the
    process's life). Nothing of a case's outcome is in it; every other unraisable exception still reaches
    ``hook``."""

    def quiet(unraisable: Any) -> object:
        tb = unraisable.exc_traceback
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code if tb is not None else None
        if (
            unraisable.exc_type is KeyError
            and code is not None
            and code.co_name == "__call__"
            and code.co_filename.endswith(("_dynamo/utils.py", "_dynamo\\utils.py"))
        ):
            return None
        return hook(unraisable)

    return quiet


def reset_compiler() -> None:
    """Forget everything Dynamo compiled and cached (NOTE [compiled cases]), and NOTE [guard finalizers]."""
    torch = sys.modules.get("torch")
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None:
        dynamo.reset()
        drop_guard_finalizers()
        forget_metric_edits(dynamo)


def run_source(source: str, name: str = "<affuzz case>", *, timeout: float | None = None) -> Outcome:
    """Exec ``source`` (a rendered repro) in a fresh namespace and run its ``check()``.

    With ``timeout``, a case whose sides do not finish in time gets the verdict ``hang``; the side that
    was still running is reported as a ``Timeout`` error.
    """
    return _run(source, (None,), name, timeout)[None]


def run_case(case: Case, oracle: str = MAIN, *, timeout: float | None = None) -> Outcome:
    return run_source(render(case, oracle=oracle), timeout=timeout)


def run_oracles(
    case: Case,
    oracles: tuple[str, ...],
    *,
    timeout: float | None = None,
    before: Callable[[str], None] | None = None,
) -> dict[str, Outcome]:
    """NOTE [one exec per case]: the outcome of ``case`` under each of ``oracles``, from one script that
    defines the Function once and runs side A once (``timeout`` applies to each oracle; ``before(o)`` is
    called before oracle ``o`` runs)."""
    source = render(case, oracle=oracles[0], also=oracles[1:])
    return _run(source, oracles, "<affuzz case>", timeout, before)  # type: ignore[return-value,arg-type]


def run_script(
    source: str, oracles: tuple[str, ...], name: str = "<affuzz case>", *, timeout: float | None = None
) -> dict[str, Outcome]:
    """:func:`run_oracles` of a script rendered another way (``affuzz check``: a Function imported from
    the user's module) with the same runtime: ``check()``, ``SIDES`` and, for several oracles,
    ``ORACLE_SIDES``."""
    return _run(source, oracles, name, timeout)  # type: ignore[return-value,arg-type]


def _run(
    source: str,
    oracles: tuple[str | None, ...],
    name: str,
    timeout: float | None,
    before: Callable[[str | None], None] | None = None,
) -> dict[str | None, Outcome]:
    compiled = COMPILE_CALL in source or OPCHECK_CALL in source
    if compiled:  # NOTE [compiled cases]: code objects of its own (Dynamo keeps state on them), a clean Dynamo
        reset_compiler()
        codes = [compile(source, name, "exec")]
    else:
        codes = _compiled(source, name)  # NOTE [compiling rendered scripts]
    ns = case_namespace()
    with warnings.catch_warnings():
        # torch's own deprecation and tracing warnings (e.g. linearize's make_fx) would flood a campaign
        warnings.simplefilter("ignore")
        try:
            for code in codes:
                exec(code, ns)  # noqa: S102 (rendered from the closed IR vocabulary only)
            if compiled:
                _prepare_compiler()
            # in a function of its own: once it returns, nothing holds the sides' results (exceptions whose
            # tracebacks keep torch's guards alive: NOTE [leaked torch state])
            return _run_checks(ns, oracles, timeout, before)
        finally:
            release_generated_code()  # NOTE [generated code and linecache]
            if compiled:
                reset_compiler()  # NOTE [compiled cases]
            drop_namespace(ns)
            ns.clear()
            drop_custom_ops()  # NOTE [custom op teardown]
            if compiled:
                repair_torch_state()  # NOTE [leaked torch state]
            freeze_heap()  # NOTE [frozen heap]: where the case imported modules


def _run_checks(
    ns: dict[str, Any],
    oracles: tuple[str | None, ...],
    timeout: float | None,
    before: Callable[[str | None], None] | None,
) -> dict[str | None, Outcome]:
    """Each oracle's ``check()`` of the script executed into ``ns``, side A run once (NOTE [one exec per
    case])."""
    results: dict[str | None, Outcome] = {}
    start = time.perf_counter()
    a_known: tuple[Any, ...] = ()
    for i, oracle in enumerate(oracles):
        if before is not None:
            before(oracle)
        side_b = ns.get("ORACLE_SIDES", {}).get(oracle)  # None: the script's own SIDES[1]
        side_a = ns.get("ORACLE_A", {}).get(oracle)  # an oracle's own side A (NOTE [compiled mode])
        try:
            with _deadline(timeout):
                if side_a is not None:
                    verdict, fc, ref = ns["check"](side_b, (), side_a)
                else:
                    verdict, fc, ref = ns["check"](side_b, a_known)
        except CaseTimeout:
            restore_torch_state()  # NOTE [interrupted cases]
            hang = _hang(ns, timeout)
            if not a_known:  # side A itself hung: it would hang under every oracle
                return {**results, **dict.fromkeys(oracles[i:], hang)}
            results[oracle] = hang
            start = time.perf_counter()
            continue
        seconds, start = time.perf_counter() - start, time.perf_counter()
        if verdict == "nonfinite":  # decided by f alone: the same under every oracle
            return {**results, **dict.fromkeys(oracles[i:], Outcome(verdict, _AGREE, _AGREE, seconds))}
        if side_a is None:
            a_known = (fc,)
        if verdict == "consistent" and not isinstance(fc, BaseException):
            # nobody reads an agreeing value (and a tensor's repr costs about as much as a small case)
            results[oracle] = Outcome(verdict, _AGREE, _AGREE, seconds)
        else:
            results[oracle] = Outcome(verdict, _side(fc, ns), _side(ref, ns), seconds)
        release_exception(ref)  # NOTE [leaked torch state]
    return results


_AGREE = Side("", None, None)


def _hang(ns: dict[str, Any], timeout: float | None) -> Outcome:
    """A ``hang`` outcome: the side still running when the timer fired is the one that timed out."""
    done = ns.get("SECONDS", {})
    _, mode_a, _ = ns["SIDES"][0]
    hung = Side(None, "Timeout", f"no result after {timeout} s")
    finished = Side(f"finished in {done.get(mode_a.__name__, 0.0):.3f} s", None, None)
    a_done = mode_a.__name__ in done
    return Outcome(
        "hang", finished if a_done else hung, hung if a_done else Side("not run", None, None), timeout or 0.0
    )


TRIAGE_LABELS = ("functorch_wrong", "reference_wrong", "both_wrong", "compiled_wrong", "undetermined")

#: The triage of a compiled_vs_eager value finding (NOTE [compiled mode]): both sides run the same rules of
#: the same Function, so whatever the mathematics, torch.compile should return what eager returns; no
#: finite-difference check can overrule that (a deliberately non-exact custom rule is the common case).
COMPILED_TRIAGE = (
    "compiled_wrong",
    "torch.compile changed what the same program computes eagerly (eager runs the same rules: it is the reference)",
)


def triage_source(source: str, name: str = "<affuzz triage>") -> tuple[str, str]:
    """Run a rendered repro's ``check()`` then its finite-difference ``triage()``: (label, detail).

    Only meaningful for a value_mismatch; the label is one of :data:`TRIAGE_LABELS`.
    """
    ns = case_namespace()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(compile(source, name, "exec"), ns)  # noqa: S102
            verdict, fc, ref = ns["check"]()
            if verdict != "value_mismatch":
                return "undetermined", f"the case gave {verdict} when re-run"
            return ns["triage"](fc, ref)
        finally:
            if COMPILE_CALL in source:
                reset_compiler()  # NOTE [compiled cases]
            drop_namespace(ns)
