"""Functions and custom ops as libraries ship them, for ``affuzz check``'s input, intent and op tests
(tests/check/test_library.py). Each says what the check must find in it."""

import torch


class SoftplusSecondOrderWrongWhenNegative(torch.autograd.Function):
    """softplus(x) = log(1 + exp(x)); backward sigmoid(x) * g is right, but it is computed through a
    Function of its own whose backward drops the x < 0 half: the second derivative is 0 for negative
    arguments. Found only where samples go negative."""

    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _Sigmoid.apply(x) * g


class _Sigmoid(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s * (1 - s) * (x > 0)  # wrong: the derivative holds for every x


class ScaleBoth(torch.autograd.Function):
    """x * w (elementwise); the backward is right at first order, but builds w's gradient from a detached
    x: the second derivative d/dx of d/dw is lost (0 where it is the identity). Only second order w.r.t.
    both inputs shows it."""

    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x.detach()


class Relu(torch.autograd.Function):
    """max(x, 0) with the usual rule (gradient 0 at 0): correct, with a kink at the ``special`` sample's
    zeros, where finite differences say 0.5."""

    @staticmethod
    def forward(x):
        return x.clamp(min=0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0)


class StraightThroughRound(torch.autograd.Function):
    """round(x * 4) / 4 with the straight-through gradient: deliberately not the derivative (which is 0
    almost everywhere), and it says so."""

    affuzz_not_derivative = ("backward",)

    @staticmethod
    def forward(x):
        return torch.round(x * 4) / 4

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g


class TopValues(torch.autograd.Function):
    """The k largest values of x along its last dim and their indices (as floats, marked
    non-differentiable), as a legacy forward(ctx, ...) Function; k is an int argument."""

    @staticmethod
    def forward(ctx, x, k):
        values, index = x.topk(k, dim=-1)
        ctx.save_for_backward(index)
        ctx.shape = x.shape
        idx = index.to(x.dtype)
        ctx.mark_non_differentiable(idx)
        return values, idx

    @staticmethod
    def backward(ctx, g, _g_index):
        (index,) = ctx.saved_tensors
        return torch.zeros(ctx.shape, dtype=g.dtype).scatter(-1, index, g), None


class Gather(torch.autograd.Function):
    """x[index] through an index tensor and a weighting callable, both constants (given by
    ``gather_samples``): correct."""

    @staticmethod
    def forward(x, index, weight):
        return weight(x)[index]

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, index, weight = inputs
        ctx.save_for_backward(x, index)
        ctx.weight = weight

    @staticmethod
    def backward(ctx, g):
        x, index = ctx.saved_tensors
        with torch.enable_grad():
            xx = x.detach().requires_grad_()
            y = ctx.weight(xx)[index]
        (gx,) = torch.autograd.grad(y, xx, g, create_graph=True)
        return gx, None, None


def double(x):
    return x * 2


def gather_samples():
    """Samples for ``Gather`` (``--inputs-from``): a float tensor, an int64 index with repeats, a callable."""
    return [
        (torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64), torch.tensor([2, 0, 0]), double),
        (torch.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=torch.float64), torch.tensor([1]), double),
    ]


class AllocatesInBackward(torch.autograd.Function):
    """x * 2, whose backward allocates 2 GiB (for the memory guard)."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        big = torch.ones(2**28, dtype=torch.float64)
        return g * 2 + big[:1].sum() * 0


if hasattr(torch.library, "custom_op"):

    @torch.library.custom_op("affuzz_tests::cube", mutates_args=())
    def cube(x: torch.Tensor) -> torch.Tensor:
        return x**3

    @cube.register_fake
    def _(x):
        return torch.empty_like(x)

    def _cube_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def _cube_backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g

    cube.register_autograd(_cube_backward, setup_context=_cube_setup)

    @torch.library.custom_op("affuzz_tests::wrong_square", mutates_args=())
    def wrong_square(x: torch.Tensor) -> torch.Tensor:
        return x * x

    @wrong_square.register_fake
    def _(x):
        return torch.empty_like(x)

    def _square_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def _square_backward(ctx, g):
        (x,) = ctx.saved_tensors
        return x * g  # wrong: 2 * x * g

    wrong_square.register_autograd(_square_backward, setup_context=_square_setup)


class SlowBackward(torch.autograd.Function):
    """x * 2, whose backward takes 3 s (for the timeout note)."""

    @staticmethod
    def forward(x):
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        import time

        time.sleep(3)
        return g * 2
