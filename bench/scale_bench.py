"""Campaign throughput benchmark: overhead over bare torch work, cases/s per core, 2-worker speed-up,
memory over time, and where a worker's time goes.

* **Overhead ratio**: a campaign (``affuzz run --workers 1 --max-cases N``) against the bare torch work
  of the very same cases. The cases are regenerated from the run's worker streams (NOTE [worker
  streams]: a stream position names a case, and steering by cases is replayed the way the worker decided), each
  rendered and loaded beforehand, and only the two sides of every oracle that applies are timed: no
  Hypothesis, no comparison, no bookkeeping. ratio = worker core-seconds per case / bare seconds per
  case, where core-seconds = (wall time after start-up) x workers. Shown with and without the time the
  workers spent in shrink jobs.
* **Speed-up**: the same seed for ``--duration D`` with ``--workers 1`` and ``--workers 2``; steady-state
  cases/s (after start-up) of the two. Shrinking is off in these two runs (``--shrink-budget 0``) so
  they measure the fuzz loop; shrinking has its own benchmark (``bench/shrink_bench.py``).
* **Memory**: the driver's and workers' resident memory over a run (``rss_history`` in stats.json):
  the workers' RSS at the first sample after one minute and at the last, and their ratio.
* **Shrink queue**: jobs queued over a run (``queue_history`` in stats.json): the largest and the last.
* **Profile**: ``cProfile`` of one worker's fuzz loop in this process, time grouped by where it went,
  and a pyinstrument call tree of the same loop written to ``OUT/profile.txt`` (and ``.html``).

``--from-run OUT`` measures the overhead ratio of an existing campaign instead (e.g. a 30-minute one):
every ``--sample``-th case of each worker stream is timed bare.

    python bench/scale_bench.py [--duration 120] [--cases 300] [--seed 1]
    python bench/scale_bench.py --from-run reports/long --sample 20
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.protocol import Fuzz, WorkerInit  # noqa: E402
from fuzzer.campaign.worker import Worker  # noqa: E402
from fuzzer.codegen.render import render  # noqa: E402
from fuzzer.gen.coverage import Coverage, Steering  # noqa: E402
from fuzzer.gen.streams import Decoder  # noqa: E402
from fuzzer.ir.features import features  # noqa: E402
from fuzzer.ir.oracles import applicable  # noqa: E402


def stream_cases(
    seed: int, slot: int, kwargs: dict[str, Any], count: int, skip: set[int], steer: bool, swarm: bool = False
):
    """The cases slot ``slot`` ran, in order, as (position, case): decoding (with its swarm
    configurations, NOTE [swarm]) and steering replayed as the worker does them (NOTE [worker
    streams]), for the first ``count`` cases."""
    decoder = Decoder(seed, kwargs, swarm=swarm)
    coverage = Coverage()
    steering = Steering(coverage, seed=f"{seed}/{slot}", by="cases") if steer else None
    k = 0
    out = []
    while len(out) < count:
        pos, k = k, k + 1
        if pos in skip:
            continue
        case = decoder.draw(slot, pos)
        if case is None:
            continue
        tags, names = features(case), tuple(t.name for t in case.transforms)
        if steering is not None and not steering.accept(tags, names):
            continue
        coverage.add(tags, names)
        out.append((pos, case))
    return out


def bare_seconds(case: Any) -> float:
    """The torch work of ``case``: both sides of every oracle that applies (the judge runs all of them,
    NOTE [broken rules] in fuzzer/judge/judge.py), on fresh inputs; the scripts are rendered and loaded
    before the clock starts."""
    total = 0.0
    for oracle in applicable(case):
        ns: dict[str, Any] = {"__name__": "bare"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(render(case, oracle=oracle), "<bare>", "exec"), ns)  # noqa: S102
            for _, mode, requires_grad in ns["SIDES"]:
                args = [x.requires_grad_(requires_grad) for x in ns["inputs"]()]
                start = time.perf_counter()
                try:
                    mode(*args)
                except Exception:  # noqa: BLE001 (an error is a result too: its time counts)
                    pass
                total += time.perf_counter() - start
    return total


def affuzz(out: Path, *args: str) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "fuzzer", "run", "--out", str(out), *args]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "summary.json").read_text())


def steady_rate(summary: dict[str, Any]) -> float:
    wall = summary["elapsed_seconds"] - (summary.get("startup_seconds") or 0.0)
    return summary["cases"] / wall


def overhead(out: Path, summary: dict[str, Any], sample: int) -> dict[str, Any]:
    """Overhead ratio of the campaign in ``out`` (its state.json names the streams)."""
    state = json.loads((out / "state.json").read_text())
    cfg = state["config"]
    if cfg["steer"] and cfg.get("steer_by", "cases") != "cases":  # NOTE [cost-aware steering]
        raise SystemExit(f"{out}: steered by time, its cases cannot be regenerated; run it with --steer-by cases")
    bare: list[float] = []
    for slot in state["slots"]:
        cases = stream_cases(
            cfg["seed"],
            slot["index"],
            cfg["strategy_kwargs"],
            slot["cases"],
            set(slot["skip"]),
            cfg["steer"],
            cfg.get("swarm", False),
        )
        bare += [bare_seconds(case) for i, (_, case) in enumerate(cases) if i % sample == 0]
    bare_per_case = statistics.fmean(bare)
    workers = summary["workers"]
    core_seconds = (summary["elapsed_seconds"] - (summary.get("startup_seconds") or 0.0)) * workers
    shrink = summary["worker_seconds"].get("shrink", 0.0)
    triage = summary["worker_seconds"].get("triage", 0.0)  # ablating new findings (NOTE [signature memo])
    per_case = core_seconds / summary["cases"]
    return {
        "cases": summary["cases"],
        "workers": workers,
        "bare_cases_timed": len(bare),
        "bare_seconds_per_case": round(bare_per_case, 5),
        "core_seconds_per_case": round(per_case, 5),
        "overhead_ratio": round(per_case / bare_per_case, 3),
        "overhead_ratio_without_shrinking": round((core_seconds - shrink) / summary["cases"] / bare_per_case, 3),
        "overhead_ratio_fuzz_loop": round((core_seconds - shrink - triage) / summary["cases"] / bare_per_case, 3),
        "worker_seconds": summary["worker_seconds"],
    }


def call_tree(seed: int, cases: int, out: Path) -> Path:
    """A pyinstrument call tree of one worker's fuzz loop (``out/profile.txt`` and ``.html``)."""
    from pyinstrument import Profiler

    worker = Worker(WorkerInit(slot=0, seed=seed))
    worker.fuzz(Fuzz(start=0, max_cases=30, seconds=1e9))
    profiler = Profiler(interval=0.0005)
    profiler.start()
    worker.fuzz(Fuzz(start=10_000, max_cases=cases, seconds=1e9))
    profiler.stop()
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.txt").write_text(profiler.output_text(unicode=False, color=False))
    (out / "profile.html").write_text(profiler.output_html())
    return out / "profile.txt"


