"""End-to-end campaigns on real torch: detection, verified findings on disk, determinism."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from conftest import run_script

from fuzzer.campaign.config import CampaignConfig
from fuzzer.campaign.driver import Campaign
from fuzzer.campaign.protocol import Fuzz
from fuzzer.campaign.schedule import Untriaged
from fuzzer.cli import main
from fuzzer.ir.case import Case
from fuzzer.ir.features import ALL_FEATURES
from fuzzer.judge.execute import Outcome, Side
from fuzzer.triage.buckets import RawFinding

REQUIRED = {
    "verdict",
    "transforms",
    "features",
    "signature",
    "torch_version",
    "seconds_to_find",
    "cases_to_find",
    "functorch",
    "reference",
}
TRANSFORM_NAMES = {
    "grad",
    "vjp",
    "jvp",
    "jacrev",
    "jacfwd",
    "hessian",
    "vmap",
    "autograd_grad",
    "forward_ad",
    "linearize",
}


def _finding_checks(summary: dict) -> int:
    """Checks (case x oracle) that ended in a finding verdict: each is one hit of some bucket."""
    verdicts = ("value_mismatch", "error_functorch_only", "error_reference_only", "different_errors")
    main = sum(summary["verdicts"][v] for v in verdicts)
    return main + sum(c.get(v, 0) for c in summary["metamorphic_verdicts"].values() for v in verdicts)


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def _check_finding_dir(d: Path) -> dict:
    assert {p.name for p in d.iterdir()} >= {"case.json", "repro.py", "finding.json"}
    record = json.loads((d / "finding.json").read_text())
    assert REQUIRED <= set(record)
    assert set(record["transforms"]) <= TRANSFORM_NAMES
    assert set(record["features"]) <= set(ALL_FEATURES)
    assert record["verification"]["exit_code"] == 1
    assert d.name == record["id"]
    proc = run_script(d / "repro.py")  # reported only after it reproduced; it still does
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return record


def test_planted_vmap_rule_bug_is_found_verified_and_bucketed(tmp_path: Path) -> None:
    kwargs = {"vmap_rules": ["custom_wrong"], "transforms": ["vmap", "grad"], "max_depth": 2, "outer_autograd": False}
    campaign = Campaign(
        CampaignConfig(
            out=tmp_path, seed=3, duration=None, max_cases=12, strategy_kwargs=kwargs, shrink_budget=120, swarm=False
        )
    )
    campaign.run()
    summary = campaign.summary()
    assert summary["cases"] == 12
    assert summary["verdicts"]["value_mismatch"] > 0
    verified = [b for b in summary["buckets"] if b["status"] == "verified"]
    assert verified, summary
    # The planted rule is blamed: taking custom_vmap away makes the case consistent. (Other buckets can
    # be real torch disagreements that these cases also hit.)
    planted = [b for b in verified if "custom_vmap" in b["signature_features"]]
    assert planted and all(b["verdict"] == "value_mismatch" for b in planted)
    assert sum(b["hits"] for b in summary["buckets"]) == _finding_checks(summary)
    # stacks with a level besides vmap also run the vmap-vs-loop oracle (its detection of the planted rule
    # without any create_graph twin: tests/test_oracles.py)
    assert sum(summary["metamorphic_verdicts"]["vmap_vs_loop"].values()) > 0
    for b in verified:
        record = _check_finding_dir(tmp_path / b["path"])
        assert "vmap" in record["transforms"]
    assert not (tmp_path / ".pending").exists() or not any((tmp_path / ".pending").iterdir())


def test_findings_past_the_triage_share_wait_and_are_triaged_later_every_hit_counted(tmp_path: Path) -> None:
    """NOTE [triage share]: with (almost) no share, every new finding waits untriaged; it is triaged when
    the campaign stops, before shrinking, and bucketed as if triaged at once: the planted rule's bucket, and
    every finding check one hit."""
    kwargs = {"vmap_rules": ["custom_wrong"], "transforms": ["vmap", "grad"], "max_depth": 2, "outer_autograd": False}
    config = CampaignConfig(
        out=tmp_path,
        seed=3,
        duration=None,
        max_cases=40,
        workers=1,
        strategy_kwargs=kwargs,
        shrink_budget=60,
        swarm=False,
        triage_share=1e-9,
    )
    campaign = Campaign(config)
    campaign.run()
    summary = campaign.summary()
    assert summary["triage"]["waited"] > 0 and summary["triage"]["left_untriaged"] == 0
    assert summary["triage"]["waiting"] == 0
    verified = [b for b in summary["buckets"] if b["status"] == "verified"]
    assert any("custom_vmap" in b["signature_features"] for b in verified), summary["buckets"]
    assert sum(b["hits"] for b in summary["buckets"]) == _finding_checks(summary)


def test_cli_run_finds_a_real_torch_disagreement(tmp_path: Path, capsys) -> None:
    """Default strategies, default oracle, a fixed seed (swarm on: one configuration per slot this early, NOTE [swarm]): real disagreements of this torch are found."""
    out = tmp_path / "out"
    assert main(["run", "--max-cases", "60", "--seed", "5", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "report.md").read_text().startswith("# affuzz campaign report")
    assert summary["cases"] == 60 and summary["internal_errors"] == 0
    assert summary["verdicts"]["expected"] > 0  # documented limitations are counted, not reported
    # comparisons of rules the Function itself makes disagree decide nothing and are counted by reason
    assert sum(summary["not_applicable_by_reason"].values()) == sum(
        c.get("not_applicable", 0) for c in [summary["verdicts"], *summary["metamorphic_verdicts"].values()]
    )
    verified = [b for b in summary["buckets"] if b["status"] == "verified"]
    assert verified, summary
    for b in verified:
        _check_finding_dir(out / b["path"])
        assert sum(b["stacks"].values()) >= 1  # every "oracle: stack" the bucket was hit under
        if b["id"].startswith("error-"):  # NOTE [error buckets]: keyed by the torch error alone
            assert b["signature"].startswith("error|") and " @ " in b["signature"]
    assert "verified findings" in capsys.readouterr().out


def test_same_seed_same_campaign(tmp_path: Path) -> None:
    def once(name: str) -> dict:
        c = Campaign(CampaignConfig(out=tmp_path / name, seed=11, duration=None, max_cases=25))
        c.run()
        s = c.summary()
        return {"verdicts": s["verdicts"], "buckets": sorted((b["id"], b["hits"]) for b in s["buckets"])}

    assert once("a") == once("b")


def test_float32_disagreement_that_persists_in_float64_is_reported(tmp_path: Path) -> None:
    kwargs = {
        "vmap_rules": ["custom_wrong"],
        "transforms": ["vmap"],
        "max_depth": 1,
        "outer_autograd": False,
        "dtypes": ["float32"],
    }
    campaign = Campaign(
        CampaignConfig(out=tmp_path, seed=5, duration=None, max_cases=6, strategy_kwargs=kwargs, swarm=False)
    )
    campaign.run()
    summary = campaign.summary()
    assert summary["float32_noise"] == 0
    assert summary["verdicts"]["value_mismatch"] >= 1
    assert sum(b["hits"] for b in summary["buckets"]) == _finding_checks(summary)
    # drawn in float32 (original.json); shrinking then prefers float64 where the bug stays (case.json)
    d = tmp_path / summary["buckets"][0]["path"]
    drawn = json.loads((d / "original.json" if (d / "original.json").exists() else d / "case.json").read_text())
    assert drawn["inputs"]["dtype"] == "float32"


def test_a_worker_killed_mid_shrink_is_replaced_and_the_finding_kept(tmp_path: Path) -> None:
    """NOTE [campaign driver]: shrink jobs run in the fuzz workers; when one dies mid-shrink (killed here,
    as a segfaulting candidate would kill it), the finding is published unshrunk, a fresh worker takes the
    slot, and every finding is still counted."""
    kwargs = {"vmap_rules": ["custom_wrong"], "transforms": ["vmap", "grad"], "max_depth": 2, "outer_autograd": False}
    config = CampaignConfig(
        out=tmp_path,
        seed=5,
        duration=None,
        max_cases=10,
        workers=1,
        shrink_budget=80,
        strategy_kwargs=kwargs,
        swarm=False,
    )
    campaign = Campaign(config)
    killed: list[int] = []

    def tick(c: Campaign) -> None:
        slot = c.slots[0]
        if not killed and slot.job is not None and slot.handle is not None and slot.handle.pid:
            os.kill(slot.handle.pid, signal.SIGKILL)
            killed.append(slot.handle.pid)

    campaign.run(on_tick=tick, tick_seconds=0.0)
    summary = campaign.summary()
    assert killed and summary["shrink"]["worker_crashes"] == 1 and summary["worker_restarts"] == 1
    assert summary["cases"] == 10
    assert sum(b["hits"] for b in summary["buckets"]) == _finding_checks(summary)
    shrunk = [b for b in summary["buckets"] if b["status"] == "verified" and b["shrink_seconds"][0] > 0]
    assert shrunk, summary["buckets"]  # shrinks after the crash went on in a fresh worker
    for b in summary["buckets"]:
        assert b["status"] == "verified"
        _check_finding_dir(tmp_path / b["path"])
    restarts = [e for e in _events(tmp_path) if e["event"] == "worker_restart"]
    assert len(restarts) == 1 and "SIGKILL" in restarts[0]["reason"] and restarts[0]["old_pid"] == killed[0]


def test_a_finding_whose_triage_killed_a_worker_is_not_handed_out_again(seed_case: Case, tmp_path) -> None:
    """NOTE [triage share]: the finding a dead worker was triaging would kill the next worker too: it is
    counted as left untriaged; the others it carried wait for another worker (twice at most)."""
    campaign = Campaign(CampaignConfig(out=tmp_path, seed=1, workers=2))
    waiting = campaign.scheduler.untriaged
    for q in ("bad", "other"):
        waiting[q] = Untriaged(_waiting(seed_case, q), slot=0, k=1, sent=True)
    command = Fuzz(start=0, max_cases=1, seconds=1.0, triage=tuple((1, u.finding) for u in waiting.values()))
    campaign._untriaged_back(command, "bad", "killed by SIGSEGV")
    assert list(waiting) == ["other"] and not waiting["other"].sent and campaign.stats.left_untriaged == 1
    waiting["other"].sent = True
    campaign._untriaged_back(command, None, "killed by SIGSEGV")  # carried by a second dead worker
    assert waiting == {} and campaign.stats.left_untriaged == 2


def _waiting(case: Case, quick: str) -> RawFinding:
    outcome = Outcome("value_mismatch", Side("0", None, None), Side("1", None, None), 0.0)
    return RawFinding("o", "value_mismatch", quick, "", ("grad",), case=case, outcome=outcome, untriaged=True)
