# affuzz repro of ../shared/seed (torch 2.0.1: functorch 0, create_graph 6)
import sys
import time

import torch
from torch.func import grad


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(x0):
        t0 = x0 ** 3
        return t0, x0

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, o1 = output
        ctx.save_for_backward(o1)

    @staticmethod
    def backward(ctx, g0, g1):
        # NB: g1 intentionally not used in computation
        (o1,) = ctx.saved_tensors
        return g0 * 3 * o1 ** 2


def f(x0):
    o0, _ = Fn.apply(x0)
    return o0


def inputs():
    return (torch.tensor(1.0, dtype=torch.float64),)


def autograd_grad(fn, argnums=0, create_graph=False):
    def wrapped(*args):
        out = fn(*args)
        xs = [args[i] for i in argnums] if isinstance(argnums, tuple) else [args[argnums]]
        gs = [None] * len(xs)
        if out.requires_grad:
            gs = torch.autograd.grad(out, xs, torch.ones_like(out), create_graph=create_graph, allow_unused=True)
        gs = tuple(torch.zeros_like(x) if g is None else g for x, g in zip(xs, gs, strict=True))
        return gs if isinstance(argnums, tuple) else gs[0]

    return wrapped


def fd_jac(fn, argnums=0, eps=1e-3):
    """Jacobian of fn w.r.t. args[argnums], shape out.shape + x.shape (the torch.func.jacrev layout).

    One central difference per element of x. eps = 1e-3 balances O(eps^2) truncation against ~1e-16/eps^k
    roundoff for up to k = 3 nested levels (NOTE [finite differences] in fuzzer/repro_fd.py).
    """

    def wrapped(*args):
        with torch.no_grad():
            args = [
                a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args
            ]
            x = args[argnums]
            n = x.numel()
            if n == 0:
                out = fn(*args).to(torch.float64)
                return torch.zeros(out.shape + x.shape, dtype=torch.float64)
            cols = []
            for i in range(n):
                d = torch.zeros(n, dtype=torch.float64)
                d[i] = eps
                d = d.reshape(x.shape)
                plus, minus = list(args), list(args)
                plus[argnums], minus[argnums] = x + d, x - d
                cols.append((fn(*plus).to(torch.float64) - fn(*minus).to(torch.float64)) / (2 * eps))
            return torch.stack(cols, dim=-1).reshape(cols[0].shape + x.shape)

    return wrapped


def fd_grad(fn, argnums=0, eps=1e-3):
    """Gradient of a scalar-valued fn, shape x.shape (torch.func.grad); non-scalar outputs raise, as there."""

    def wrapped(*args):
        jac = fd_jac(fn, argnums, eps)(*args)
        out_dims = jac.dim() - args[argnums].dim()
        if out_dims != 0:
            raise RuntimeError(f"fd_grad: expected fn(*args) to return a scalar Tensor, got {out_dims} dims")
        return jac

    return wrapped


def fd_vjp(fn, argnums=0, eps=1e-3):
    """v^T J with v = ones_like(out), shape x.shape (autograd.grad(out, x, torch.ones_like(out)))."""

    def wrapped(*args):
        x = args[argnums]
        return fd_jac(fn, argnums, eps)(*args).reshape(-1, *x.shape).sum(0)

    return wrapped


FUNCTORCH_REQUIRES_GRAD = True


def functorch_mode(x0):
    return autograd_grad(grad(f))(x0)


def create_graph_mode(x0):
    return autograd_grad(autograd_grad(f, create_graph=True))(x0)


SIDES = (
    ("functorch", functorch_mode, FUNCTORCH_REQUIRES_GRAD),
    ("create_graph", create_graph_mode, True),
)
SECONDS = {}  # mode name -> seconds its last run took
SLOW_RATIO, SLOW_SECONDS = 50, 1.0  # one side this much slower (and > SLOW_SECONDS): 'slow'


def fd_mode(x0):
    return fd_vjp(fd_grad(f))(x0)


def run(mode, requires_grad):
    args = [t.clone().requires_grad_(requires_grad) for t in inputs()]
    start = time.perf_counter()
    try:
        result = mode(*args), None
    except Exception as e:
        result = None, e
    SECONDS[mode.__name__] = time.perf_counter() - start
    return result


def too_slow(mode_a, mode_b):
    fast, slow = sorted(SECONDS[m.__name__] for m in (mode_a, mode_b))
    return slow > SLOW_SECONDS and slow > SLOW_RATIO * fast


def check():
    (_, mode_a, grad_a), (_, mode_b, grad_b) = SIDES
    fc, fc_err = run(mode_a, grad_a)
    ref, ref_err = run(mode_b, grad_b)
    if fc_err is None and ref_err is None:
        try:
            torch.testing.assert_close(fc, ref, equal_nan=True)
            verdict = "consistent"
        except AssertionError:
            verdict = "value_mismatch"
        if verdict == "consistent" and too_slow(mode_a, mode_b):
            run(mode_a, grad_a)  # time both again, warm: a first call can pay one-time set-up costs
            run(mode_b, grad_b)
            verdict = "slow" if too_slow(mode_a, mode_b) else verdict
    elif fc_err is not None and ref_err is not None:
        verdict = "consistent" if type(fc_err) is type(ref_err) else "different_errors"
    else:
        verdict = "error_functorch_only" if fc_err is not None else "error_reference_only"
    return verdict, (fc, fc_err), (ref, ref_err)


def triage(fc, ref):
    """Which side matches central finite differences of the same stack (float64, forward values only)."""
    if fd_mode is None:
        return "undetermined", "the Function's derivative rules are deliberately not exact"
    args = inputs()
    try:
        fd = fd_mode(*args)
        near = fd_mode(*[a + 1e-4 for a in args])
    except Exception as e:
        return "undetermined", f"finite differences raised {type(e).__name__}: {e}"
    if not torch.allclose(near, fd, rtol=1e-2, atol=1e-2):
        return "undetermined", "the stack is not smooth at this point"

    def matches(v):
        return v.shape == fd.shape and torch.allclose(v.double(), fd, rtol=1e-4, atol=1e-4)

    label = {(True, False): "reference_wrong", (False, True): "functorch_wrong", (False, False): "both_wrong"}
    return label.get((matches(fc), matches(ref)), "undetermined"), f"finite differences: {fd.tolist()}"


def show(result):
    value, err = result
    return f"{type(err).__name__}: {err}" if err is not None else str(value)


def main():
    verdict, fc, ref = check()
    for (name, mode, _), result in zip(SIDES, (fc, ref), strict=True):
        print(f"============= {name} ({SECONDS[mode.__name__]:.3f} s)")
        print(show(result))
    print("verdict:", verdict)
    if verdict == "value_mismatch":
        label, detail = triage(fc[0], ref[0])
        print(f"triage: {label} ({detail})")
    return 0 if verdict == "consistent" else 1


if __name__ == "__main__":
    sys.exit(main())
