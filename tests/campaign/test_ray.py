"""The same campaign on a local Ray cluster (started here with ``ray start --head``): workers are Ray
actors, the driver is still the only writer of OUT, and OUT holds the same files."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import ray  # noqa: E402,F401  (the dev extra that make setup installs brings Ray; no silent skip)
from conftest import run_script

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_cluster():
    # a short --temp-dir: Ray's Unix socket paths under it must stay within the 107-byte limit
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    start = [
        RAY,
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--object-store-memory=100000000",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    subprocess.run(start, check=True, env=env, capture_output=True, timeout=180)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_campaign_on_a_local_ray_cluster(tmp_path: Path, ray_cluster: str) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fuzzer", "run", "--ray", ray_cluster, "--max-cases", "40", "--seed", "5"]
    proc = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert summary["transport"] == stats["transport"] == "ray"
    assert summary["workers"] == 2  # one actor per CPU of the cluster
    assert summary["cases"] >= 40 and summary["internal_errors"] == 0
    assert {"cases", "elapsed_seconds", "cases_per_second", "workers", "buckets", "worker_restarts"} <= set(stats)
    assert events[0]["event"] == "start" and events[0]["transport"] == "ray" and events[-1]["event"] == "stop"
    assert sum(w["cases"] for w in stats["worker_stats"]) == summary["cases"]
    assert all(w["cases"] > 0 for w in stats["worker_stats"])  # both actors fuzzed
    verified = [b for b in summary["buckets"] if b["status"] == "verified"]
    assert verified  # real disagreements of this torch, found by the actors
    assert len([e for e in events if e["event"] == "new_bucket"]) == len(verified)
    for b in verified:
        proc = run_script(out / b["path"] / "repro.py")
        assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (out / "state.json").exists() and (out / "report.md").exists()
