"""Acceptance check for crash isolation and resume, on the real command line.

1. ``affuzz run --workers 2 --duration D`` in the background;
2. after a while ``kill -9`` one worker (pid from ``stats.json``) while it runs a case: the campaign must
   go on and write ``crash`` + ``worker_restart`` events;
3. later ``kill -9`` the driver itself: every file under OUT must still parse;
4. ``affuzz run --resume OUT --duration D2``: counters, buckets and coverage continue, events are appended,
   every finding published before the kill is still there.

Prints what it saw and exits 1 if any of it does not hold.

    python bench/resilience.py [--out reports/resilience] [--seed 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def _wait(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    raise SystemExit("timed out waiting")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "resilience")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--kill-worker-at", type=float, default=40.0, help="seconds into the run")
    p.add_argument("--kill-driver-at", type=float, default=90.0, help="seconds into the run")
    p.add_argument("--resume-for", type=float, default=60.0, help="seconds the resumed campaign adds")
    args = p.parse_args(argv)
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "fuzzer", "run", "--workers", "2", "--duration", "1h", "--seed", str(args.seed)]
    driver = subprocess.Popen([*cmd, "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL)
    ok = True
    try:

        def fuzzing() -> bool:  # a worker that runs cases (not a shrink job) when the time has come
            stats = _json(out / "stats.json")
            return stats["elapsed_seconds"] >= args.kill_worker_at and any(
                w["doing"] == "fuzzing" for w in stats["worker_stats"]
            )

        _wait(fuzzing, 600)
        stats = _json(out / "stats.json")
        victim = next(w["pid"] for w in stats["worker_stats"] if w["doing"] == "fuzzing")
        os.kill(victim, signal.SIGKILL)
        print(f"killed worker pid {victim} at {stats['elapsed_seconds']:.0f} s ({stats['cases']} cases)")
        _wait(lambda: any(e["event"] == "worker_restart" for e in _events(out)), 120)
        _wait(lambda: _json(out / "stats.json")["elapsed_seconds"] >= args.kill_driver_at, 600)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    state = _json(out / "state.json")
    print(f"killed the driver (pid {driver.pid}); state.json saved {state['stats']['cases']} cases")
    files = [*out.glob("*.json"), *out.glob("findings/*/*.json")]
    for f in files:
        _json(f)
    before = _events(out)
    print(f"all {len(files)} JSON files parse; events.jsonl has {len(before)} whole lines")
    for e in before:
        if e["event"] in ("crash", "hang", "worker_restart"):
            print(f"  event {e['event']}: " + ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("time", "event")))
    published = {d.name for d in (out / "findings").iterdir()} if (out / "findings").exists() else set()
    total = state["stats"]["elapsed"] + args.resume_for
    subprocess.run(
        [sys.executable, "-m", "fuzzer", "run", "--resume", str(out), "--duration", f"{total:.0f}"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    summary = _json(out / "summary.json")
    after = _events(out)
    resumed = [e for e in after if e["event"] == "start" and e["resumed"]]
    checks = {
        "the worker kill was recorded (crash + worker_restart)": any(e["event"] == "crash" for e in before)
        and any(e["event"] == "worker_restart" for e in before),
        "events were appended, not rewritten": after[: len(before)] == before,
        "the resumed campaign started from the saved counters": bool(resumed)
        and resumed[0]["cases"] == state["stats"]["cases"],
        "counters went on": summary["cases"] > state["stats"]["cases"],
        "elapsed time went on": summary["elapsed_seconds"] > state["stats"]["elapsed"],
        "every finding published before the kill is still a verified bucket": published
        <= {b["id"] for b in summary["buckets"] if b["status"] == "verified"},
        "restarts carried over": summary["worker_restarts"] >= state["stats"]["worker_restarts"] >= 1,
    }
    print(
        f"resumed: {state['stats']['cases']} -> {summary['cases']} cases, {len(published)} -> "
        f"{len(summary['buckets'])} buckets, elapsed {state['stats']['elapsed']:.0f} -> {summary['elapsed_seconds']:.0f} s"
    )
    for what, held in checks.items():
        print(f"  {'ok  ' if held else 'FAIL'} {what}")
        ok &= held
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
