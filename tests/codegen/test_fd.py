"""The finite-difference twins (fuzzer/codegen/repro_fd.py) compute what torch.func computes, on plain smooth
functions where the analytic derivatives are trustworthy.

Tolerances: rtol = atol = 1e-4 throughout, including 3 nested levels. With eps = 1e-3 the truncation error is
~eps^2 * |f'''| ~ 1e-6 per level and the roundoff of 3 nested central differences ~1e-16 / eps^3 = 1e-7, so
even 3 levels land around 1e-6 (NOTE [finite differences]); the worst case here (jac of jac of jac) uses ~5%
of the tolerance. The looser ~1e-3 often quoted for 3 levels is what a smaller eps would force (roundoff
1e-16 / eps^3 grows fast: 3e-5 relative already at eps = 1e-4); at eps = 1e-3 it is not needed.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import fuzzer.codegen.repro_fd as repro_fd
from fuzzer.codegen.repro_fd import fd_grad, fd_hessian, fd_jac, fd_jvp, fd_vjp

# torch.func's forward mode (jvp, jacfwd, hessian) loads jvp decompositions through torch.jit.script, which
# warns on import in torch 2.13; that is torch's own noise, not this code's.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

TOL = {"rtol": 1e-4, "atol": 1e-4}
SHAPES = [(), (3,), (2, 3)]


def g(x, y):
    """Elementwise in x and y (diagonal Jacobians)."""
    return torch.sin(x) * y**2 + x.exp()


def mixed(x, y):
    """Couples all elements (dense Jacobians), so a wrong layout or a transposed result shows."""
    return g(x, y) + torch.sin((x * y).sum()) * x - 0.3 * torch.cos(x.sum() + y) * y


def scalar(x, y):
    return mixed(x, y).sum()


def summed(fn):
    return lambda *args: fn(*args).sum()


def per_sample(fn):
    """The plain per-sample loop (repro_lib's vmap_loop) that fd levels compose with."""
    return lambda *a: torch.stack([fn(*[t[i] for t in a]) for i in range(a[0].shape[0])])


def inputs(shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * 3 - 1.5
    y = torch.rand(shape, generator=gen, dtype=torch.float64) * 3 - 1.5
    return x, y


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_jac_matches_jacrev(shape) -> None:
    x, y = inputs(shape)
    expected = jacrev(mixed)(x, y)
    got = fd_jac(mixed)(x, y)
    assert got.shape == shape + shape
    torch.testing.assert_close(got, expected, **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_grad_matches_grad(shape) -> None:
    x, y = inputs(shape)
    got = fd_grad(scalar)(x, y)
    assert got.shape == shape
    torch.testing.assert_close(got, grad(scalar)(x, y), **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_vjp_matches_vjp_with_ones(shape) -> None:
    x, y = inputs(shape)
    out, vjp_fn = vjp(mixed, x, y)
    (expected, _) = vjp_fn(torch.ones_like(out))
    got = fd_vjp(mixed)(x, y)
    assert got.shape == shape
    torch.testing.assert_close(got, expected, **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_jvp_matches_jvp_with_ones(shape) -> None:
    x, y = inputs(shape)
    _, expected = jvp(lambda x: mixed(x, y), (x,), (torch.ones_like(x),))
    got = fd_jvp(mixed)(x, y)
    assert got.shape == shape
    torch.testing.assert_close(got, expected, **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_hessian_matches_hessian(shape) -> None:
    x, y = inputs(shape)
    got = fd_hessian(scalar)(x, y)
    assert got.shape == shape + shape
    torch.testing.assert_close(got, hessian(scalar)(x, y), **TOL)


def test_hessian_of_vector_output_has_out_x_x_layout() -> None:
    x, y = inputs((3,))
    got = fd_hessian(mixed)(x, y)
    assert got.shape == (3, 3, 3)
    torch.testing.assert_close(got, hessian(mixed)(x, y), **TOL)


@pytest.mark.parametrize(
    ("fn", "x_shape", "out_shape"),
    [
        (lambda x: torch.stack([x.sin().sum(), (x**2).sum(), x.prod(), x[0, 1].exp()]), (2, 3), (4,)),
        (lambda x: (x.sin() * x.cos().flip(0)).sum(), (3,), ()),
        (lambda x: torch.outer(x.sin(), x.exp()[:2]), (3,), (3, 2)),
        (lambda x: torch.arange(6, dtype=torch.float64).reshape(2, 3) * x.sin(), (), (2, 3)),
    ],
    ids=["x2x3-out4", "x3-out0dim", "x3-out3x2", "x0dim-out2x3"],
)
def test_jac_layout_matches_jacrev_and_jacfwd_when_shapes_differ(fn, x_shape, out_shape) -> None:
    x = inputs(x_shape)[0]
    got = fd_jac(fn)(x)
    assert got.shape == out_shape + x_shape
    torch.testing.assert_close(got, jacrev(fn)(x), **TOL)
    torch.testing.assert_close(got, jacfwd(fn)(x), **TOL)


@pytest.mark.parametrize("twin", ["jac", "grad", "vjp", "jvp", "hessian"])
def test_argnums_1_differentiates_the_second_input(twin) -> None:
    x, y = inputs((2, 3), seed=1)
    if twin == "jac":
        got, expected = fd_jac(mixed, argnums=1)(x, y), jacrev(mixed, argnums=1)(x, y)
    elif twin == "grad":
        got, expected = fd_grad(scalar, argnums=1)(x, y), grad(scalar, argnums=1)(x, y)
    elif twin == "vjp":
        out, vjp_fn = vjp(mixed, x, y)
        got, expected = fd_vjp(mixed, argnums=1)(x, y), vjp_fn(torch.ones_like(out))[1]
    elif twin == "jvp":
        got = fd_jvp(mixed, argnums=1)(x, y)
        expected = jvp(lambda y: mixed(x, y), (y,), (torch.ones_like(y),))[1]
    else:
        got, expected = fd_hessian(scalar, argnums=1)(x, y), hessian(scalar, argnums=1)(x, y)
    torch.testing.assert_close(got, expected, **TOL)
    # and it really is the derivative w.r.t. y, not x (they differ for this function)
    wrong = {"jac": jacrev(mixed), "grad": grad(scalar), "hessian": hessian(scalar)}.get(twin)
    if wrong is not None:
        assert not torch.allclose(got, wrong(x, y), rtol=1e-2, atol=1e-2)


def test_zero_dim_input() -> None:
    x = torch.tensor(0.7, dtype=torch.float64)
    for twin in (fd_grad, fd_vjp, fd_jvp, fd_jac):
        got = twin(torch.sin)(x)
        assert got.shape == ()
        torch.testing.assert_close(got, torch.cos(x), **TOL)
    got = fd_hessian(torch.sin)(x)
    assert got.shape == ()
    torch.testing.assert_close(got, -torch.sin(x), **TOL)
    third = fd_jac(fd_jac(fd_jac(torch.exp)))(x)
    torch.testing.assert_close(third, torch.exp(x), **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_grad_over_summed_jac(shape) -> None:
    x, y = inputs(shape)
    expected = grad(summed(jacrev(mixed)))(x, y)
    torch.testing.assert_close(fd_grad(summed(fd_jac(mixed)))(x, y), expected, **TOL)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_jac_of_jac_matches_jacrev_of_jacrev(shape) -> None:
    x, y = inputs(shape)
    got = fd_jac(fd_jac(mixed))(x, y)
    assert got.shape == shape * 3
    torch.testing.assert_close(got, jacrev(jacrev(mixed))(x, y), **TOL)


def test_three_levels_jac_jac_jac() -> None:
    x, y = inputs((3,))
    got = fd_jac(fd_jac(fd_jac(mixed)))(x, y)
    expected = jacrev(jacrev(jacrev(mixed)))(x, y)
    assert got.shape == (3,) * 4
    torch.testing.assert_close(got, expected, **TOL)


def test_per_sample_loop_composes_with_fd_levels() -> None:
    x, y = inputs((2, 3))
    # grad(summed(jacrev(vmap(g)))): 2 levels around the per-sample loop
    expected = grad(summed(jacrev(vmap(mixed))))(x, y)
    torch.testing.assert_close(fd_grad(summed(fd_jac(per_sample(mixed))))(x, y), expected, **TOL)
    # the loop between fd levels, 3 levels deep: grad(summed(jacrev(vmap(grad(scalar)))))
    expected = grad(summed(jacrev(vmap(grad(scalar)))))(x, y)
    got = fd_grad(summed(fd_jac(per_sample(fd_grad(scalar)))))(x, y)
    torch.testing.assert_close(got, expected, **TOL)
    # and the loop outside: per-sample Hessians
    torch.testing.assert_close(per_sample(fd_hessian(scalar))(x, y), vmap(hessian(scalar))(x, y), **TOL)


def test_fd_level_over_torch_func_level() -> None:
    x, y = inputs((3,))
    # torch.func ignores the outer no_grad, so a numeric level over an analytic one is a Hessian
    torch.testing.assert_close(fd_jac(grad(scalar))(x, y), hessian(scalar)(x, y), **TOL)
    # fd_jvp(fd_vjp(.)) = H v with v = ones, against the analytic jvp of the analytic vjp
    ones = torch.ones(3, dtype=torch.float64)

    def vjp_ones(x):
        out, vjp_fn = vjp(mixed, x, y)
        return vjp_fn(torch.ones_like(out))[0]

    expected = jvp(vjp_ones, (x,), (ones,))[1]
    torch.testing.assert_close(fd_jvp(fd_vjp(mixed))(x, y), expected, **TOL)
    torch.testing.assert_close(fd_jvp(vjp_ones)(x), expected, **TOL)


def test_grad_of_non_scalar_raises_like_torch_func() -> None:
    x, y = inputs((3,))
    with pytest.raises(RuntimeError):
        grad(mixed)(x, y)
    with pytest.raises(RuntimeError, match="scalar"):
        fd_grad(mixed)(x, y)


def test_float32_and_requires_grad_inputs_give_float64_without_graph() -> None:
    x, y = inputs((2, 3))
    got = fd_grad(scalar)(x.float().requires_grad_(), y.float().requires_grad_())
    assert got.dtype == torch.float64
    assert not got.requires_grad
    # float64 evaluation of float32-rounded inputs: as accurate as the float64 case
    torch.testing.assert_close(got, grad(scalar)(x.float().double(), y.float().double()), **TOL)


def test_sources_run_standalone_with_only_torch() -> None:
    names = [n for n, obj in vars(repro_fd).items() if inspect.isfunction(obj) and obj.__module__ == repro_fd.__name__]
    assert set(names) == {"fd_jac", "fd_grad", "fd_vjp", "fd_jvp", "fd_hessian", "kink", "unconverged"}
    namespace = {"torch": torch}
    exec("\n\n".join(inspect.getsource(getattr(repro_fd, n)) for n in names), namespace)
    x, y = inputs((3,))
    torch.testing.assert_close(namespace["fd_hessian"](scalar)(x, y), hessian(scalar)(x, y), **TOL)
    torch.testing.assert_close(namespace["fd_vjp"](mixed)(x, y), fd_vjp(mixed)(x, y), rtol=0, atol=0)
    torch.testing.assert_close(namespace["fd_jvp"](mixed)(x, y), fd_jvp(mixed)(x, y), rtol=0, atol=0)


def test_kink_and_unconverged_tell_where_finite_differences_mean_nothing() -> None:
    """affuzz check's smoothness check (NOTE [check oracles]): a tie or a kink at the point is a kink; a
    derivative that jumps at the point (softsign's second derivative at 0) leaves central differences
    unconverged; a smooth function is neither."""
    at = [torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)]
    assert repro_fd.kink(torch.abs, at).startswith("input 0 element 0: one-sided differences differ by 2")
    assert "element 0" in repro_fd.kink(lambda x: x.max().reshape(1), [at[0][1:]])  # a tie
    assert repro_fd.kink(torch.sin, at) == ""

    def softsign(x):
        return x / (1 + x.abs())

    def side(fn):
        return lambda e: [repro_fd.fd_jac(fn, eps=e)(*at)]

    assert "differ by 0.000899" in repro_fd.unconverged(side(softsign))
    assert repro_fd.unconverged(side(torch.sin)) == ""
