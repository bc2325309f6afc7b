# affuzz repro of ../shared/seed (torch 2.0.1: functorch 0, create_graph 6)
import sys

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
        out, x = fn(*args), args[argnums]
        if not out.requires_grad:
            return torch.zeros_like(x)
        (g,) = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)
        return torch.zeros_like(x) if g is None else g

    return wrapped


FUNCTORCH_REQUIRES_GRAD = True


def functorch_mode(x0):
    return autograd_grad(grad(f))(x0)


def create_graph_mode(x0):
    return autograd_grad(autograd_grad(f, create_graph=True))(x0)


def run(mode, requires_grad):
    args = [t.clone().requires_grad_(requires_grad) for t in inputs()]
    try:
        return mode(*args), None
    except Exception as e:
        return None, e


def check():
    fc, fc_err = run(functorch_mode, FUNCTORCH_REQUIRES_GRAD)
    ref, ref_err = run(create_graph_mode, True)
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


if __name__ == "__main__":
    sys.exit(main())
