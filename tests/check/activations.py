"""Two activation Functions written the legacy way (forward(ctx, ...)), as many libraries still ship them: a
module target for tests/check/test_library.py (the same table whole as one by one, the compile oracle on)."""

import torch


class Entmax15(torch.autograd.Function):
    """1.5-entmax along a dim (Peters, Niculae and Martins, 2019: the sort-based threshold), written as the
    paper's reference code does: classmethods, the dim on ctx, an in-place update in backward. Compiled
    under jacfwd(hessian(...)), Dynamo fails on it inside its tracing, and the failure left torch's
    dispatch key sets changed for everything after it until affuzz check repaired them."""

    @classmethod
    def forward(cls, ctx, x, dim=0):
        ctx.dim = dim
        x = (x - x.max(dim=dim, keepdim=True)[0]) / 2
        xs, _ = torch.sort(x, dim=dim, descending=True)
        rho = torch.arange(1, x.shape[dim] + 1, dtype=x.dtype)
        mean = xs.cumsum(dim) / rho
        mean_sq = (xs**2).cumsum(dim) / rho
        delta = (1 - rho * (mean_sq - mean**2)) / rho
        tau = mean - torch.sqrt(torch.clamp(delta, 0))
        support = (tau <= xs).sum(dim).unsqueeze(dim)
        y = torch.clamp(x - tau.gather(dim, support - 1), min=0) ** 2
        ctx.save_for_backward(y)
        return y

    @classmethod
    def backward(cls, ctx, dy):
        (y,) = ctx.saved_tensors
        gppr = y.sqrt()
        dx = dy * gppr
        q = (dx.sum(ctx.dim) / gppr.sum(ctx.dim)).unsqueeze(ctx.dim)
        dx -= q * gppr
        return dx, None


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))
