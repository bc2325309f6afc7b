"""The create_graph-mode twins compute what torch.func computes (NOTE [mode equivalence]), checked on
plain differentiable functions where no custom Function is involved."""

from __future__ import annotations

import pytest
import torch
from torch.func import grad, jacrev, vmap

from fuzzer.codegen.repro_lib import autograd_grad, jacrev_loop, summed, vmap_loop


def g(x, y):
    return torch.sin(x) * y**2 + x.exp()


def cg_grad(fn, argnums=0):
    return autograd_grad(fn, argnums=argnums, create_graph=True)


STACKS = {
    "grad": (lambda F: F["grad"](summed(g)), {}),
    "grad_argnums1": (lambda F: F["grad"](summed(g), argnums=1), {}),
    "vmap": (lambda F: F["vmap"](g), {"batched": True}),
    "jacrev": (lambda F: F["jacrev"](g), {}),
    "grad_vmap": (lambda F: F["grad"](summed(F["vmap"](g))), {"batched": True}),
    "vmap_grad": (lambda F: F["vmap"](F["grad"](summed(g))), {"batched": True}),
    "jacrev_jacrev": (lambda F: F["jacrev"](F["jacrev"](g)), {}),
    "grad_jacrev_vmap": (lambda F: F["grad"](summed(F["jacrev"](F["vmap"](g)))), {"batched": True}),
}
FUNCTORCH = {"grad": grad, "vmap": vmap, "jacrev": jacrev}
CREATE_GRAPH = {"grad": cg_grad, "vmap": vmap_loop, "jacrev": jacrev_loop}


@pytest.mark.parametrize("name", list(STACKS))
def test_twins_match_torch_func(name: str) -> None:
    build, opts = STACKS[name]
    shape = (3, 2) if opts.get("batched") else (2,)
    n = shape[0] * (shape[1] if len(shape) > 1 else 1)
    x = torch.linspace(-1, 1, n, dtype=torch.float64).reshape(shape)
    y = torch.linspace(0.5, 2, n, dtype=torch.float64).reshape(shape)
    expected = build(FUNCTORCH)(x, y)
    got = build(CREATE_GRAPH)(x.clone().requires_grad_(), y.clone().requires_grad_())
    torch.testing.assert_close(got, expected)


def test_outer_autograd_level_over_functorch_matches_second_derivative() -> None:
    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    second = autograd_grad(grad(torch.sin))(x)
    torch.testing.assert_close(second, -torch.sin(x.detach()))


