"""Numeric twins of the function transforms: central finite differences, for triaging a disagreement.

When functorch mode and create_graph mode disagree, a third, purely numeric opinion says which side is
mathematically right. Each twin here takes ``fn(*args)`` (tensor args) and returns ``wrapped(*args)``, like
the transforms in :mod:`fuzzer.codegen.repro_lib`, so they compose the same way (``fd_grad(fd_jac(vmap_loop(f)))``)
and their source can be copied verbatim into a standalone script (each function needs only ``torch`` and,
by name, the other functions of this file).

NOTE [finite differences]
Everything runs in float64 under ``torch.no_grad()``: only forward values of the innermost function are
used. Floating-point tensor args are detached and cast to float64; other args pass through unchanged.
Because of ``no_grad`` (and the detach), whatever an fd level wraps must not rely on plain autograd:
``autograd_grad``/``jacrev_loop`` of repro_lib inside an fd level would see outputs that do not require
grad and silently return zeros. Other fd levels, ``vmap_loop``, plain functions and ``torch.func``
transforms (which ignore an outer ``no_grad``) can all be wrapped.

eps = 1e-3 (the default everywhere): a central difference has truncation error ~eps^2/6 * |f'''| and
roundoff ~1e-16 * |f| / eps; nesting k levels keeps the truncation O(eps^2) but multiplies the roundoff
by ~1/eps per level (~1e-16/eps^k). The best eps for k levels is ~(1e-16)^(1/(k+2)): 5e-6, 1e-4, 6e-4
for k = 1, 2, 3, so one eps for up to 3 levels belongs just above 6e-4. At 1e-3, with values and
derivatives of size ~1 (inputs in [-2, 2]), truncation is ~1e-6 and 3-level roundoff ~1e-7. Measured on
sin(x) * y**2 + exp(x), x, y uniform in [-2, 2]: max error / max |derivative| ~2e-7, 5e-7, 5e-7 for 1, 2,
3 levels (at eps = 1e-4 the 3-level roundoff is already 3e-5, at 1e-5 it is 2e-2; at 1e-2 truncation
gives 5e-5).
"""

from __future__ import annotations

import torch


def fd_jac(fn, argnums=0, eps=1e-3):
    """Jacobian of fn w.r.t. args[argnums], shape out.shape + x.shape (the torch.func.jacrev layout).

    One central difference per element of x. eps = 1e-3 balances O(eps^2) truncation against ~1e-16/eps^k
    roundoff for up to k = 3 nested levels (NOTE [finite differences] in fuzzer/codegen/repro_fd.py).
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


def fd_jvp(fn, argnums=0, eps=1e-3):
    """J v with v = ones_like(x), shape out.shape (the tangent of torch.func.jvp(fn, (x,), (ones,)))."""

    def wrapped(*args):
        with torch.no_grad():
            args = [
                a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args
            ]
            x = args[argnums]
            plus, minus = list(args), list(args)
            plus[argnums], minus[argnums] = x + eps, x - eps
            return (fn(*plus).to(torch.float64) - fn(*minus).to(torch.float64)) / (2 * eps)

    return wrapped


def fd_hessian(fn, argnums=0, eps=1e-3):
    """Hessian (Jacobian of the Jacobian), shape out.shape + x.shape + x.shape (torch.func.hessian)."""
    return fd_jac(fd_jac(fn, argnums, eps), argnums, eps)


def kink(fn, args, eps=1e-3):
    """Where ``fn`` is not smooth within ``eps`` of ``args`` ('' where it is): for each element of each
    tensor argument, the one-sided differences above and below it disagree (a kink, a tie, a branch).
    affuzz check asks this before a disagreement with finite differences is a finding."""
    with torch.no_grad():
        args = [a.detach().to(torch.float64) for a in args]
        at = fn(*args).to(torch.float64)
        for k, x in enumerate(args):
            for i in range(x.numel()):
                d = torch.zeros(x.numel(), dtype=torch.float64)
                d[i] = eps
                d = d.reshape(x.shape)
                up = (fn(*args[:k], x + d, *args[k + 1 :]).to(torch.float64) - at) / eps
                down = (at - fn(*args[:k], x - d, *args[k + 1 :]).to(torch.float64)) / eps
                finite = bool(torch.isfinite(up).all() and torch.isfinite(down).all())
                if not finite or not torch.allclose(up, down, rtol=1e-2, atol=1e-2):
                    gap = (up - down).abs().max().item() if finite else float("nan")
                    return f"input {k} element {i}: one-sided differences differ by {gap:.3g}"
    return ""


def unconverged(fd_side, eps=1e-3):
    """Where finite differences have not converged at ``eps`` ('' where they have): ``fd_side(e)`` (a list
    of tensors, finite differences with step e) at eps and at eps / 10 differ by more than half of
    affuzz check's tolerance (a derivative that jumps within a step, where central differences lose
    their eps**2 accuracy)."""
    coarse, fine = fd_side(eps), fd_side(eps / 10)
    for k, (a, b) in enumerate(zip(coarse, fine, strict=True)):
        if not torch.allclose(a, b, rtol=5e-5, atol=5e-5):
            gap = (a - b).abs().max().item()
            return f"finite differences at steps {eps:g} and {eps / 10:g} differ by {gap:.3g} (entry {k})"
    return ""
