"""NOTE [swarm]: a configuration's strategies draw only its feature tags and transforms, a position still
names one case (and the shrinker's strategy decodes it again), and the whole vocabulary draws exactly
what it drew before swarm."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzzer.campaign.config import CampaignConfig
from fuzzer.gen.profile import campaign_settings
from fuzzer.gen.streams import GROUP, Decoder, stream_buffer
from fuzzer.gen.swarm import P_ON, SLICE, swarm_at
from fuzzer.ir.case import FORWARD_MODE_TRANSFORMS, FUNCTORCH_TRANSFORMS, Case
from fuzzer.ir.features import ALL_FEATURES, features
from strategies import case_groups, cases

#: Tags the rest of a Function implies (NOTE [swarm]): never drawn when left out, but derived.
DERIVED = {"saved_input", "backward_returns_none"}
TWINS = {"jacfwd": "jacrev", "jvp": "vjp", "linearize": "vjp"}  # a second forward-mode level's reverse twin


def _allowed_transforms(on: tuple[str, ...]) -> set[str]:
    return {*on, "autograd_grad", *(TWINS[t] for t in on if t in FORWARD_MODE_TRANSFORMS)}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_configuration_draws_only_its_tags(data: st.DataObject) -> None:
    on = data.draw(st.sets(st.sampled_from(ALL_FEATURES)), label="features")
    case = data.draw(cases(features=on))
    assert set(features(case)) <= set(on) | DERIVED, set(features(case)) - set(on)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(features=()))
def test_no_tags_draws_a_plain_function(case: Case) -> None:
    assert set(features(case)) <= DERIVED


def test_every_tag_draws_what_no_swarm_draws() -> None:
    """``features=ALL_FEATURES`` decodes every buffer to the case ``features=None`` does: ``--no-swarm``
    is today's generation, and a swarm configuration that enables everything is too."""
    seen: dict[object, list] = {}
    for tags in (ALL_FEATURES, None):
        out = seen.setdefault(tags, [])

        @campaign_settings(database=None)
        @given(case_groups(size=GROUP, features=tags))
        def decode(group) -> None:
            out.append(group)  # noqa: B023 (called right below, in this iteration)

        for i in range(60):
            decode.hypothesis.fuzz_one_input(random.Random(f"eq/{i}").randbytes(2048))
    assert seen[ALL_FEATURES] == seen[None] and sum(g[0] is not None for g in seen[None]) > 30


@pytest.mark.parametrize("bad", ["mark_dirty", ["no_such_tag"], [3]])
def test_features_are_validated(bad) -> None:
    with pytest.raises(InvalidArgument):
        cases(features=bad).example()


def test_configurations_are_named_by_position() -> None:
    a = swarm_at(5, 0, 0)
    assert a == swarm_at(5, 0, SLICE - 1) and a.transforms  # one configuration per slice, never empty
    slices = {swarm_at(5, w, k * SLICE) for w in range(2) for k in range(40)}
    assert len(slices) >= 30  # configurations differ between slices and slots
    sizes = [len(c.features) for c in slices]
    # each tag on with probability P_ON (NOTE [swarm])
    assert P_ON - 0.15 < sum(sizes) / len(sizes) / len(ALL_FEATURES) < P_ON + 0.15
    only = swarm_at(5, 0, 0, ("grad", "vmap"))
    assert set(only.transforms) <= {"grad", "vmap"} and only.transforms  # the user's list, intersected


def test_a_swarm_stream_draws_each_case_under_its_slice_configuration() -> None:
    decoder = Decoder(9, {}, swarm=True)
    fresh = Decoder(9, {}, swarm=True)
    ks = [k for s in range(3) for k in range(s * SLICE, s * SLICE + 12)]
    drawn = [(k, decoder.draw(1, k)) for k in ks]
    assert [c for _, c in drawn] == [fresh.draw(1, k) for k in ks]  # a position names one case
    assert sum(c is not None for _, c in drawn) > len(ks) // 2
    for k, case in drawn:
        if case is None:
            continue
        config = decoder.config(1, k)
        assert set(features(case)) <= config.features | DERIVED
        assert {t.name for t in case.transforms} <= _allowed_transforms(config.transforms)
    # the shrinker decodes the finding's buffer with its slice's strategy (slot and position)
    k, case = next((k, c) for k, c in drawn if c is not None and k >= SLICE)
    seen: list = []

    @campaign_settings(database=None)
    @given(decoder.strategy(k, 1))
    def decode(c) -> None:
        seen.append(c)

    decode.hypothesis.fuzz_one_input(stream_buffer(9, 1, k))
    assert seen == [case]


def test_without_swarm_the_stream_is_the_whole_vocabulary() -> None:
    plain, swarm = Decoder(4, {}), Decoder(4, {}, swarm=True)
    assert plain.config(0, 0) is None
    ks = range(3 * GROUP)
    assert [plain.draw(0, k) for k in ks] != [swarm.draw(0, k) for k in ks]
    assert all(set(swarm_at(4, 0, 0).transforms) <= set(FUNCTORCH_TRANSFORMS) for _ in ks)


def test_a_campaign_saved_before_swarm_resumes_without_it(tmp_path: Path) -> None:
    old = CampaignConfig(out=tmp_path, seed=1).to_json()
    del old["swarm"]
    assert CampaignConfig.from_json(tmp_path, old).swarm is False
    assert CampaignConfig.from_json(tmp_path, CampaignConfig(out=tmp_path, seed=1).to_json()).swarm is True
