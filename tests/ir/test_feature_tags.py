"""NOTE [feature tags]: one row per tag, and every consumer covers every row (torch-free)."""

from __future__ import annotations

import pytest

from fuzzer.gen.streams import Decoder
from fuzzer.gen.swarm import swarm_at
from fuzzer.ir.features import ALL_FEATURES, FEATURE_TAGS, feature, features
from fuzzer.publish.drafts import _feature_clause
from fuzzer.triage.ablate import ABLATIONS, without

SEED = 5


@pytest.fixture(scope="module")
def drawn() -> list:
    """(case, swarm configuration) of the first positions of two slots of a swarm stream."""
    decoder = Decoder(SEED, {}, swarm=True)
    out = []
    for slot in range(2):
        for k in range(1500):
            case = decoder.draw(slot, k)
            if case is not None:
                out.append((case, swarm_at(SEED, slot, k)))
    return out


def test_the_table_is_the_vocabulary() -> None:
    names = [t.name for t in FEATURE_TAGS]
    assert tuple(names) == ALL_FEATURES and len(set(names)) == len(names) == 29
    for row in FEATURE_TAGS:
        assert row.phrase and row.phrase != row.name and not row.phrase.endswith("."), row
        assert feature(row.name) is row
    with pytest.raises(KeyError, match="unknown feature tag 'output_is_inputs'"):
        feature("output_is_inputs")


def test_every_tag_has_its_ablation_or_says_why_not(drawn: list) -> None:
    ablatable = {t.name for t in FEATURE_TAGS if t.no_ablation is None}
    assert set(ABLATIONS) == ablatable
    assert {t.name for t in FEATURE_TAGS if t.no_ablation} == {"saved_input", "non_tensor_input"}
    with pytest.raises(KeyError, match="unknown feature tag"):
        without(drawn[0][0], "no_such_tag")
    saved_input = next(case for case, _ in drawn if "saved_input" in features(case))
    assert without(saved_input, "saved_input") is None


def test_every_tag_is_drawn_and_every_ablation_takes_it_away(drawn: list) -> None:
    seen: set[str] = set()
    ablated: set[str] = set()
    for case, _ in drawn:
        tags = features(case)
        seen.update(tags)
        for tag in set(tags) - ablated:
            variant = without(case, tag)
            if variant is not None:
                assert tag not in features(variant), (tag, case)
                ablated.add(tag)
    by_modes = {t.name for t in FEATURE_TAGS if t.mode}  # a mode's tag is never drawn
    assert by_modes == {"custom_op"}
    assert seen == set(ALL_FEATURES) - by_modes
    assert ablated == set(ABLATIONS) - by_modes


def test_a_tag_its_swarm_configuration_left_out_is_only_ever_derived(drawn: list) -> None:
    derived = {t.name for t in FEATURE_TAGS if t.derived}
    assert derived == {"saved_input", "backward_returns_none"}
    outside = {tag for case, config in drawn for tag in set(features(case)) - config.features}
    assert outside <= derived


def test_every_phrase_reads_in_a_draft_title() -> None:
    for row in FEATURE_TAGS:
        if row.name == "custom_op":  # NOTE [custom op mode]: the repro defines an op, not a Function
            assert _feature_clause([row.name, "saved_input"]) == "for a torch.library custom op that saves its input"
            continue
        assert _feature_clause([row.name]) == f"for a custom autograd.Function that {row.phrase}"
    both = _feature_clause(["output_is_input", "saved_input", "grad_unused"])
    assert both == "for a custom autograd.Function that returns its input, saves it and ignores an output's gradient"
    with pytest.raises(KeyError):
        _feature_clause(["no_such_tag"])
