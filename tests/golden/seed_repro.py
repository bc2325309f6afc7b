# affuzz repro of ../shared/seed (torch 2.0.1: functorch 0, create_graph 6)
import re

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


def message_key(type_name, message):
    text = re.sub(r"\[[^\]]*\]+", "[...]", (message.strip().splitlines() or [""])[0])
    parts = re.split(r"(?<=[:;,.])\s", text)
    head = parts[0]
    for part in parts[1:]:  # whole clauses, at least 40 characters ("vmap: ..." keeps its second clause)
        if len(head) >= 40:
            break
        head += " " + part
    head = re.sub(r"[:;,.]$", "", head)
    return f"{type_name}: {re.sub(r'[0-9]+', 'N', re.sub(r'Fn[A-Za-z]*', 'Fn', head))[:160]}"


def error_key(e):
    return message_key(type(e).__name__, str(e))


def torch_bug(e):
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
    if isinstance(v, torch.Tensor):
        return tuple(v.shape), v.dtype
    if isinstance(v, (tuple, list)):
        return type(v).__name__, tuple(layout(x) for x in v)
    return type(v).__name__


def identical(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return all(identical(x, y) for x, y in zip(a, b, strict=True))
    return False


def verdict(a, b):
    if torch_bug(a) or torch_bug(b):
        return "torch_bug_error"
    if isinstance(a, Exception) or isinstance(b, Exception):
        if isinstance(a, Exception) and isinstance(b, Exception) and error_key(a) == error_key(b):
            return "consistent"
        return ERRORS[isinstance(a, Exception), isinstance(b, Exception)]
    if layout(a) != layout(b):
        return "structure_mismatch"
    if identical(a, b):  # the common case, at a fraction of assert_close's cost
        return "consistent"
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


functorch = outcome(autograd_grad(torch.func.grad(f)), True)
create_graph = outcome(autograd_grad(autograd_grad(f, create_graph=True)), True)
v = verdict(functorch, create_graph)
print(f"============= functorch\n{functorch!r}\n============= create_graph\n{create_graph!r}\nverdict: {v}")
raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree
