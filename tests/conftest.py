from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from fuzzer.ir.case import Case
from fuzzer.ir.serde import load

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# An explicit profile (never Hypothesis's automatic CI profile, which derandomizes): property tests
# draw fresh cases every run, bounded so `make test` stays fast on a 2-core machine.
settings.register_profile(
    "affuzz-tests",
    max_examples=int(os.environ.get("AFFUZZ_TEST_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
settings.load_profile("affuzz-tests")


def _quiet_at_exit() -> None:
    """Dynamo's cleanup callbacks of the compiled tests run at interpreter exit, after pytest gave the
    default ``sys.unraisablehook`` back: the same filter as a worker's (NOTE [compiled cases])."""
    from fuzzer.judge.execute import quiet_dynamo_cleanup

    sys.unraisablehook = quiet_dynamo_cleanup(sys.unraisablehook)


atexit.register(_quiet_at_exit)


@pytest.fixture
def seed_case() -> Case:
    return load(str(DATA / "seed_case.json"))


@pytest.fixture
def planted_case() -> Case:
    """A Function whose hand-written vmap rule contradicts its forward (outputs doubled)."""
    return load(str(DATA / "planted_vmap_case.json"))


@pytest.fixture
def judged_finding():
    """``make(case, oracle) -> (Finding, Judgement)``: ``case`` judged on this torch, as a finding a campaign
    would publish (no shrinking, no ablation)."""
    import torch

    from fuzzer.judge.judge import Judge
    from fuzzer.publish.findings import Finding
    from fuzzer.triage.signature import Signature, skeleton

    def make(case: Case, oracle: str = "functorch_vs_create_graph"):
        j = Judge(timeout=120)(case, oracle)
        assert j.outcome is not None, (j.verdict, j.reason)
        finding = Finding(
            case=case,
            signature=Signature(j.verdict, oracle, skeleton(case), (), j.fingerprint),
            features=(),
            outcome=j.outcome,
            seconds_to_find=0.0,
            cases_to_find=1,
            torch_version=torch.__version__,
            found_by="test",
        )
        return finding, j

    return make


def run_script(path: Path, *args: str, timeout: float = 300):
    import subprocess

    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout, cwd=path.parent
    )
