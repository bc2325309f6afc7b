"""Torch's process-global state around the cases a process runs: recorded when the process starts, checked
after every case, repaired after compiled and interrupted cases; and the frozen heap of a worker process.

Split from :mod:`fuzzer.judge.execute`, which runs the cases; this module only knows torch's state.
"""

from __future__ import annotations

import sys
from typing import Any

from ..codegen.function import OP_NAMESPACE


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


def prepare_process() -> None:
    """NOTE [leaked torch state]: what every process that runs cases does once, before its first case (the
    campaign worker and ``affuzz check`` both call this, so the two cannot drift): the batching fallback's
    per-op warning off (NOTE [custom op teardown]), then this clean state recorded as the one
    :func:`repair_torch_state` puts back."""
    quiet_vmap_fallback()
    record_torch_state()


def settle_torch_state() -> list[str]:
    """After a case: where torch's state differs from the recorded one, repair it; what still differs
    (empty: the next case starts clean)."""
    if not torch_state_changes():
        return []
    repair_torch_state()
    return torch_state_changes()


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


def quiet_vmap_fallback() -> None:
    """NOTE [custom op teardown]: a custom op without register_vmap is batched by torch's fallback, which warns
    once per op ("we have not yet implemented the batching rule for affuzz::op_..."): every custom-op case
    has an op of its own, so a worker turns that warning off before it records torch's state."""
    import torch

    torch._C._functorch._set_vmap_fallback_warning_enabled(False)


# NOTE [custom op teardown]
# A custom-op case (NOTE [custom op mode] in fuzzer/ir/custom_op.py) registers its op with the dispatcher
# when its script is executed: a Library fragment with the schema, the implementation, the fake and
# autograd kernels, the vmap rule. Left registered, a night of cases would keep one per distinct op in
# the dispatcher and in torch.ops. After each script every op of affuzz's namespace is destroyed the way
# torch itself replaces an op registered again (``get_library_allowing_overwrite`` in
# torch/_library/custom_ops.py: the fragment's ``_destroy()``, which also drops the torch.ops cache).


def drop_custom_ops() -> int:
    """NOTE [custom op teardown]: destroy the ops of affuzz's namespace registered so far; returns how many."""
    mod = sys.modules.get("torch._library.custom_ops")
    table = getattr(mod, "OPDEF_TO_LIB", None)
    if not isinstance(table, dict):
        return 0
    mine = [q for q in table if q.startswith(f"{OP_NAMESPACE}::")]
    for qualname in mine:
        table.pop(qualname)._destroy()
    return len(mine)


# NOTE [guard finalizers]
# Every ID_MATCH guard Dynamo builds registers ``weakref.finalize(obj, CheckFunctionManager.invalidate)``
# (torch/_dynamo/guards.py, ``id_ref``) to drop its cache entry when ``obj`` dies. For an object that
# lives as long as the process (``torch.func.grad``, a module, a torch function) the finalizer, and
# through it the guard manager with its guards and their user stacks, is never freed, ``torch._dynamo.reset()``
# or not: measured on torch 2.13, repeated shrinks of compiled findings kept ~700 finalizers and ~1,900
# StackSummary objects per 45 compiled runs, and a worker grew ~0.3 MiB per compiled run (+47 % in a
# 30-minute campaign). After a reset there is no cache entry left to invalidate, so the finalizers are
# detached then. Dynamo's MetricsContext keeps a traceback per metric edit forever: emptied there too.


def forget_metric_edits(dynamo: Any) -> None:
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
