# affuzz corpus entry error_functorch_only-8107926238, shown on torch 2.14.1+cu130: error_functorch_only|forward_over_reverse|hessian>vmap|saved_detached
# G1: generate_vmap_rule keeps one saved-tensor batch-dims record for save_for_backward and save_for_forward (torch/_functorch/autograd_function.py CtxCustomSave): flat_bdims AssertionError, shape/si...
import torch


class Fn(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x0):
        return x0, x0.unsqueeze(0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0].detach())

    @staticmethod
    def backward(ctx, g0, g1):
        (x0,) = ctx.saved_tensors
        return g0 + g1.squeeze(0)


def f(x0):
    return Fn.apply(x0)[1]


# torch.func.jacrev(torch.func.jacrev(torch.func.vmap(f))) returns tensor([[[[0.]]]], dtype=torch.float64)
torch.func.hessian(torch.func.vmap(f))(torch.tensor([1.0], dtype=torch.float64))  # raises (exit 1) while the bug is there