def test_independent_input_gives_zeros_like_torch_func() -> None:
    def h(x, y):
        return (x**2).sum()

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    y = torch.ones(3, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(cg_grad(h, argnums=1)(x, y), grad(h, argnums=1)(x, y))
    torch.testing.assert_close(
        jacrev_loop(lambda x, y: x * 1.0, argnums=1)(x, y), jacrev(lambda x, y: x * 1.0, argnums=1)(x, y)
    )


@pytest.mark.parametrize("name", ["grad", "jacrev", "jacfwd", "hessian", "vjp", "jvp", "linearize"])
def test_tuple_argnums_twins_match_torch_func(name: str) -> None:
    from fuzzer.codegen.repro_lib import autograd_grads, jacfwd_dual, jvp_dual, jvp_ones, linearize_ones, vjp_ones

    x = torch.linspace(-1, 1, 3, dtype=torch.float64)
    y = torch.linspace(0.5, 2, 3, dtype=torch.float64)
    fn = summed(g) if name in ("grad", "vjp") else g
    a = (0, 1)
    functorch = {
        "grad": lambda: torch.func.grad(fn, argnums=a),
        "jacrev": lambda: jacrev(fn, argnums=a),
        "jacfwd": lambda: torch.func.jacfwd(fn, argnums=a),
        "hessian": lambda: torch.func.hessian(fn, argnums=a),
        "vjp": lambda: vjp_ones(fn, argnums=a),
        "jvp": lambda: jvp_ones(fn, argnums=a),
        "linearize": lambda: linearize_ones(fn, argnums=a),
    }[name]()
    twin = {
        "grad": lambda: autograd_grads(fn, argnums=a),
        "jacrev": lambda: jacrev_loop(fn, argnums=a),
        "jacfwd": lambda: jacfwd_dual(fn, argnums=a),
        "hessian": lambda: jacrev_loop(jacrev_loop(fn, argnums=a), argnums=a),
        "vjp": lambda: autograd_grads(fn, argnums=a),
        "jvp": lambda: jvp_dual(fn, argnums=a),
        "linearize": lambda: jvp_dual(fn, argnums=a),
    }[name]()
    expected = functorch(x, y)
    got = twin(x.clone().requires_grad_(), y.clone().requires_grad_())
    torch.testing.assert_close(got, expected)
    if name not in ("jvp", "linearize"):
        assert isinstance(got, tuple) and len(got) == 2


def _short_forms() -> list[tuple[str, str]]:
    import fuzzer.codegen.repro_lib as lib

    return [
        (name, name.rsplit("_", 1)[0] if name.endswith(("_1", "_0")) else name.removesuffix("_short"))
        for name in dir(lib)
        if name.endswith(("_short", "_1", "_0")) and callable(getattr(lib, name))
    ]


@pytest.mark.parametrize("short,twin", _short_forms())
def test_short_twins_of_published_repros_compute_what_the_general_ones_do(short: str, twin: str) -> None:
    """NOTE [repro styles]: a published repro uses the shortest form of each twin (``*_short`` for an int
    argnums, ``*_1`` for a Function of one input, ``*_0`` for several differentiated in the first); each
    computes exactly what the general twin does."""
    import fuzzer.codegen.repro_lib as lib

    def h(x, y):
        return torch.sin(x) * y**2 + x.exp() * 0.5

    x = torch.linspace(-1, 1, 6, dtype=torch.float64).reshape(3, 2)
    y = torch.linspace(0.5, 2, 6, dtype=torch.float64).reshape(3, 2)
    general, compact = getattr(lib, twin), getattr(lib, short)
    kwargs = {"create_graph": True} if twin == "autograd_grad" else {}
    if short.endswith("_1"):
        one = lambda x: h(x, y)  # noqa: E731
        want = general(one, **kwargs)(x.clone().requires_grad_())
        got = compact(one, **kwargs)(x.clone().requires_grad_())
    elif short.endswith("_0"):
        want = general(h, argnums=0, **kwargs)(x.clone().requires_grad_(), y.clone().requires_grad_())
        got = compact(h, **kwargs)(x.clone().requires_grad_(), y.clone().requires_grad_())
    else:
        want = general(h, argnums=1, **kwargs)(x.clone().requires_grad_(), y.clone().requires_grad_())
        got = compact(h, argnums=1, **kwargs)(x.clone().requires_grad_(), y.clone().requires_grad_())
    torch.testing.assert_close(got, want)
    if twin == "vmap_loop":
        torch.testing.assert_close(
            compact(lambda x: h(x, y[0]), in_dims=1, out_dims=1)(x.T.clone()),
            vmap(lambda x: h(x, y[0]), in_dims=1, out_dims=1)(x.T.clone()),
        )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.sin(x) * x**2,
        lambda x: torch.ones_like(x) * 3.0,  # nothing reaches x: zeros on both
        lambda x: x.detach() * 2.0,
    ],
)
def test_scalar_levels_compute_what_the_jacobian_twins_do(fn) -> None:
    """NOTE [scalar levels]: at a 0-d input and output, jacrev_loop is autograd_grad(create_graph=True) and
    jacfwd_dual is jvp_dual, also at second order and where no gradient reaches the input."""
    from fuzzer.codegen.repro_lib import jacfwd_dual, jvp_dual

    def x() -> torch.Tensor:
        return torch.tensor(0.7, dtype=torch.float64, requires_grad=True)

    def ag(h):
        return autograd_grad(h, create_graph=True)

    torch.testing.assert_close(ag(fn)(x()), jacrev_loop(fn)(x()))
    torch.testing.assert_close(ag(ag(fn))(x()), jacrev_loop(jacrev_loop(fn))(x()))
    torch.testing.assert_close(jvp_dual(fn)(x()), jacfwd_dual(fn)(x()))
    torch.testing.assert_close(ag(ag(jvp_dual(fn)))(x()), jacrev_loop(jacrev_loop(jacfwd_dual(fn)))(x()))
