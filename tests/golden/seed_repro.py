# affuzz repro of ../shared/seed (torch 2.0.1: functorch 0, create_graph 6)
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(x0):
        return x0 ** 3, x0

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx, g0, g1):  # NB: g1 intentionally not used in computation
        (o1,) = ctx.saved_tensors
        return g0 * 3 * o1 ** 2


def f(x0):
    return Fn.apply(x0)[0]


def autograd_grad(fn, argnums=0, create_graph=False):
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        g = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)[0] if out.requires_grad else None
        return torch.zeros_like(x) if g is None else g  # None (nothing reaches x): zeros, as torch.func returns

    return wrapped


ERRORS = {(True, True): "different_errors", (True, False): "error_functorch_only", (False, True): "error_reference_only"}


def outcome(mode, requires_grad):  # one side on fresh inputs: what it returns, or the exception it raises
    try:
        return mode(torch.tensor(1.0, dtype=torch.float64, requires_grad=requires_grad))
    except Exception as e:
        return e


def verdict(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return "consistent" if type(a) is type(b) else ERRORS[isinstance(a, Exception), isinstance(b, Exception)]
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


functorch = outcome(autograd_grad(torch.func.grad(f)), True)
create_graph = outcome(autograd_grad(autograd_grad(f, create_graph=True)), True)
v = verdict(functorch, create_graph)
print(f"============= functorch\n{functorch!r}\n============= create_graph\n{create_graph!r}\nverdict: {v}")
raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree
