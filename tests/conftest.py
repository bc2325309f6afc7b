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


#: Test tiers, by path under tests/ (a folder or a file; the longest match wins): ``unit`` never imports
#: torch (the IR, strategies, generation, layout: the inner loop's ``make test-unit``, seconds), ``torch``
#: runs cases on real torch, ``campaign`` runs campaigns and the CLI, ``shrink`` pins what the shrinker
#: finds. ``make test`` runs them all; a test file in no tier is a collection error.
TIERS = {
    "ir": "unit",
    "strategies": "unit",
    "test_layout.py": "unit",
    "codegen": "torch",
    "judge": "torch",
    "publish": "torch",
    "history": "torch",
    "check": "torch",
    "triage/test_buckets.py": "torch",
    "triage/test_shrink.py": "shrink",
    "campaign": "campaign",
    "cli": "campaign",
    "test_readme_example.py": "campaign",
    "versions": "torch",
}


def tier_of(path: Path) -> str:
    """The tier of the test file at ``path`` (:data:`TIERS`); a file in none raises."""
    rel = path.resolve().relative_to(ROOT / "tests").as_posix()
    matches = [k for k in TIERS if rel == k or rel.startswith(k + "/")]
    if not matches:
        raise pytest.UsageError(f"{rel}: in no test tier; add it to TIERS in tests/conftest.py")
    return TIERS[max(matches, key=len)]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m <tier>`` alone, the other tiers' files are not even imported (so ``-m unit`` never imports
    torch through another tier's module)."""
    tier = config.option.markexpr
    if tier in set(TIERS.values()) and collection_path.is_file() and collection_path.name.startswith("test_"):
        return tier_of(collection_path) != tier or None
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(Path(str(item.fspath)))))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The ``unit`` tier promises no torch: running it alone checks that promise."""
    if session.config.option.markexpr == "unit" and "torch" in sys.modules and exitstatus == 0:
        session.exitstatus = 1
        print("\nthe unit tier imported torch: a test of it is not torch-free (tests/conftest.py TIERS)")


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
