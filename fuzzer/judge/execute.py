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
        _forget_metric_edits(dynamo)


# NOTE [guard finalizers]
# Every ID_MATCH guard Dynamo builds registers ``weakref.finalize(obj, CheckFunctionManager.invalidate)``
# (torch/_dynamo/guards.py, ``id_ref``) to drop its cache entry when ``obj`` dies. For an object that
# lives as long as the process (``torch.func.grad``, a module, a torch function) the finalizer, and
# through it the guard manager with its guards and their user stacks, is never freed, ``torch._dynamo.reset()``
# or not: measured on torch 2.13, repeated shrinks of compiled findings kept ~700 finalizers and ~1,900
# StackSummary objects per 45 compiled runs, and a worker grew ~0.3 MiB per compiled run (+47 % in a
# 30-minute campaign). After a reset there is no cache entry left to invalidate, so the finalizers are
# detached then. Dynamo's MetricsContext keeps a traceback per metric edit forever: emptied there too.


def _forget_metric_edits(dynamo: Any) -> None:
    """NOTE [guard finalizers]: the same for Dynamo's thread-local ``MetricsContext``, which appends a
    ``CapturedTraceback`` to ``_edits`` for every metric it sets and never clears the list (torch 2.13 and
    2.14.1): emptied between compiles, when no compile is in progress."""
    get = getattr(getattr(dynamo, "utils", None), "get_metrics_context", None)
    ctx = get() if get is not None else None
    edits = getattr(ctx, "_edits", None)
    if isinstance(edits, list) and not ctx.in_progress():
        edits.clear()


def drop_guard_finalizers() -> int:
    """Detach the ``CheckFunctionManager.invalidate`` finalizers left after a Dynamo reset (NOTE [guard
    finalizers]); returns how many."""
    import weakref

    dropped = 0
    for fin in list(getattr(weakref.finalize, "_registry", {})):
        info = fin.peek()
        func = info[1] if info is not None else None
        bound = getattr(func, "func", None)  # functools.partial(manager.invalidate, obj_str=...)
        if getattr(bound, "__qualname__", "") == "CheckFunctionManager.invalidate":
            fin.detach()
            dropped += 1
    return dropped


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
    compiled = COMPILE_CALL in source
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


# NOTE [interrupted cases]
# The per-case timer raises CaseTimeout wherever the case happens to be, possibly inside a context
# manager's enter or exit in torch (``torch.no_grad()`` in ``finite_forward``, a forward-AD dual level, a
# torch.func level), so the global state it was restoring stays changed: after a 0.1 ms limit the next
# case ran with grad mode off and computed wrong derivatives. After a timeout the state every case
# starts from is put back: grad mode on, no forward-AD dual level, no torch.func level. Before that the
# garbage is collected: a context manager's generator the timer interrupted between its enter and the
# ``with`` (torch.func's ``vmap_increment_nesting``) is garbage in a cycle, and its ``finally`` pops a
# torch.func level whenever the collector finalizes it; left to chance, that was inside a later case,
# which then failed with "!dynamicLayerStack.empty() INTERNAL ASSERT", a torch bug of affuzz's making.
# Collected at once, it pops the level of its own interrupted case (what it raises then is nobody's
# finding and is dropped). A worker also asks to be replaced after a hang (NOTE [worker protocol]), for
# state this cannot see.
# NOTE [leaked torch state]
# A compiled case that fails inside Dynamo or AOTAutograd can leave torch's thread-local state changed for
# every case after it in the process: seen on torch 2.13 in a 10-minute campaign, inference mode left on
# and the functorch dispatch keys left set, after which nearly every case raised ("InferenceMode::is_enabled()
# ... INTERNAL ASSERT", "could not find kernel for custom_function_call") in that worker. Those findings
# never reproduce in a fresh process, so none was published, but the worker's time was lost. After every
# case the worker compares the state with the one every case starts from (:func:`torch_state_changes`);
# where it changed, it asks to be replaced (NOTE [worker protocol]), as after a hang.
#
# The cause, found on such a case: the compiled side raises inside Dynamo's tracing, and the exception's
# traceback keeps alive the frames that hold C++ guards (dispatch keys excluded for as long as the guard
# lives). A guard restores, when it dies, the key set it saw when it was made; dying out of order (the
# garbage collector frees the cycle at any later moment, maybe inside another case) it restores a set of
# the middle of the trace. So the frames of every exception a side raised are cleared innermost first, as
# unwinding would have (:func:`release_exception`), and after a compiled script the garbage is collected
# and grad mode and the dispatch key sets are put back where they can be (:func:`repair_torch_state`).
# A compiled graph also enters forward-AD dual levels through torch._C directly, behind
# ``forward_ad._current_level``; one it left open is found by a probe and closed the same way
# (:func:`_cpp_dual_level_open`; a 10-minute run lost 746 cases of one worker to one).
def release_exception(e: object) -> None:
    """Clear the frames of ``e``'s traceback (and of its cause and context), innermost first."""
    seen: set[int] = set()
    while isinstance(e, BaseException) and id(e) not in seen:
        seen.add(id(e))
        frames = []
        tb = e.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            try:
                frame.clear()
            except RuntimeError:  # a frame still running (the one that called check): leave it
                pass
        e.__traceback__ = None
        e = e.__cause__ or e.__context__


