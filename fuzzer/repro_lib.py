"""Runtime pieces of every repro script: the create_graph-mode transforms and the comparison.

This file is real, importable, lint-checked Python, but affuzz never imports it to run a case:
:mod:`fuzzer.render` copies the source of the functions a case needs (found with ``ast``, so rendering
stays torch-free) into the standalone script, and the fuzzer executes that script. What ran is what the
repro shows.

NOTE [mode equivalence]
Each functorch level has a plain-autograd twin; create_graph mode composes the twins in the same order:

    torch.func level            create_graph mode twin
    ----------------            ----------------------
    grad(fn, argnums=a)         autograd_grad(fn, argnums=a, create_graph=True)
    vmap(fn)                    vmap_loop(fn): call fn on each slice along dim 0, torch.stack the results
    jacrev(fn, argnums=a)       jacrev_loop(fn, argnums=a): one autograd.grad(create_graph=True) per output
                                element, rows stacked and reshaped to out.shape + x.shape
    autograd_grad(fn) (outer)   itself (plain torch.autograd.grad, grad_outputs=ones), as in the seed repro

Both modes see the same inputs; functorch mode's inputs require grad only when an outer autograd_grad
level needs them to, create_graph mode's always do. Where the differentiated output does not depend on
an input (backward returned None, or nothing requires grad), the twins return zeros, which is what
torch.func returns; so "disconnected" and "zero" compare equal, and only values can differ.
Where ``grad`` needs a scalar, both modes sum the inner output first (``summed``).
"""

from __future__ import annotations

import torch


def summed(fn):
    return lambda *args: fn(*args).sum()


def autograd_grad(fn, argnums=0, create_graph=False):
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        if not out.requires_grad:
            return torch.zeros_like(x)
        (g,) = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)
        return torch.zeros_like(x) if g is None else g

    return wrapped


def vmap_loop(fn):
    def wrapped(*args):
        return torch.stack([fn(*[a[i] for a in args]) for i in range(args[0].shape[0])])

    return wrapped


def jacrev_loop(fn, argnums=0):
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        rows = []
        for o in out.reshape(-1):
            g = None
            if o.requires_grad:
                (g,) = torch.autograd.grad(o, x, create_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(x) if g is None else g)
        return torch.stack(rows).reshape(out.shape + x.shape)

    return wrapped


def run(mode, requires_grad):
    args = [t.clone().requires_grad_(requires_grad) for t in inputs()]  # noqa: F821 (defined by the script)
    try:
        return mode(*args), None
    except Exception as e:  # noqa: BLE001 (any error is an outcome)
        return None, e


def check():
    fc, fc_err = run(functorch_mode, FUNCTORCH_REQUIRES_GRAD)  # noqa: F821
    ref, ref_err = run(create_graph_mode, True)  # noqa: F821
    if fc_err is None and ref_err is None:
        try:
            torch.testing.assert_close(fc, ref, equal_nan=True)
            verdict = "consistent"
        except AssertionError:
            verdict = "value_mismatch"
    elif fc_err is not None and ref_err is not None:
        verdict = "consistent" if type(fc_err) is type(ref_err) else "different_errors"
    else:
        verdict = "error_functorch_only" if fc_err is not None else "error_reference_only"
    return verdict, (fc, fc_err), (ref, ref_err)


def show(result):
    value, err = result
    return f"{type(err).__name__}: {err}" if err is not None else str(value)


def main():
    verdict, fc, ref = check()
    print("============= functorch")
    print(show(fc))
    print("============= create_graph")
    print(show(ref))
    print("verdict:", verdict)
    return 0 if verdict == "consistent" else 1
