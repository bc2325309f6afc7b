"""NOTE [repaired rules]: a comparison that a broken rule makes meaningless, where it disagrees, is run
again on the Function's clean twin (the rule mended as the docs say); a finding there is the twin's, and
the campaign reports the twin. On real torch 2.13."""

from __future__ import annotations

import json
from pathlib import Path

from fuzzer.campaign.protocol import WorkerInit
from fuzzer.campaign.worker import Worker
from fuzzer.ir.features import features
from fuzzer.ir.oracles import MAIN
from fuzzer.ir.serde import case_from_json
from fuzzer.ir.validity import REPAIRABLE, repair, rule_conflict, sides
from fuzzer.judge.judge import Judge

DATA = Path(__file__).resolve().parents[1] / "data"


def _ctx_case():
    """Old corpus error_functorch_only-a28ba2d41d: autograd.grad over linearize of a Function that keeps
    a tensor on ctx, f doubling an intermediate in place; torch.func's linearize raises "a leaf Variable
    that requires grad is being used in an in-place operation" with or without the ctx attribute (a hand
    check: its const-folding makes the intermediate a leaf that requires grad)."""
    return case_from_json(json.loads((DATA / "ctx_repaired_case.json").read_text()))


def test_the_repair_saves_the_ctx_tensors_properly_and_changes_nothing_else() -> None:
    case = _ctx_case()
    assert rule_conflict(case, *sides(case, MAIN)) == "tensor_saved_on_ctx"
    twin = repair(case, "tensor_saved_on_ctx")
    assert twin is not None and not twin.function.on_ctx and twin.function.saved == case.function.saved
    assert twin.transforms == case.transforms and twin.f == case.f and twin.inputs == case.inputs
    assert rule_conflict(twin, *sides(twin, MAIN)) is None
    assert "saved_on_ctx" in features(case) and "saved_on_ctx" not in features(twin)
    assert repair(case, "backward_second_order") is None and "backward_second_order" not in REPAIRABLE


def test_a_disagreement_the_broken_rule_does_not_explain_is_the_clean_twins_finding() -> None:
    j = Judge()(_ctx_case(), MAIN)
    assert j.verdict in ("different_errors", "error_functorch_only"), (j.verdict, j.reason)
    assert "a leaf Variable that requires grad is being used in an in-place operation" in j.fingerprint
    assert j.repaired is not None and not j.repaired.function.on_ctx and j.broken_rule is None


def test_the_campaign_reports_the_twin() -> None:
    finding = Worker(WorkerInit(slot=0, seed=1)).run(_ctx_case()).findings
    assert finding, "no finding"
    main = [f for f in finding if f.oracle == MAIN]
    assert main and main[0].case is not None and not main[0].case.function.on_ctx
