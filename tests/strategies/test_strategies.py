"""Strategies: argument validation, coverage of the vocabulary, simplest-first shrinking."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import find, given, seed, settings
from hypothesis.errors import InvalidArgument

from fuzzer.codegen.render import render
from fuzzer.ir.case import FUNCTORCH_TRANSFORMS, Case
from fuzzer.ir.dataflow import live_outputs
from fuzzer.ir.features import DRAWN_FEATURES, RESERVED, features
from fuzzer.ir.shapes import MAX_MAGNITUDE, batch_sizes, forward_bound, reference_cost
from fuzzer.ir.validate import validate
from strategies import case_groups, cases, functions, tensor_values, transform_stacks


@given(cases())
def test_every_drawn_case_renders_to_a_script_that_compiles(case: Case) -> None:
    compile(render(case), "<repro>", "exec")


@given(cases(max_cost=64))
def test_cost_bound_holds(case: Case) -> None:
    base = tuple(case.inputs.shape)
    assert reference_cost(case.transforms, base, base) <= 64 or base == ()


@given(case_groups(size=3, max_cost=64))
def test_a_group_shares_one_function_and_each_entry_is_a_whole_case(group: tuple[Case | None, ...]) -> None:
    # NOTE [case groups]: entry 0 is drawn as a lone case is; an entry is None where its stack does not fit
    # (never entry 0) or its input values overflow the forward (any entry: a lone case rejects that draw)
    assert len(group) == 3
    whole = [c for c in group if c is not None]
    for case in whole:
        assert validate(case) == case
        assert (case.function, case.f, case.inputs.shape) == (whole[0].function, whole[0].f, whole[0].inputs.shape)
        base = tuple(case.inputs.shape)
        assert reference_cost(case.transforms, base, base) <= 64 or base == ()
        assert forward_bound(case) <= MAX_MAGNITUDE
        compile(render(case), "<repro>", "exec")


def test_groups_vary_the_stack() -> None:
    group = find(
        case_groups(size=4),
        lambda g: len({c.transforms for c in g if c is not None}) == 4,
        settings=settings(database=None, max_examples=500),
    )
    assert len({c.transforms for c in group if c is not None}) == 4


@pytest.mark.parametrize(
    "make",
    [
        lambda: transform_stacks(max_depth=0),
        lambda: transform_stacks(min_depth=3, max_depth=2),
        lambda: transform_stacks(transforms=["grad", "hessian_of_doom"]),
        lambda: transform_stacks(max_batch_size=99),
        lambda: functions(max_inputs=0),
        lambda: functions(shape=(9,)),
        lambda: functions(vmap_rules=[]),
        lambda: tensor_values(n_inputs=4, numel=1),
        lambda: cases(dtypes=["float16"]),
        lambda: case_groups(size=0),
        lambda: case_groups(max_inputs=4),
    ],
)
def test_bad_arguments_raise_invalid_argument(make) -> None:
    with pytest.raises(InvalidArgument):
        make().validate()


def test_arguments_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        cases(3)  # type: ignore[misc]


def test_simplest_case_is_first() -> None:
    """Every choice is ordered simplest first: the all-zero choice sequence (what Hypothesis shrinks
    toward) is one scalar input, one ``x0 ** 2`` output, one ``grad``, every API option off."""
    drawn: list[Case] = []

    @settings(database=None)
    @given(cases())
    def collect(case: Case) -> None:
        drawn.append(case)

    collect.hypothesis.fuzz_one_input(bytes(4096))
    (case,) = drawn
    fn = case.function
    assert fn.n_inputs == 1 and len(fn.outputs) == 1 and len(fn.nodes) == 1
    assert fn.nodes[0].op == "pow" and fn.outputs[0].kind == "node"
    assert [t.name for t in case.transforms] == ["grad"]
    assert case.inputs.dtype == "float64"
    assert case.inputs.shape == () and case.inputs.values == ((1.0,),)
    assert fn.style == "setup_context" and fn.vmap_rule == "none" and not fn.unused_grads
    assert not (fn.jvp_rule or fn.once_differentiable or fn.non_differentiable or fn.on_ctx or fn.detached)
    assert fn.materialize_grads


def test_shrinks_toward_the_seed_shape_when_asked_for_it() -> None:
    """Asking for the seed's ingredients shrinks to the seed's composition on a scalar.

    (Hypothesis alone does not always drop the extra inputs/outputs: the IR-level reduction passes of
    the shrinker do that.)"""

    def seed_like(c: Case) -> bool:
        tags = set(features(c))
        return {"output_is_input", "saved_output", "grad_unused"} <= tags and c.transforms[0].name == "autograd_grad"

    case = find(cases(), seed_like, settings=settings(database=None, max_examples=5000))
    assert [t.name for t in case.transforms] == ["autograd_grad", "grad"]
    assert case.inputs.shape == ()


def test_vocabulary_is_covered() -> None:
    tags: Counter[str] = Counter()
    names: Counter[str] = Counter()
    batched = 0

    # the rarest tag (jvp_alias: a jvp rule, a shift node of an input, a rare feature, then a RARELY
    # draw) comes about once in 600 cases, and Hypothesis's draws are clumped, not independent: ten
    # unseeded rounds of 600 missed it in CI (per-round counts measured 1,0,0,0,5,2,2,0,0,0). So each
    # round has its own fixed seed: the test is deterministic and stops at the first round that has seen
    # every tag (seed 0 does today; a change of the strategies that makes a tag unreachable still fails).
    def collect(k: int) -> None:
        @seed(k)
        @settings(max_examples=600, database=None)
        @given(cases())
        def draw(case: Case) -> None:
            nonlocal batched
            tags.update(features(case))
            names.update(t.name for t in case.transforms)
            batched += bool(batch_sizes(case))

        draw()

    expressible = [t for t in DRAWN_FEATURES if t not in RESERVED]
    for k in range(10):
        collect(k)
        if set(expressible) <= set(tags):
            break
    assert set(expressible) <= set(tags), set(expressible) - set(tags)
    assert set(FUNCTORCH_TRANSFORMS) | {"autograd_grad"} <= set(names)
    assert batched > 0


def test_few_cases_have_a_reverse_derivative_that_is_zero_by_construction() -> None:
    """NOTE [live gradient]: a backward that ignores every grad, or an ``f`` using only outputs whose
    gradient reaches no input, is drawn 1 time in 4 where it would have been drawn freely (57 % of the
    cases before, 28 % after, measured over 2,850 stream draws): still drawn, no longer most of the run."""
    zero = 0
    total = 600

    @seed(0)
    @settings(max_examples=total, database=None)
    @given(cases())
    def draw(case: Case) -> None:
        nonlocal zero
        zero += not set(case.f.uses) & set(live_outputs(case.function))

    draw()
    assert 0 < zero < 0.4 * total, zero  # 76 of 600 (seed 0); 273 before
