from __future__ import annotations

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


@pytest.fixture
def seed_case() -> Case:
    return load(str(DATA / "seed_case.json"))


@pytest.fixture
def planted_case() -> Case:
    """A Function whose hand-written vmap rule contradicts its forward (outputs doubled)."""
    return load(str(DATA / "planted_vmap_case.json"))


def run_script(path: Path, *args: str, timeout: float = 300):
    import subprocess

    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout, cwd=path.parent
    )
