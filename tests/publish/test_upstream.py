"""The known-issues table (NOTE [known issues] in fuzzer/publish/upstream.py): every corpus entry, loaded as
the bucket a campaign would give it, matches exactly its own upstream issue (or none), related issues
never make a bucket known, and the corpus links the known ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fuzzer.publish import upstream
from fuzzer.publish.report import upstream_lines
from fuzzer.publish.upstream import (
    KnownIssue,
    KnownIssuesError,
    corpus_bucket,
    known_issue,
    load_known_issues,
    one_bucket_key,
    related_issues,
)

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
ISSUE = "https://github.com/pytorch/pytorch/issues/"

#: corpus entry -> (the known issue, the related issues); every entry of the corpus is here.
EXPECTED: dict[str, tuple[int | None, tuple[str, ...]]] = {
    "error-8af76b925e": (None, ("pytorch/functorch#999",)),  # G8
    "error_functorch_only-6be8afd306": (None, ("#90225",)),  # G9
    "error_functorch_only-8107926238": (None, ()),  # G1
    "error_reference_only-8d560157ae": (None, ("#71119",)),  # G6
    "torch_bug_error-c5d4d4ff93": (None, ()),  # G11
    "torch_bug_error-f21bcfaafd": (None, ("#90067",)),  # G7
    "value_mismatch-63c0cdb50a": (None, ()),  # G5
    "value_mismatch-70973dd0c0": (None, ()),  # G4
    "value_mismatch-7c9142f91f": (178425, ()),  # G3
    "value_mismatch-9722743db8": (197867, ()),  # G2
    "value_mismatch-b5cf95d152": (None, ("#124550",)),  # G13
    "value_mismatch-b718dc0154": (96887, ()),  # S1, the seed
    "value_mismatch-ffc0c71408": (None, ()),  # G10
    # compiled_vs_eager
    "value_mismatch-2afcbf95ae": (193279, ()),  # C1
    "promise_broken-c04725ecbf": (192985, ()),  # C2
    "torch_bug_error-05cedf6850": (None, ()),  # C3 (looks new)
    "error-c4c8c8b810": (187284, ()),  # C4
    "value_mismatch-d2df2c7290": (None, ()),  # C5 (no issue found; PR #185976 describes the fix)
    "promise_broken-2fdd576810": (None, ()),  # O1 (looks new: a custom op's zero tangent under torch.func forward mode)
    "error-f6361b24de": (168393, ()),  # O2
}


def entries() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(CORPUS.glob("*/meta.json"))]


def bucket(
    verdict: str, oracle: str, transforms: list[str], features: list[str], error: str = "", bucket_id: str = "b-0"
) -> dict[str, Any]:
    kind = "torch_bug_error" if verdict == "torch_bug_error" else "error"
    signature = f"{kind}|{error}" if error else f"{verdict}|{oracle}|{'>'.join(transforms)}|{'+'.join(features) or '-'}"
    return {
        "id": bucket_id,
        "signature": signature,
        "verdict": verdict,
        "oracle": oracle,
        "transforms": transforms,
        "signature_features": features,
    }


def test_the_expectations_cover_the_whole_corpus() -> None:
    assert sorted(m["id"] for m in entries()) == sorted(EXPECTED)


@pytest.mark.parametrize("entry_id", sorted(EXPECTED))
def test_each_corpus_entry_matches_only_its_own_issue(entry_id: str) -> None:
    meta = json.loads((CORPUS / entry_id / "meta.json").read_text())
    b = corpus_bucket(meta)
    number, related = EXPECTED[entry_id]
    k = known_issue(b)
    assert (k.number if k else None) == number, (entry_id, b["signature"], k)
    assert tuple(r.ref for r in related_issues(b)) == related
    if k is not None:
        assert not k.related and entry_id in k.corpus


def test_old_error_entries_get_the_signature_a_campaign_gives_them_now() -> None:
    meta = json.loads((CORPUS / "error_functorch_only-6be8afd306" / "meta.json").read_text())
    assert meta["signature"].startswith("error_functorch_only|")  # recorded before NOTE [error buckets]
    assert corpus_bucket(meta)["signature"] == f"error|{meta['error']}"
    meta = json.loads((CORPUS / "error_reference_only-8d560157ae" / "meta.json").read_text())
    assert corpus_bucket(meta)["signature"] == f"torch_bug_error|{meta['error']}"


def test_each_entry_lists_the_corpus_entries_it_matches() -> None:
    buckets = {m["id"]: corpus_bucket(m) for m in entries()}
    for entry in load_known_issues():
        for entry_id in entry.corpus:
            assert entry.matches(
                signature=buckets[entry_id]["signature"],
                verdict=buckets[entry_id]["verdict"],
                oracle=buckets[entry_id]["oracle"],
                features=tuple(buckets[entry_id]["signature_features"]),
                bucket_id=entry_id,
                transforms=tuple(buckets[entry_id]["transforms"]),
            ), (entry.ref, entry_id)


def test_the_corpus_links_its_known_issues() -> None:
    for meta in entries():
        k = known_issue(corpus_bucket(meta))
        if k is not None:
            assert meta["upstream"] == k.issue, meta["id"]
        else:  # a related issue is not the entry's issue
            assert meta["upstream"] not in [r.issue for r in related_issues(corpus_bucket(meta))]


@pytest.mark.parametrize(
    "b, number",
    [
        # variants merged into the corpus entries (their recorded signatures): the same issue as the entry
        (bucket("value_mismatch", "forward_over_reverse", ["hessian", "jvp"], ["custom_jvp"]), 197867),
        (bucket("value_mismatch", "functorch_vs_create_graph", ["hessian", "jvp"], ["custom_jvp"]), 197867),
        (
            bucket(
                "value_mismatch",
                "functorch_vs_create_graph",
                ["hessian", "jvp", "grad"],
                ["output_is_view", "output_is_view_of_output", "saved_output", "custom_jvp"],
            ),
            197867,
        ),
        (bucket("value_mismatch", "functorch_vs_create_graph", ["vmap"], ["generate_vmap_rule"]), 178425),
        (
            bucket(
                "error_functorch_only",
                "vmap_vs_loop",
                ["vmap"],
                ["generate_vmap_rule"],
                "RuntimeError: The expanded size of the tensor (N) must match the existing size (N) at "
                "non-singleton dimension N @ torch/_functorch/vmap.py:_maybe_remove_batch_dim",
            ),
            178425,
        ),
        (bucket("value_mismatch", "functorch_vs_create_graph", ["grad"], ["output_is_input", "saved_output"]), 96887),
        # ... and the variants of entries without an upstream issue match none
        (bucket("value_mismatch", "functorch_vs_create_graph", ["jvp"], ["custom_jvp"]), None),  # G10
        (
            bucket(
                "different_errors",
                "forward_over_reverse",
                ["hessian", "linearize"],
                ["custom_jvp"],
                "IndexError: list index out of range @ torch/fx/passes/split_module.py:split_module",
            ),
            None,
        ),  # G5
        (
            bucket(
                "torch_bug_error",
                "functorch_vs_create_graph",
                ["grad", "jacfwd"],
                ["generate_vmap_rule", "custom_jvp", "non_tensor_output"],
                "AssertionError: flat_bdims must not be None @ torch/_functorch/vmap.py:wrap_batched",
            ),
            None,
        ),  # G1
        (
            bucket(
                "error_reference_only",
                "jacrev_vs_jacfwd",
                ["jacfwd", "vmap"],
                ["generate_vmap_rule"],
                "RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton "
                "dimension N @ -",
            ),
            None,
        ),  # G1
        # near misses: another mechanism's shape
        (bucket("value_mismatch", "vmap_vs_loop", ["vmap"], ["generate_vmap_rule", "mark_dirty"]), None),
        (bucket("value_mismatch", "vmap_vs_loop", ["grad", "vmap"], ["generate_vmap_rule"]), None),
        (bucket("value_mismatch", "functorch_vs_create_graph", ["hessian", "jvp"], []), None),
        (bucket("value_mismatch", "functorch_vs_create_graph", ["autograd_grad", "linearize"], ["custom_jvp"]), None),
        (bucket("value_mismatch", "jacrev_vs_jacfwd", ["jacrev"], ["custom_jvp"]), None),
    ],
)
def test_variants_and_near_misses(b: dict[str, Any], number: int | None) -> None:
    k = known_issue(b)
    assert (k.number if k else None) == number, (b["signature"], k)


def test_a_feature_ablation_cannot_make_essential_still_matches_among_the_case_features() -> None:
    """``case_features``: forward-over-forward through a custom jvp (#197867) is a value bucket whose
    ``custom_jvp`` is never essential (without it forward AD raises the documented error), so the rule
    looks among all of the case's features; a case without a jvp rule matches nothing."""
    b = bucket("value_mismatch", "functorch_vs_create_graph", ["hessian", "jacfwd"], ["output_is_view"])
    assert known_issue(b) is None
    with_jvp = {**b, "features": ["output_is_view", "custom_jvp", "saved_input"]}
    k = known_issue(with_jvp)
    assert k is not None and k.number == 197867
    assert known_issue({**b, "features": ["output_is_view", "saved_input"]}) is None
    reverse = bucket("value_mismatch", "functorch_vs_create_graph", ["grad", "grad"], [])
    assert known_issue({**reverse, "features": ["custom_jvp"]}) is None  # no forward level over a forward one


def test_the_table_says_state_and_evidence() -> None:
    table = load_known_issues()
    assert {k.number for k in table if not k.related} == {
        197867,
        178425,
        96887,
        90224,
        193279,
        192985,
        187284,
        168393,
        185047,
    }
    assert {k.number for k in table if k.related} == {90225, 71119, 90067, 124550, 999}
    for k in table:
        assert k.state in ("open", "closed") and k.evidence and k.summary
        assert k.issue.endswith((f"/issues/{k.number}", f"/pull/{k.number}"))  # a PR where no issue names the bug
    by = {k.number: k for k in table}
    assert by[197867].state_text == "open"
    assert by[178425].state_text == "closed, fixed in 2.14.1 by #178495"
    assert by[96887].state_text == "closed, fixed in 2.1.0 by #97212"
    assert by[999].ref == "pytorch/functorch#999" and by[90224].ref == "#90224"


def test_a_known_refusal_is_one_bucket_only_for_the_cases_it_names() -> None:
    # NOTE [known refusals]: the setup_context refusal is #168393's for a custom op, whatever the oracle,
    # verdict and stack; the same error of a legacy Function is a documented limitation, never matched
    fp = "RuntimeError: In order to use an autograd.Function with functorch transforms (vmap @ torch/autograd/function.py:apply"
    assert [k.number for k in load_known_issues() if k.one_bucket] == [168393]
    for oracle, verdict, stack in (
        ("functorch_vs_create_graph", "error_functorch_only", ("grad",)),
        ("custom_op_vs_function", "different_errors", ("jacrev", "vmap")),
    ):
        key = one_bucket_key(fingerprint=fp, verdict=verdict, oracle=oracle, stack=stack, case_features=("custom_op",))
        assert key == "known:168393"
    assert (
        one_bucket_key(
            fingerprint=fp,
            verdict="error_functorch_only",
            oracle="functorch_vs_create_graph",
            stack=("grad",),
            case_features=("legacy_forward",),
        )
        is None
    )


def test_compiled_value_buckets_are_known_only_around_a_transform_of_their_mode() -> None:
    """#193279 (custom backward dropped) needs a reverse-mode transform, #192985 (custom jvp dropped) a
    forward-mode one, both with the compile around the transform (the signature ends with backend/placement)."""

    def compiled(transforms: list[str], placement: str) -> dict:
        b = bucket("value_mismatch", "compiled_vs_eager", transforms, ["grad_unused"])
        return {**b, "signature": f"{b['signature']}|aot_eager/{placement}"}

    assert known_issue(compiled(["grad"], "around")).number == 193279
    assert known_issue(compiled(["vmap", "jacrev"], "around")).number == 193279
    assert known_issue(compiled(["jvp"], "around")).number == 192985
    assert known_issue(compiled(["grad"], "plain")) is None  # torch.compile(f) under autograd: another path
    assert known_issue(compiled(["vmap"], "around")) is None  # no derivative rule to drop


def test_a_related_entry_never_makes_a_bucket_known() -> None:
    b = bucket("value_mismatch", "functorch_vs_create_graph", ["grad"], [])
    related = KnownIssue(f"{ISSUE}1", 1, "near", {"verdict": "value_mismatch"}, related=True)
    same = KnownIssue(f"{ISSUE}2", 2, "same", {"transforms": "grad", "exact_features": []})
    assert known_issue(b, (related,)) is None and related_issues(b, (related,)) == [related]
    assert known_issue(b, (related, same)) is same and related_issues(b, (related, same)) == [related]


def test_rules_are_any_of_and_keys_all_of() -> None:
    b = bucket("value_mismatch", "vmap_vs_loop", ["vmap"], ["custom_vmap"])
    table = (
        KnownIssue(
            f"{ISSUE}3",
            3,
            "t",
            [{"oracle": "jacrev_vs_jacfwd"}, {"oracle": ["vmap_vs_loop"], "not_features": ["mark_dirty"]}],
        ),
    )
    assert known_issue(b, table) is not None
    b["signature_features"] = ["custom_vmap", "mark_dirty"]
    assert known_issue(b, table) is None


@pytest.mark.parametrize(
    "entry, needle",
    [
        ({"match": {"feature": ["x"]}}, "unknown match key feature"),
        ({"match": {"transforms": "("}}, "missing )"),
        ({"match": {"ids": ["x"]}, "state": "wontfix"}, "state 'wontfix'"),
        ({"match": []}, "match holds no rule"),
    ],
)
def test_a_bad_table_is_one_line(entry: dict[str, Any], needle: str, tmp_path: Path) -> None:
    raw = {"issue": f"{ISSUE}5", "number": 5, "summary": "s", **entry}
    path = tmp_path / "known.json"
    path.write_text(json.dumps({"schema_version": 1, "issues": [raw]}))
    with pytest.raises(KnownIssuesError) as e:
        load_known_issues(path)
    assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)


def test_the_report_names_known_and_related_issues(monkeypatch: pytest.MonkeyPatch) -> None:
    buckets = [corpus_bucket(m) for m in entries()]
    text = "\n".join(upstream_lines(buckets))
    assert f"- value_mismatch-b718dc0154: known: #96887 {ISSUE}96887 (closed, fixed in 2.1.0 by #97212;" in text
    assert f"- value_mismatch-9722743db8: known: #197867 {ISSUE}197867 (open;" in text
    assert "- error_reference_only-8d560157ae: related: #71119" in text and "not the same mechanism" in text
    assert "value_mismatch-70973dd0c0" not in text
    monkeypatch.setattr(upstream, "load_known_issues", lambda path=None: ())
    assert upstream_lines(buckets) == []
