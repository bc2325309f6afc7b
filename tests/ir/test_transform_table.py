"""NOTE [transform table]: one row per transform; its consumers raise on a name it does not have."""

from __future__ import annotations

import pytest

from fuzzer.ir.case import FORWARD_MODE_TRANSFORMS, FUNCTORCH_TRANSFORMS, OUTER_TRANSFORMS, TRANSFORMS, Transform
from fuzzer.ir.shapes import transform_output_shape
from fuzzer.ir.transforms import TRANSFORM_KINDS, transform_kind
from fuzzer.ir.validity import stack_sides


def test_the_table_is_the_vocabulary_in_the_swarms_order() -> None:
    # swarm configurations draw transforms in this order (NOTE [swarm]): it never changes
    assert FUNCTORCH_TRANSFORMS == ("grad", "vmap", "jacrev", "jacfwd", "jvp", "vjp", "hessian", "linearize")
    assert OUTER_TRANSFORMS == ("autograd_grad",) and FORWARD_MODE_TRANSFORMS == ("jacfwd", "jvp", "linearize")
    assert tuple(k.name for k in TRANSFORM_KINDS) == TRANSFORMS
    for kind in TRANSFORM_KINDS:
        assert transform_kind(kind.name) is kind


def test_a_derivative_level_adds_its_order_to_the_path() -> None:
    orders = {k.name: len(k.derivative_path()) for k in TRANSFORM_KINDS}
    assert orders == {n: 0 if n == "vmap" else 2 if n == "hessian" else 1 for n in TRANSFORMS}
    assert transform_kind("hessian").derivative_path() == ("R", "F")  # jacfwd(jacrev(f))
    assert transform_kind("hessian").derivative_path(create_graph=True) == ("R", "R")


def test_a_simpler_transform_ranks_lower_and_computes_the_same_kind() -> None:
    pairs = {k.name: k.simpler for k in TRANSFORM_KINDS if k.simpler}
    assert pairs == {"jacrev": "grad", "jacfwd": "jvp", "vjp": "grad", "hessian": "jacrev", "linearize": "jvp"}
    for name, simpler in pairs.items():
        k, s = transform_kind(name), transform_kind(simpler)
        assert s.shrink_rank < k.shrink_rank, (name, simpler)
        assert s.derivative_path()[:1] == k.derivative_path()[:1], (name, simpler)  # the innermost direction stays


def test_output_shapes_follow_the_row() -> None:
    out, x = (2,), (3,)
    shapes = {n: transform_output_shape(Transform(n, batch_size=4), out, [x]) for n in TRANSFORMS}
    assert shapes == {
        "grad": x,
        "vjp": x,
        "autograd_grad": x,
        "vmap": (4, 2),
        "jacrev": (2, 3),
        "jacfwd": (2, 3),
        "hessian": (2, 3, 3),
        "jvp": out,
        "linearize": out,
    }


def test_an_unknown_transform_raises_everywhere_instead_of_passing_for_another() -> None:
    with pytest.raises(KeyError, match="unknown transform 'jacobian'"):
        transform_kind("jacobian")
    with pytest.raises(KeyError, match="unknown transform"):
        transform_output_shape(Transform("jacobian"), (2,), [(2,)])
    with pytest.raises(KeyError, match="unknown transform"):
        stack_sides((Transform("jacobian"),), "functorch_vs_create_graph", None)


def test_every_transform_has_its_twins_and_words() -> None:
    for k in TRANSFORM_KINDS:
        assert k.functorch_call and k.create_graph_twin and k.fd_twin, k
        assert (k.twin_words is None) == (not k.functorch), k  # the plain autograd level is its own twin
    assert [k.name for k in TRANSFORM_KINDS if k.torch_func] == ["grad", "vmap", "jacrev", "jacfwd", "hessian"]
