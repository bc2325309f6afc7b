"""Three Functions for ``affuzz check``'s tests (tests/check/test_check.py): one correct, one whose jvp
contradicts its backward, one whose vmap rule is wrong. Each as a library author might write it."""

import torch


class Cube(torch.autograd.Function):
    """x ** 3, with backward, jvp and torch's generated vmap rule: correct."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * tangent


class SinWrongJvp(torch.autograd.Function):
    """sin(x): the backward is right (cos x), the jvp uses sin x: it contradicts the backward."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.cos(x) * grad

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return torch.sin(x) * tangent  # wrong: d/dx sin x = cos x


class CenterWrongVmap(torch.autograd.Function):
    """x - x.mean(): backward and jvp are right; the vmap rule centres the whole batch at once (it
    applies the Function to the batched tensor as if it were one sample)."""

    @staticmethod
    def forward(x):
        return x - x.mean()

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad - grad.mean()

    @staticmethod
    def jvp(ctx, tangent):
        return tangent - tangent.mean()

    @staticmethod
    def vmap(info, in_dims, x):
        (bdim,) = in_dims
        x = x.movedim(bdim, 0) if bdim is not None else x.expand(info.batch_size, *x.shape)
        return CenterWrongVmap.apply(x), 0  # wrong: the mean runs over the batch too