def memory(history: list[list[float]]) -> dict[str, Any] | None:
    """Workers' RSS at the first sample one minute in and at the last one (``rss_history``)."""
    later = [h for h in history if h[0] >= 55.0]
    if len(later) < 2:
        return None
    first, last = later[0], later[-1]
    return {  # each worker's RSS where the run recorded it (runs before per-worker samples: None)
        "first": {"elapsed": first[0], "workers_mib": first[2], "each_mib": first[3] if len(first) > 3 else None},
        "last": {"elapsed": last[0], "workers_mib": last[2], "each_mib": last[3] if len(last) > 3 else None},
        "growth": round(last[2] / first[2] - 1.0, 4) if first[2] else None,
    }


def queue(history: list[list[float]]) -> dict[str, Any] | None:
    """Shrink jobs queued over a run (``queue_history``: elapsed, queued, running, shrink seconds)."""
    if not history:
        return None
    return {
        "max_queued": max(h[1] for h in history),
        "last_queued": history[-1][1],
        "shrink_core_seconds": history[-1][3],
        "samples": len(history),
    }


def profile(seed: int, cases: int) -> dict[str, Any]:
    """Where one worker's time goes (cProfile of ``Worker.fuzz`` in this process), by tottime."""
    worker = Worker(WorkerInit(slot=0, seed=seed))
    worker.fuzz(Fuzz(start=0, max_cases=30, seconds=1e9))  # warm: first calls pay imports and set-up
    prof = cProfile.Profile()
    prof.enable()
    worker.fuzz(Fuzz(start=10_000, max_cases=cases, seconds=1e9))
    prof.disable()
    stats = pstats.Stats(prof)
    groups: dict[str, float] = {}
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if "hypothesis" in filename:
            g = "hypothesis (decoding cases)"
        elif name == "<built-in method builtins.compile>" or (filename == "~" and "compile" in name):
            g = "compile (rendered scripts)"
        elif filename.startswith("<affuzz"):
            g = "rendered script (python lines)"
        elif "/torch/" in filename or filename == "~":
            g = "torch (python and C++)"
        elif "/fuzzer/" in filename or "/strategies/" in filename:
            g = "affuzz (render, classify, ablate...)"
        else:
            g = "other python"
        groups[g] = groups.get(g, 0.0) + tottime
    total = sum(groups.values())
    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]  # type: ignore[attr-defined]
    return {
        "cases": cases,
        "seconds": round(total, 3),
        "share": {g: round(t / total, 3) for g, t in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top_tottime": [
            {"function": f"{Path(fn).name}:{line}({name})", "seconds": round(v[2], 3)} for (fn, line, name), v in top
        ],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=120.0, help="seconds of each speed-up run")
    p.add_argument("--cases", type=int, default=300, help="cases of the overhead run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sample", type=int, default=1, help="time every N-th case bare")
    p.add_argument("--from-run", type=Path, metavar="OUT", help="measure an existing campaign's overhead only")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-scale")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results.json")
    args = p.parse_args(argv)
    import torch

    result: dict[str, Any] = {"cores": os.cpu_count()}
    if args.from_run is not None:
        summary = json.loads((args.from_run / "summary.json").read_text())
        result["run"] = {
            "out": str(args.from_run),
            "elapsed_seconds": summary["elapsed_seconds"],
            "cases_per_second": summary["cases_per_second"],
            "rss_history": summary.get("rss_history"),
        }
        result["overhead"] = overhead(args.from_run, summary, args.sample)
        result["memory"] = memory(summary.get("rss_history") or [])
        result["queue"] = queue(summary.get("queue_history") or [])
        key = "scale_long_run"
    else:
        s = str(args.seed)
        one = affuzz(
            args.out / "overhead", "--workers", "1", "--max-cases", str(args.cases), "--seed", s, "--steer-by", "cases"
        )
        result["overhead"] = overhead(args.out / "overhead", one, args.sample)
        d = str(args.duration)
        w1 = affuzz(args.out / "w1", "--workers", "1", "--duration", d, "--seed", s, "--shrink-budget", "0")
        w2 = affuzz(args.out / "w2", "--workers", "2", "--duration", d, "--seed", s, "--shrink-budget", "0")
        r1, r2 = steady_rate(w1), steady_rate(w2)
        result["speedup"] = {
            "duration": args.duration,
            "cases_per_second_1_worker": round(r1, 3),
            "cases_per_second_2_workers": round(r2, 3),
            "cases_per_second_per_core": round(r2 / 2, 3),
            "speedup_2_over_1": round(r2 / r1, 3),
            "startup_seconds": [w1.get("startup_seconds"), w2.get("startup_seconds")],
        }
        result["rss_history_2_workers"] = w2.get("rss_history")
        result["memory"] = memory(w2.get("rss_history") or [])
        result["profile"] = profile(args.seed, min(args.cases, 150))
        result["profile_tree"] = os.path.relpath(call_tree(args.seed, min(args.cases, 300), args.out), ROOT)
        key = "scale"
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    results.setdefault(key, {})[torch.__version__] = result
    args.results.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"affuzz campaign benchmark, torch {torch.__version__}, {os.cpu_count()} cores")
    t.add_column("measure")
    t.add_column("value", justify="right")
    o = result["overhead"]
    t.add_row("bare torch seconds per case", f"{o['bare_seconds_per_case']:.4f} ({o['bare_cases_timed']} cases)")
    t.add_row("worker core-seconds per case", f"{o['core_seconds_per_case']:.4f} ({o['workers']} workers)")
    t.add_row("overhead ratio (all)", f"{o['overhead_ratio']:.2f}")
    t.add_row("overhead ratio (without shrink jobs)", f"{o['overhead_ratio_without_shrinking']:.2f}")
    t.add_row("overhead ratio (fuzz loop: without shrinking, ablation)", f"{o['overhead_ratio_fuzz_loop']:.2f}")
    if "speedup" in result:
        sp = result["speedup"]
        t.add_row("cases/s, 1 worker", f"{sp['cases_per_second_1_worker']:.2f}")
        t.add_row("cases/s, 2 workers", f"{sp['cases_per_second_2_workers']:.2f}")
        t.add_row("cases/s per core", f"{sp['cases_per_second_per_core']:.2f}")
        t.add_row("speed-up, 2 workers over 1", f"{sp['speedup_2_over_1']:.2f}")
        for g, share in result["profile"]["share"].items():
            t.add_row(f"profile: {g}", f"{100 * share:.0f} %")
    if result.get("profile_tree"):
        t.add_row("profile call tree (pyinstrument)", result["profile_tree"])
    if result.get("memory"):
        m = result["memory"]
        t.add_row(
            "worker RSS MiB: 1 min in, last",
            f"{m['first']['workers_mib']:.0f} ({m['first']['elapsed']:.0f} s), "
            f"{m['last']['workers_mib']:.0f} ({m['last']['elapsed']:.0f} s): {100 * (m['growth'] or 0):+.1f} %",
        )
        if m["first"]["each_mib"] and m["last"]["each_mib"]:
            each = zip(m["first"]["each_mib"], m["last"]["each_mib"], strict=False)
            t.add_row(
                "each worker's RSS MiB: 1 min in -> last",
                ", ".join(
                    f"slot {i}: {a:.0f} -> {b:.0f} ({100 * (b / a - 1):+.1f} %)" for i, (a, b) in enumerate(each)
                ),
            )
    if result.get("queue"):
        q = result["queue"]
        t.add_row("shrink jobs queued: max, last", f"{q['max_queued']}, {q['last_queued']}")
    history = result.get("rss_history_2_workers") or (result.get("run") or {}).get("rss_history") or []
    if history:
        totals = [h[1] + h[2] for h in history]
        t.add_row(
            "RSS MiB driver+workers: first, last, peak",
            f"{totals[0]:.0f}, {totals[-1]:.0f}, {max(totals):.0f} ({len(totals)} samples)",
        )
    Console().print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
