"""Runtime pieces of every repro script: the create_graph-mode transforms and the comparison.

This file is real, importable, lint-checked Python, but affuzz never imports it to run a case:
:mod:`fuzzer.codegen.render` copies the source of the functions a case needs (found with ``ast``, so rendering
stays torch-free) into the standalone script, and the fuzzer executes that script. What ran is what the
repro shows.

NOTE [mode equivalence]
Each functorch level has a plain-autograd twin; create_graph mode composes the twins in the same order:

    torch.func level              create_graph mode twin
    ----------------              ----------------------
    grad(fn, argnums=a)           autograd_grad(fn, argnums=a, create_graph=True)
    vjp_ones(fn, argnums=a)       autograd_grad(fn, argnums=a, create_graph=True)   (cotangent: ones)
    jacrev(fn, argnums=a)         jacrev_loop(fn, argnums=a): one autograd.grad(create_graph=True) per
                                  output element, rows stacked and reshaped to out.shape + x.shape
    hessian(fn, argnums=a)        jacrev_loop(jacrev_loop(fn, argnums=a), argnums=a)
    jacfwd(fn, argnums=a)         jacfwd_dual(fn, argnums=a): forward_ad dual tensors, one basis tangent
                                  per input element, columns stacked to out.shape + x.shape
    jvp_ones(fn, argnums=a)       jvp_dual(fn, argnums=a): forward_ad with tangent ones   (also the
    linearize_ones(fn, ...)       twin of linearize, whose jvp_fn is applied to ones)
    vmap(fn, in_dims, out_dims)   vmap_loop(fn, in_dims, out_dims): fn on each slice (select along
                                  in_dims[i]; None passes the input whole), torch.stack along out_dims
    autograd_grad(fn) (outer)     itself (plain torch.autograd.grad, grad_outputs=ones), as in the seed

(autograd_grads is autograd_grad for a tuple of argnums.)

vjp_ones/jvp_ones/linearize_ones wrap torch.func.vjp/jvp/linearize into levels: they return the
cotangent (for ones) or the tangent output (for a tangent of ones). Plain autograd has no nested
forward-mode levels, so a stack holds at most one of jacfwd/jvp/linearize.

Both modes see the same inputs; functorch mode's inputs require grad only when an outer autograd_grad
level needs them to, create_graph mode's always do. Where the differentiated output does not depend on
an input (backward returned None, or nothing requires grad), the twins return zeros, which is what
torch.func returns; so "disconnected" and "zero" compare equal, and only values can differ.
Where ``grad`` needs a scalar, both modes sum the inner output first (``summed``).
"""

from __future__ import annotations

import re
import time

import torch

from .error_key import message_key


def summed(fn):
    return lambda *args: fn(*args).sum()


def autograd_grad(fn, argnums=0, create_graph=False):
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        g = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)[0] if out.requires_grad else None  # fmt: skip
        return torch.zeros_like(x) if g is None else g  # None (nothing reaches x): zeros, as torch.func returns

    return wrapped


def autograd_grads(fn, argnums, create_graph=False):  # argnums: a tuple
    def wrapped(*args):
        out, xs = fn(*args), [args[i] for i in argnums]
        gs = [None] * len(xs)
        if out.requires_grad:
            gs = torch.autograd.grad(out, xs, torch.ones_like(out), create_graph=create_graph, allow_unused=True)
        return tuple(torch.zeros_like(x) if g is None else g for x, g in zip(xs, gs, strict=True))

    return wrapped


def all_inputs(twin, fn, names):  # affuzz check: twin(fn, argnums=i) for each input of fn, by its name (a dict)
    return lambda *args: {name: twin(fn, argnums=i)(*args) for i, name in enumerate(names)}


def all_pairs(outer, inner, fn, names):  # affuzz check: each second derivative, outer(inner(fn, i), j)
    return lambda *args: {
        f"d{b} d{a}": outer(inner(fn, argnums=i), argnums=j)(*args)
        for i, a in enumerate(names)
        for j, b in enumerate(names)
    }