# NOTE [frozen heap]
# With torch imported a process holds about 300,000 objects the cycle collector tracks, and Dynamo and
# Inductor add more once a compiled case imports them. A full collection (the ``gc.collect()`` that
# :func:`repair_torch_state` runs after every compiled script, and the interpreter's own generation-2
# collections as a fuzz loop allocates) walks them all: 0.2-0.3 s each, for objects that live as long as
# the process (modules, torch's registries and caches). So a worker freezes them (``gc.freeze()``: a
# permanent generation the collector never walks) once it has imported what cases import: when it
# starts, and again after any case that imported modules (the first compiled case of each backend imports
# Dynamo's or Inductor's). A full collection then walks only what cases made since, about a millisecond.
# The price: an object alive at a freeze that later becomes garbage in a reference cycle is never freed;
# freezes are as few as the imports, and what is alive then is the worker's own long-lived state. Only a
# process that asked for it (:func:`freeze_heap` with ``start=True``, the campaign worker) ever freezes.
_FROZEN_MODULES: list[int] = []  # len(sys.modules) at the last freeze; empty: this process never freezes


def freeze_heap(*, start: bool = False) -> bool:
    """NOTE [frozen heap]: collect, then freeze what is alive, where this process froze before (or
    ``start``) and modules were imported since; True where it froze."""
    if not start and (not _FROZEN_MODULES or len(sys.modules) <= _FROZEN_MODULES[0]):
        return False
    import gc

    gc.collect()
    gc.freeze()
    _FROZEN_MODULES[:] = [len(sys.modules)]
    return True


def _key_names(keys: object) -> set[str]:
    text = str(keys)
    inner = text[text.index("(") + 1 : text.rindex(")")] if "(" in text else ""
    return {k.strip() for k in inner.split(",") if k.strip()}


def repair_torch_state() -> None:
    """Collect the garbage of the script just run, then put grad mode and the thread-local dispatch key sets
    back as they were when the process started (NOTE [leaked torch state])."""
    import gc

    torch = sys.modules.get("torch")
    if torch is None:
        return
    gc.collect()
    torch.set_grad_enabled(True)
    if getattr(torch.autograd.forward_ad, "_current_level", -1) < 0 and _cpp_dual_level_open(torch):
        torch._C._exit_dual_level(level=0)  # a level the compiled graph entered and never left
    force = getattr(torch._C, "_ForceDispatchKeyGuard", None)
    now = [str(torch._C._dispatch_tls_local_include_set()), str(torch._C._dispatch_tls_local_exclude_set())]
    if force is not None and _BASELINE_SETS and now != [str(s) for s in _BASELINE_SETS]:
        guard = force(*_BASELINE_SETS)  # every key, also those Python's DispatchKey does not name
        guard.__enter__()
        _FORCED.append(guard)
        return
    for name, setter in (
        ("_dispatch_tls_local_include_set", "_dispatch_tls_set_dispatch_key_included"),
        ("_dispatch_tls_local_exclude_set", "_dispatch_tls_set_dispatch_key_excluded"),
    ):
        current, set_key = getattr(torch._C, name, None), getattr(torch._C, setter, None)
        if current is None or set_key is None or name not in _BASELINE:
            continue
        want, have = _key_names(_BASELINE[name]), _key_names(current())
        for key in want ^ have:
            member = getattr(torch._C.DispatchKey, key, None)
            if member is not None:
                set_key(member, key in want)


_BASELINE: dict[str, str] = {}  # the dispatch key sets of the first call: a process's clean state
_BASELINE_SETS: list[Any] = []  # the same, as torch's DispatchKeySet objects (include, exclude)
_FORCED: list[Any] = []  # guards that put the key sets back, entered and never left (they would undo it)


def record_torch_state() -> None:
    """Import torch and take this (clean) state as the one every case starts from."""
    import torch

    torch_state_changes()
    if not _BASELINE_SETS:
        _BASELINE_SETS[:] = [torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()]


def torch_state_changes() -> list[str]:
    """What of torch's global state differs from the state every case starts from (empty: nothing)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    changed = []
    if torch.is_inference_mode_enabled():
        changed.append("inference mode on")
    if not torch.is_grad_enabled():
        changed.append("grad mode off")
    if getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0:
        changed.append("a forward-AD dual level open")
    elif _cpp_dual_level_open(torch):
        changed.append("a forward-AD dual level open in C++ only")
    functorch = getattr(torch._C, "_functorch", None)
    depth = getattr(functorch, "get_dynamic_layer_stack_depth", None)
    if depth is not None and depth() > 0:
        changed.append("a torch.func level open")
    for name, what in (
        ("_dispatch_tls_local_include_set", "included"),
        ("_dispatch_tls_local_exclude_set", "excluded"),
    ):
        keys = getattr(torch._C, name, None)
        if keys is not None and _BASELINE.setdefault(name, str(keys())) != str(keys()):
            changed.append(f"dispatch keys {what}: {keys()}")
    for name, what in (("_len_torch_dispatch_stack", "dispatch"), ("_len_torch_function_stack", "torch function")):
        size = getattr(torch._C, name, None)
        if size is not None and size() > 0:
            changed.append(f"a {what} mode active")
    return changed


def _cpp_dual_level_open(torch: Any) -> bool:
    """Whether autograd's C++ side has a forward-AD dual level open that Python's
    ``forward_ad._current_level`` does not know of: a compiled graph enters and exits levels through
    ``torch._C`` directly, so one that raised in between leaves the level open behind Python's back, and
    every later dual level in the process fails with "Nested forward mode AD is not supported" (a 10-minute
    run of issue 22: 746 cases of one worker in its last 80 s, none caught by the check above). Probed by
    entering a level: only one may be open, so entering fails exactly when one is."""
    enter, leave = getattr(torch._C, "_enter_dual_level", None), getattr(torch._C, "_exit_dual_level", None)
    if enter is None or leave is None:
        return False
    try:
        level = enter()
    except RuntimeError:
        return True
    leave(level=level)
    return False


def restore_torch_state() -> None:
    """NOTE [interrupted cases]: finalize what the interrupted case left half-done, then put grad mode, the
    forward-AD levels and the torch.func levels back as every case starts."""
    import gc

    torch = sys.modules.get("torch")
    if torch is None:
        return
    hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: None
    try:
        gc.collect()  # orphaned context managers exit now, not inside a later case
    finally:
        sys.unraisablehook = hook
    torch.set_grad_enabled(True)
    fwd = torch.autograd.forward_ad
    while getattr(fwd, "_current_level", -1) >= 0:
        fwd.exit_dual_level()
    if _cpp_dual_level_open(torch):  # levels nest no deeper than one: the open one is level 0
        torch._C._exit_dual_level(level=0)
    functorch = getattr(torch._C, "_functorch", None)
    depth = getattr(functorch, "get_dynamic_layer_stack_depth", None)
    undo = getattr(functorch, "pop_dynamic_layer_stack_and_undo_to_depth", None)
    if depth is not None and undo is not None:
        if depth() > 0:
            undo(0)
        return
    peek = getattr(functorch, "peek_interpreter_stack", None)  # torch 2.0: no undo_to_depth
    pop = getattr(functorch, "pop_dynamic_layer_stack", None)
    while peek is not None and pop is not None and peek() is not None:
        pop()


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
