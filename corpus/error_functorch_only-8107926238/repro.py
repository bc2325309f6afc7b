# affuzz error_functorch_only-8107926238 on torch 2.13.0+cpu: error_functorch_only|forward_over_reverse|hessian>vmap|saved_detached
# found by `affuzz run --seed 7` (case 703, 381.7 s), shrunk in 132 runs (3.5 s)
import re

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


def error_key(e):
    text = re.sub(r"\[[^\]]*\]+", "[...]", (str(e).strip().splitlines() or [""])[0])
    parts = re.split(r"(?<=[:;,.])\s", text)
    head = parts[0]
    for part in parts[1:]:  # whole clauses, at least 40 characters ("vmap: ..." keeps its second clause)
        if len(head) >= 40:
            break
        head += " " + part
    head = re.sub(r"[:;,.]$", "", head)
    return f"{type(e).__name__}: {re.sub(r'[0-9]+', 'N', re.sub(r'Fn[A-Za-z]*', 'Fn', head))[:160]}"


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


def verdict(a, b):
    if torch_bug(a) or torch_bug(b):
        return "torch_bug_error"
    if isinstance(a, Exception) or isinstance(b, Exception):
        if isinstance(a, Exception) and isinstance(b, Exception) and error_key(a) == error_key(b):
            return "consistent"
        return ERRORS[isinstance(a, Exception), isinstance(b, Exception)]
    if layout(a) != layout(b):
        return "structure_mismatch"
    try:
        return torch.testing.assert_close(a, b, equal_nan=True) or "consistent"  # it returns None or raises
    except AssertionError:
        return "value_mismatch"


functorch = outcome(torch.func.hessian(torch.func.vmap(f)), False)
other_order = outcome(torch.func.jacrev(torch.func.jacrev(torch.func.vmap(f))), False)
v = verdict(functorch, other_order)
print(f"============= functorch\n{functorch!r}\n============= other_order\n{other_order!r}\nverdict: {v}")
raise SystemExit(v != "consistent")  # exit status 1 while the two sides disagree, 0 once they agree