def vmap_loop(fn, in_dims=0, out_dims=0):
    def wrapped(*args):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        n = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
        outs = [fn(*[a if d is None else a.select(d, i) for a, d in zip(args, dims, strict=True)]) for i in range(n)]
        return torch.stack(outs, dim=out_dims)

    return wrapped


def _nums(argnums):
    return argnums if isinstance(argnums, tuple) else (argnums,)


def _replace_arg(args, argnums, xs):
    new = dict(zip(_nums(argnums), xs, strict=True))
    return tuple(new.get(i, a) for i, a in enumerate(args))


def _result(argnums, values):
    return tuple(values) if isinstance(argnums, tuple) else values[0]


def vjp_ones(fn, argnums=0):
    def wrapped(*args):
        primals = [args[i] for i in _nums(argnums)]
        out, pull = torch.func.vjp(lambda *p: fn(*_replace_arg(args, argnums, p)), *primals)
        return _result(argnums, pull(torch.ones_like(out)))

    return wrapped


def jvp_ones(fn, argnums=0):
    def wrapped(*args):
        primals = tuple(args[i] for i in _nums(argnums))
        ones = tuple(torch.ones_like(p) for p in primals)
        return torch.func.jvp(lambda *p: fn(*_replace_arg(args, argnums, p)), primals, ones)[1]

    return wrapped


def linearize_ones(fn, argnums=0):
    def wrapped(*args):
        primals = [args[i] for i in _nums(argnums)]
        _, jvp_fn = torch.func.linearize(lambda *p: fn(*_replace_arg(args, argnums, p)), *primals)
        return jvp_fn(*[torch.ones_like(p) for p in primals])

    return wrapped


def jvp_dual(fn, argnums=0):
    def wrapped(*args):
        fwd = torch.autograd.forward_ad
        with fwd.dual_level():
            duals = [fwd.make_dual(args[i], torch.ones_like(args[i])) for i in _nums(argnums)]
            out = fwd.unpack_dual(fn(*_replace_arg(args, argnums, duals)))
        return torch.zeros_like(out.primal) if out.tangent is None else out.tangent

    return wrapped


def jacfwd_dual(fn, argnums=0):
    def jac(args, i):
        x, cols = args[i], []
        fwd = torch.autograd.forward_ad
        with fwd.dual_level():
            for e in torch.eye(x.numel(), dtype=x.dtype).reshape(-1, *x.shape):
                out = fwd.unpack_dual(fn(*_replace_arg(args, i, (fwd.make_dual(x, e),))))
                cols.append(torch.zeros_like(out.primal) if out.tangent is None else out.tangent)
        return torch.stack(cols, dim=-1).reshape(out.primal.shape + x.shape)

    def wrapped(*args):
        return _result(argnums, [jac(args, i) for i in _nums(argnums)])

    return wrapped


def jacrev_loop(fn, argnums=0):
    def jac(o, x):
        rows = []
        for e in o.reshape(-1):
            g = None
            if e.requires_grad:
                (g,) = torch.autograd.grad(e, x, create_graph=True, allow_unused=True)
            rows.append(torch.zeros_like(x) if g is None else g)
        return torch.stack(rows).reshape(o.shape + x.shape)

    def wrapped(*args):
        out = fn(*args)
        if not isinstance(argnums, tuple):
            return jac(out, args[argnums]) if not isinstance(out, tuple) else tuple(jac(o, args[argnums]) for o in out)
        per_out = [tuple(jac(o, args[i]) for i in argnums) for o in (out if isinstance(out, tuple) else (out,))]
        return tuple(per_out) if isinstance(out, tuple) else per_out[0]

    return wrapped


# Shortest forms of the twins, for published repros (NOTE [repro styles] in fuzzer/codegen/render.py): the
# same computation for an int ``argnums`` and a tensor-valued ``fn`` (every level but the outermost sees
# one; tuple argnums keep the general forms). tests/codegen/test_modes.py checks each against torch.func.


def jacrev_loop_short(fn, argnums=0):  # torch.func.jacrev: one autograd.grad per output element
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        rows = [torch.autograd.grad(e, x, create_graph=True, allow_unused=True)[0] if e.requires_grad else None for e in out.reshape(-1)]  # fmt: skip
        return torch.stack([torch.zeros_like(x) if g is None else g for g in rows]).reshape(out.shape + x.shape)

    return wrapped


def jacfwd_dual_short(fn, argnums=0):  # torch.func.jacfwd: forward-mode AD, one basis tangent per element
    def wrapped(*args):
        fwd, x, cols = torch.autograd.forward_ad, args[argnums], []
        with fwd.dual_level():
            for e in torch.eye(x.numel(), dtype=x.dtype).reshape(-1, *x.shape):
                out = fwd.unpack_dual(fn(*args[:argnums], fwd.make_dual(x, e), *args[argnums + 1 :]))
                cols.append(torch.zeros_like(out.primal) if out.tangent is None else out.tangent)
        return torch.stack(cols, dim=-1).reshape(out.primal.shape + x.shape)

    return wrapped


def jvp_dual_short(fn, argnums=0):  # torch.func.jvp with tangent ones, by forward-mode AD
    def wrapped(*args):
        fwd, x = torch.autograd.forward_ad, args[argnums]
        with fwd.dual_level():
            out = fwd.unpack_dual(fn(*args[:argnums], fwd.make_dual(x, torch.ones_like(x)), *args[argnums + 1 :]))
        return torch.zeros_like(out.primal) if out.tangent is None else out.tangent

    return wrapped


def vjp_ones_short(fn, argnums=0):  # torch.func.vjp, pulled back from ones
    def wrapped(*args):
        out, pull = torch.func.vjp(lambda x: fn(*args[:argnums], x, *args[argnums + 1 :]), args[argnums])
        return pull(torch.ones_like(out))[0]

    return wrapped


def jvp_ones_short(fn, argnums=0):  # torch.func.jvp, pushed forward from ones
    def wrapped(*args):
        x = args[argnums]
        return torch.func.jvp(lambda x: fn(*args[:argnums], x, *args[argnums + 1 :]), (x,), (torch.ones_like(x),))[1]

    return wrapped


def linearize_ones_short(fn, argnums=0):  # torch.func.linearize, its jvp_fn applied to ones
    def wrapped(*args):
        x = args[argnums]
        return torch.func.linearize(lambda x: fn(*args[:argnums], x, *args[argnums + 1 :]), x)[1](torch.ones_like(x))

    return wrapped


# ... and for a Function of one input (most shrunk cases): the same twins, written for that one argument.


def autograd_grad_1(fn, create_graph=False):  # torch.func.grad's twin: torch.autograd.grad, ones as grad_outputs
    def wrapped(x):
        out = fn(x)
        g = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)[0] if out.requires_grad else None  # fmt: skip
        return torch.zeros_like(x) if g is None else g  # nothing reaches x: zeros, as torch.func returns

    return wrapped


def vmap_loop_1(fn, in_dims=0, out_dims=0):  # torch.func.vmap's twin: a loop over the batch
    return lambda x: torch.stack([fn(xi) for xi in x.unbind(in_dims)], dim=out_dims)


def jacrev_loop_1(fn):  # torch.func.jacrev's twin: one autograd.grad per output element
    def wrapped(x):
        out = fn(x)
        rows = [torch.autograd.grad(e, x, create_graph=True, allow_unused=True)[0] if e.requires_grad else None for e in out.reshape(-1)]  # fmt: skip
        return torch.stack([torch.zeros_like(x) if g is None else g for g in rows]).reshape(out.shape + x.shape)

    return wrapped


def jacfwd_dual_1(fn):  # torch.func.jacfwd's twin: forward-mode AD, one basis tangent per element
    def wrapped(x):
        fwd, cols = torch.autograd.forward_ad, []
        with fwd.dual_level():
            for e in torch.eye(x.numel(), dtype=x.dtype).reshape(-1, *x.shape):
                out = fwd.unpack_dual(fn(fwd.make_dual(x, e)))
                cols.append(torch.zeros_like(out.primal) if out.tangent is None else out.tangent)
        return torch.stack(cols, dim=-1).reshape(out.primal.shape + x.shape)

    return wrapped


def jvp_dual_1(fn):  # torch.func.jvp's twin: forward-mode AD with a tangent of ones
    def wrapped(x):
        fwd = torch.autograd.forward_ad
        with fwd.dual_level():
            out = fwd.unpack_dual(fn(fwd.make_dual(x, torch.ones_like(x))))
        return torch.zeros_like(out.primal) if out.tangent is None else out.tangent

    return wrapped


def vjp_ones_1(fn):  # torch.func.vjp, pulled back from ones
    return lambda x: (lambda out, pull: pull(torch.ones_like(out))[0])(*torch.func.vjp(fn, x))


def jvp_ones_1(fn):  # torch.func.jvp, pushed forward from ones
    return lambda x: torch.func.jvp(fn, (x,), (torch.ones_like(x),))[1]


def linearize_ones_1(fn):  # torch.func.linearize, its jvp_fn applied to ones
    return lambda x: torch.func.linearize(fn, x)[1](torch.ones_like(x))


# ... and for a Function of several inputs differentiated in its first (argnums=0 at every level).


def vjp_ones_0(fn):  # torch.func.vjp in the first input, pulled back from ones
    return lambda x, *rest: (lambda out, pull: pull(torch.ones_like(out))[0])(*torch.func.vjp(lambda x: fn(x, *rest), x))  # fmt: skip


def jvp_ones_0(fn):  # torch.func.jvp in the first input, pushed forward from ones
    return lambda x, *rest: torch.func.jvp(lambda x: fn(x, *rest), (x,), (torch.ones_like(x),))[1]


def linearize_ones_0(fn):  # torch.func.linearize in the first input, its jvp_fn applied to ones
    return lambda x, *rest: torch.func.linearize(lambda x: fn(x, *rest), x)[1](torch.ones_like(x))


def outcome(mode, requires_grad):
    """One side on fresh inputs: what it returned, or the exception it raised."""
    try:
        return mode(*[x.requires_grad_(requires_grad) for x in inputs()])  # noqa: F821 (defined by the script)
    except Exception as e:  # noqa: BLE001 (an exception is an outcome too)
        return e


def error_key(e):
    """An exception's fingerprint: ``message_key`` of its type and message."""
    return message_key(type(e).__name__, str(e))


def torch_bug(e):
    """Whether PyTorch itself calls this exception a bug: an internal assert, a request to report it to
    PyTorch, or a bare AssertionError raised inside torch."""
    if not isinstance(e, Exception):
        return False
    if re.search(r"INTERNAL ASSERT FAILED|report a bug to PyTorch", str(e), re.IGNORECASE):
        return True
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (
        type(e) is AssertionError and tb is not None and "/torch/" in tb.tb_frame.f_code.co_filename.replace("\\", "/")
    )


def layout(v):
    """Structure of a result: nesting, and each tensor's shape and dtype."""
    if isinstance(v, torch.Tensor):
        return tuple(v.shape), v.dtype
    if isinstance(v, (tuple, list)):
        return type(v).__name__, tuple(layout(x) for x in v)
    return type(v).__name__


def identical(a, b):
    """Whether two results of one layout hold the same tensors bit for bit (then assert_close agrees)."""
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return all(identical(x, y) for x, y in zip(a, b, strict=True))
    return False


def verdict(a, b):
    """An error PyTorch calls a bug is a finding whatever the other side did; two errors agree only with
    the same type and message (numbers ignored); values agree when their structure (nesting, shapes,
    dtypes) is the same and they are close (torch.testing.assert_close)."""
    if torch_bug(a) or torch_bug(b):
        return "torch_bug_error"
    if isinstance(a, Exception) or isinstance(b, Exception):
        if isinstance(a, Exception) and isinstance(b, Exception) and error_key(a) == error_key(b):
            return "consistent"
        return ERRORS[isinstance(a, Exception), isinstance(b, Exception)]  # noqa: F821
    if layout(a) != layout(b):
        return "structure_mismatch"
    if identical(a, b):  # the common case, at a fraction of assert_close's cost
        return "consistent"
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


def finite_forward():
    """Whether ``f`` is finite on the inputs: an overflowing case compares rounding of infinities."""
    try:
        with torch.no_grad():
            out = f(*inputs())  # noqa: F821 (defined by the script)
    except Exception:  # noqa: BLE001 (the sides will show the error)
        return True
    return not isinstance(out, torch.Tensor) or bool(torch.isfinite(out).all())


def run(mode, requires_grad):
    start = time.perf_counter()
    result = outcome(mode, requires_grad)
    SECONDS[mode.__name__] = time.perf_counter() - start  # noqa: F821
    return result


def too_slow(mode_a, mode_b):
    fast, slow = sorted(SECONDS[m.__name__] for m in (mode_a, mode_b))  # noqa: F821
    return slow > SLOW_SECONDS and slow > SLOW_RATIO * fast  # noqa: F821


def check(side_b=None, a_known=(), side_a=None):
    """Run both sides and compare them: (verdict, side A's result, side B's result). ``side_b`` replaces
    ``SIDES[1]`` (another oracle's side B of the same case, from ORACLE_SIDES); ``a_known`` is ``(a,)``
    once side A ran: it is the same computation under every oracle of a case; ``side_a`` replaces
    ``SIDES[0]`` for an oracle whose side A is its own (ORACLE_A). Sides that disagree where ``f`` itself
    overflows are ``nonfinite``: they compare rounding of infinities."""
    (_, mode_a, grad_a), (_, mode_b, grad_b) = side_a or SIDES[0], side_b or SIDES[1]  # noqa: F821
    a = a_known[0] if a_known else run(mode_a, grad_a)
    b = run(mode_b, grad_b)
    v = verdict(a, b)
    if v != "consistent" and not finite_forward():
        return "nonfinite", None, None
    if v == "consistent" and not isinstance(a, Exception) and too_slow(mode_a, mode_b):
        run(mode_a, grad_a)  # time both again, warm: a first call can pay one-time set-up costs
        run(mode_b, grad_b)
        v = "slow" if too_slow(mode_a, mode_b) else v
    return v, a, b


def triage(fc, ref):
    """Which side matches central finite differences of the same stack (float64, forward values only)."""
    if fd_mode is None:  # noqa: F821
        return "undetermined", "the Function's derivative rules are deliberately not exact"
    args = inputs()  # noqa: F821
    try:
        fd = fd_mode(*args)  # noqa: F821
        near = fd_mode(*[a + 1e-4 for a in args])  # noqa: F821
    except Exception as e:  # noqa: BLE001
        return "undetermined", f"finite differences raised {type(e).__name__}: {e}"
    if not torch.allclose(near, fd, rtol=1e-2, atol=1e-2):
        return "undetermined", "the stack is not smooth at this point"

    def matches(v):
        return v.shape == fd.shape and torch.allclose(v.double(), fd, rtol=1e-4, atol=1e-4)

    label = {(True, False): "reference_wrong", (False, True): "functorch_wrong", (False, False): "both_wrong"}
    return label.get((matches(fc), matches(ref)), "undetermined"), f"finite differences: {fd.tolist()}"


def main():
    v, a, b = check()
    for (name, mode, _), result in zip(SIDES, (a, b), strict=True):  # noqa: F821
        print(f"============= {name} ({SECONDS.get(mode.__name__, 0.0):.3f} s)")  # noqa: F821
        print(repr(result))
    print("verdict:", v)
    if v == "value_mismatch":
        label, detail = triage(a, b)
        print(f"triage: {label} ({detail})")
    return 0 if v in ("consistent", "nonfinite") else 1
