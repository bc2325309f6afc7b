# affuzz error_reference_only-7339632378 on torch 2.13.0+cpu: error_reference_only|functorch_vs_create_graph|grad|output_repeated+saved_output+inplace_on_output
# found by `affuzz run --seed 7` (case 793, 406.9 s), shrunk in 126 runs (2.2 s)
import torch


class Fn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x0):
        t0 = x0 ** 2
        return t0, t0

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x0,) = inputs
        ctx.save_for_backward(x0, output[0])

    @staticmethod
    def backward(ctx, g0, g1):
        x0, o0 = ctx.saved_tensors
        gt0 = g0 + g1
        return gt0 * 2 * x0


def f(x0):
    o0, o1 = Fn.apply(x0)
    with torch.no_grad():
        o1.mul_(2)
    return o0 + o1


def summed(fn):
    return lambda *args: fn(*args).sum()


def autograd_grad(fn, argnums=0, create_graph=False):
    def wrapped(*args):
        out, x = fn(*args), args[argnums]
        g = torch.autograd.grad(out, x, torch.ones_like(out), create_graph=create_graph, allow_unused=True)[0] if out.requires_grad else None
        return torch.zeros_like(x) if g is None else g  # None (nothing reaches x): zeros, as torch.func returns

    return wrapped


ERRORS = {(True, True): "different_errors", (True, False): "error_functorch_only", (False, True): "error_reference_only"}


def outcome(mode, requires_grad):  # one side on fresh inputs: what it returns, or the exception it raises
    try:
        return mode(torch.tensor([[1.0]], dtype=torch.float32, requires_grad=requires_grad))
    except Exception as e:
        return e


def verdict(a, b):
    if isinstance(a, Exception) or isinstance(b, Exception):
        return "consistent" if type(a) is type(b) else ERRORS[isinstance(a, Exception), isinstance(b, Exception)]
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


functorch = outcome(torch.func.grad(summed(f)), False)
create_graph = outcome(autograd_grad(summed(f), create_graph=True), True)
v = verdict(functorch, create_graph)
print(f"============= functorch\n{functorch!r}\n============= create_graph\n{create_graph!r}\nverdict: {v}")
raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree
