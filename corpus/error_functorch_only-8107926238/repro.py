# affuzz error_functorch_only-8107926238 on torch 2.13.0+cpu: error_functorch_only|forward_over_reverse|hessian>vmap|saved_detached
# found by `affuzz run --seed 7` (case 703, 381.7 s), shrunk in 132 runs (3.5 s)
import torch


class Fn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x0):
        return x0, x0.unsqueeze(0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x0,) = inputs
        ctx.save_for_backward(x0.detach())

    @staticmethod
    def backward(ctx, g0, g1):
        (x0,) = ctx.saved_tensors
        return g0 + g1.squeeze(0)


def f(x0):
    return Fn.apply(x0)[1]


ERRORS = {(True, True): "different_errors", (True, False): "error_functorch_only", (False, True): "error_reference_only"}


def outcome(mode, requires_grad):  # one side on fresh inputs: what it returns, or the exception it raises
    try:
        return mode(torch.tensor([1.0], dtype=torch.float64, requires_grad=requires_grad))
    except Exception as e:
        return e


def verdict(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return "consistent" if type(a) is type(b) else ERRORS[isinstance(a, Exception), isinstance(b, Exception)]
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


functorch = outcome(torch.func.hessian(torch.func.vmap(f)), False)
other_order = outcome(torch.func.jacrev(torch.func.jacrev(torch.func.vmap(f))), False)
v = verdict(functorch, other_order)
print(f"============= functorch\n{functorch!r}\n============= other_order\n{other_order!r}\nverdict: {v}")
raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree
