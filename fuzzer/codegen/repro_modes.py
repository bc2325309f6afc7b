"""Runtime pieces of the repro scripts of the mode oracles: ``f`` under activation checkpointing or
saved-tensor hooks (NOTE [checkpoint mode] in :mod:`fuzzer.ir.case`), and a side under compiled autograd.

Like :mod:`fuzzer.codegen.repro_lib`: real, lint-checked Python whose functions' sources are copied into
the scripts that need them (rendering stays torch-free); affuzz never imports it to run a case. Each
helper takes the function it wraps and returns one of the same arguments, so it composes with the
create_graph twins and the torch.func transforms like any level.
"""

from __future__ import annotations

import torch


def checkpointed(fn):  # fn under non-reentrant activation checkpointing: forward recomputed in backward
    from torch.utils.checkpoint import checkpoint

    return lambda *args: checkpoint(fn, *args, use_reentrant=False)


def selective_checkpointed(fn):  # checkpointed with a selective policy: the products of mul saved, the rest recomputed
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    def policy():
        return create_selective_checkpoint_contexts([torch.ops.aten.mul.Tensor])

    return lambda *args: checkpoint(fn, *args, use_reentrant=False, context_fn=policy)


def hooked(fn):  # fn with saved-tensor hooks that keep each saved tensor (packed detached, as the docs advise)
    def wrapped(*args):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
            return fn(*args)

    return wrapped


def hooked_copy(fn):  # fn with saved-tensor hooks that pack a copy of each saved tensor
    def wrapped(*args):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
            return fn(*args)

    return wrapped


def on_cpu(fn):  # fn under torch.autograd.graph.save_on_cpu(): saved tensors kept in CPU memory
    def wrapped(*args):
        with torch.autograd.graph.save_on_cpu():
            return fn(*args)

    return wrapped


def opchecked(fn):  # fn, once torch.library.opcheck passed the custom op on the arguments fn gives it
    def wrapped(*args):
        if not getattr(opchecked, "passed", False):  # checked until it passes once: then fn alone, timed as fn
            torch.library.opcheck(op, op_args(*args))  # noqa: F821 (the script's custom op and its arguments)
            opchecked.passed = True
        return fn(*args)

    return wrapped


def compiled_autograd(fn, backend):  # fn with its backward compiled too: torch._dynamo's compiled autograd
    def wrapped(*args):
        ca = torch._dynamo.compiled_autograd
        enable = ca._enable if hasattr(ca, "_enable") else ca.enable  # (enable until torch 2.5)
        with enable(torch.compile(backend=backend)):
            return fn(*args)

    return wrapped
