"""Campaign throughput benchmark: the steady rate with compiled cases on and off, the fuzz loop's overhead
over bare torch work (compiled and torch.func cases apart), the 2-worker speed-up, memory over time, and
where a worker's time goes. Everything comes from the same default campaigns, every mode on.

* **Steady rate**: ``affuzz run --workers 1 --duration D --shrink-budget 0`` with the defaults and with
  ``--compile-share 0``, same seed, one after the other; cases/s from one minute in (the first minute is
  triage-heavy: every bug is new) to the last progress sample before the stop, and their ratio.
* **Overhead ratio**: the default run's worker time against the bare torch work of the same cases. The
  run names a uniform sample of its cases (``case_sample``, NOTE [case sample] in
  fuzzer/campaign/config.py); they are regenerated from their stream positions, rendered and loaded
  beforehand, and only the sides of every oracle that applies are timed (side A once, as the fuzz loop
  runs it; a compiled case's compile included, Dynamo's resets around it not): no Hypothesis, no
  comparison, no bookkeeping. Per kind of case: the fuzz loop's seconds per case (NOTE [worker time]) over
  the bare seconds; for the whole run: worker core-seconds per case over bare seconds per case, with and
  without shrink jobs and triage.
* **Speed-up**: the default run with ``--workers 2`` against ``--workers 1``, steady rates.
* **Memory**: the driver's and workers' resident memory over the 2-worker run (``rss_history``).
* **Profile**: a phase profile of an in-process worker's fuzz loop (a timer around each phase, no
  profiler: decoding, rendering, the script's checks and the sides in them, classifying, triage...), per
  case, compiled and torch.func cases apart; and a pyinstrument call tree (``OUT/profile.txt``, ``.html``).

``--from-run OUT`` measures the overhead ratio, memory and shrink queue of an existing campaign (e.g. a
30-minute one) from its case sample; a run from before the sample only where it was steered by cases (its
streams are then replayed).

    python bench/scale_bench.py [--duration 120] [--seed 1]
    python bench/scale_bench.py --from-run reports/long --sample 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.protocol import Fuzz, WorkerInit  # noqa: E402
from fuzzer.campaign.worker import Worker  # noqa: E402
from fuzzer.codegen.render import render  # noqa: E402
from fuzzer.gen.compiled import DEFAULT_SHARE  # noqa: E402
from fuzzer.gen.coverage import Coverage, Steering  # noqa: E402
from fuzzer.gen.streams import Decoder  # noqa: E402
from fuzzer.ir.case import Compile  # noqa: E402
from fuzzer.ir.features import features  # noqa: E402
from fuzzer.ir.oracles import applicable  # noqa: E402
from fuzzer.judge.execute import reset_compiler  # noqa: E402
from fuzzer.judge.torch_state import freeze_heap  # noqa: E402

#: Sampled cases of each kind run once, untimed, before the timing: a process's first calls of a transform
#: pay set-up a campaign's worker paid once, long before.
WARM_UP = 20


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
    """The torch work of ``case``, as the fuzz loop runs it (NOTE [one exec per case] in
    fuzzer/codegen/render.py): side A once, then side B of every oracle that applies (and an oracle's own
    side A), each on fresh inputs; the script is rendered and loaded before the clock starts. A compiled
    case's compile is torch's work and is timed; Dynamo's resets around it are not."""
    oracles = applicable(case)
    compiled = case.compile is not None
    if compiled:
        reset_compiler()
    ns: dict[str, Any] = {"__name__": "bare"}
    total = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(render(case, oracle=oracles[0], also=oracles[1:]), "<bare>", "exec"), ns)  # noqa: S102
        (_, mode_a, grad_a), side_b = ns["SIDES"]
        sides = [(mode_a, grad_a)]
        for o in oracles:
            _, mode, grad = ns.get("ORACLE_SIDES", {}).get(o, side_b)
            sides.append((mode, grad))
            if o in ns.get("ORACLE_A", {}):
                sides.append(ns["ORACLE_A"][o][1:])
        for mode, requires_grad in sides:
            args = [x.requires_grad_(requires_grad) for x in ns["inputs"]()]
            start = time.perf_counter()
            try:
                mode(*args)
            except Exception:  # noqa: BLE001 (an error is a result too: its time counts)
                pass
            total += time.perf_counter() - start
    if compiled:
        reset_compiler()
    return total


def sampled_cases(state: dict[str, Any], summary: dict[str, Any], kind: str, every: int) -> list[Any]:
    """Every ``every``-th case of the run's ``case_sample`` of ``kind`` (NOTE [case sample]), regenerated
    from its slot and position (and, compiled, how it ran compiled)."""
    cfg = state["config"]
    decoder = Decoder(cfg["seed"], cfg["strategy_kwargs"], swarm=cfg.get("swarm", False))
    out = []
    for entry in summary["case_sample"]["cases"][kind][::every]:
        case = decoder.draw(entry[0], entry[1])
        if case is None:  # cannot happen for a position the run ran; a run of other strategies would
            raise SystemExit(f"position {entry[1]} of slot {entry[0]} decodes to no case: another affuzz version?")
        if kind == "compiled":
            case = replace(case, compile=Compile(entry[2], entry[3], entry[4]))
        out.append(case)
    return out


def _loop_ratios(summary: dict[str, Any], bare: dict[str, float]) -> dict[str, Any]:
    """Per kind of case: the fuzz loop's seconds per case (NOTE [worker time]) over its bare torch seconds."""
    wt = summary["worker_time"]
    out = {}
    for kind in ("torch_func", "compiled"):
        if kind in bare and wt["cases"][kind]:
            loop = wt["loop_seconds_per_case"][kind]
            out[kind] = {
                "cases": wt["cases"][kind],
                "loop_seconds_per_case": loop,
                "bare_seconds_per_case": round(bare[kind], 6),
                "overhead_ratio": round(loop / bare[kind], 3),
            }
    return out


def overhead(out: Path, summary: dict[str, Any], sample: int, compiled_sample: int = 1) -> dict[str, Any]:
    """Overhead ratio of the campaign in ``out``: worker core seconds per case over the bare torch work of
    the same cases, from its ``case_sample`` (NOTE [case sample]; any steering), compiled and torch.func
    cases apart; a run older than the sample only where it was steered by cases (its streams replayed)."""
    state = json.loads((out / "state.json").read_text())
    cfg = state["config"]
    workers = summary["workers"]
    core_seconds = (summary["elapsed_seconds"] - (summary.get("startup_seconds") or 0.0)) * workers
    bare: dict[str, float] = {}
    timed: dict[str, int] = {}
    freeze_heap(start=True)  # NOTE [frozen heap]: as a worker, so a collection costs what it costs there
    if "case_sample" in summary:
        seen = summary["case_sample"]["seen"]
        for kind, every in (("torch_func", sample), ("compiled", compiled_sample)):
            cases = sampled_cases(state, summary, kind, every)
            for case in cases[:WARM_UP]:  # a worker's first cases pay one-time set-up: not timed
                bare_seconds(case)
            if cases:
                bare[kind] = statistics.fmean(bare_seconds(c) for c in cases)
                timed[kind] = len(cases)
        n = sum(seen[k] for k in bare)
        bare_per_case = sum(bare[k] * seen[k] for k in bare) / n
    else:
        if cfg["steer"] and cfg.get("steer_by", "cases") != "cases":  # NOTE [cost-aware steering]
            raise SystemExit(
                f"{out}: no case_sample in its summary and steered by time: its cases cannot be regenerated"
            )
        times: list[float] = []
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
            times += [bare_seconds(case) for i, (_, case) in enumerate(cases) if i % sample == 0]
        bare_per_case = statistics.fmean(times)
        timed["torch_func"] = len(times)
    shrink = summary["worker_seconds"].get("shrink", 0.0)
    triage = summary["worker_seconds"].get("triage", 0.0)  # ablating new findings (NOTE [signature memo])
    per_case = core_seconds / summary["cases"]
    result = {
        "cases": summary["cases"],
        "workers": workers,
        "bare_cases_timed": timed,
        "bare_seconds_per_case": round(bare_per_case, 5),
        "core_seconds_per_case": round(per_case, 5),
        "overhead_ratio": round(per_case / bare_per_case, 3),
        "overhead_ratio_without_shrinking": round((core_seconds - shrink) / summary["cases"] / bare_per_case, 3),
        "overhead_ratio_fuzz_loop": round((core_seconds - shrink - triage) / summary["cases"] / bare_per_case, 3),
        "worker_seconds": summary["worker_seconds"],
    }
    if "worker_time" in summary and bare:
        result["by_kind"] = _loop_ratios(summary, bare)
        result["worker_time"] = summary["worker_time"]
    return result


def affuzz(out: Path, *args: str) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "fuzzer", "run", "--out", str(out), *args]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "summary.json").read_text())


def steady_rate(summary: dict[str, Any], stop: float, after: float = 60.0) -> dict[str, float] | None:
    """Cases/s of a run between its first progress sample ``after`` seconds in (a campaign's first minute
    is triage-heavy: every bug is new) and its last sample before ``stop`` (``progress_history``)."""
    history = [h for h in summary.get("progress_history") or [] if h[0] <= stop]
    later = [h for h in history if h[0] >= after]
    if len(later) < 2:
        return None
    first, last = later[0], later[-1]
    return {"from": first[0], "to": last[0], "cases_per_second": round((last[1] - first[1]) / (last[0] - first[0]), 3)}


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


#: NOTE [worker time]: the phases of a worker's fuzz loop a phase profile times, (module, attribute, label);
#: a phase run inside another counts in both (the script's checks hold the sides' torch work).
PHASES = (
    ("fuzzer.gen.streams", "Decoder.draw", "decode (Hypothesis)"),
    ("fuzzer.judge.execute", "render", "render"),
    ("fuzzer.judge.execute", "_compiled", "compile the script's blocks"),
    ("fuzzer.judge.execute", "_run_checks", "run the script's checks"),
    ("fuzzer.judge.execute", "_side", "summarize a side (errors, values)"),
    ("fuzzer.judge.execute", "reset_compiler", "reset Dynamo"),
    ("fuzzer.judge.execute", "repair_torch_state", "repair torch state (gc)"),
    ("fuzzer.judge.execute", "freeze_heap", "freeze the heap"),
    ("fuzzer.judge.judge", "Judge._classify", "classify (and float64 re-checks)"),
    ("fuzzer.campaign.worker", "features", "features"),
    ("fuzzer.campaign.worker", "torch_state_changes", "probe torch state"),
    ("fuzzer.campaign.worker", "Worker._finding", "triage new findings"),
)


def phase_profile(seed: int, warm: float, span: float, share: float) -> dict[str, Any]:
    """Where one in-process worker's fuzz loop spends its wall time, after ``warm`` seconds, for ``span``
    seconds: a timer around each of :data:`PHASES` (no profiler, so Python and torch are timed alike),
    the sides' own seconds (the script's ``SECONDS``), compiled and torch.func cases apart, and the loop
    around them (decoding, steering: ``loop``, per case of either kind)."""
    import importlib

    kinds = ("loop", "torch_func", "compiled")
    acc: dict[str, dict[str, float]] = {k: {} for k in kinds}
    current = ["loop"]

    def timed(fn: Any, label: str) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent = time.perf_counter() - start
                acc[current[0]][label] = acc[current[0]].get(label, 0.0) + spent
                if label == "run the script's checks":
                    sides = sum(a[0].get("SECONDS", {}).values())
                    acc[current[0]]["  of which the sides (torch)"] = (
                        acc[current[0]].get("  of which the sides (torch)", 0.0) + sides
                    )

        return wrapper

    patched = []
    for module, attr, label in PHASES:
        owner: Any = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, timed(getattr(owner, name), label))
    try:
        worker = Worker(WorkerInit(slot=0, seed=seed, compile_share=share, own_process=True))
        run = worker.run

        def kind_run(case: Any, *a: Any, **kw: Any) -> Any:
            current[0] = "compiled" if case.compile is not None else "torch_func"
            start = time.perf_counter()
            try:
                return run(case, *a, **kw)
            finally:
                acc[current[0]]["the case (Worker.run)"] = acc[current[0]].get("the case (Worker.run)", 0.0) + (
                    time.perf_counter() - start
                )
                current[0] = "loop"

        worker.run = kind_run  # type: ignore[method-assign]
        k, start = 0, time.monotonic()
        while time.monotonic() - start < warm:
            k = worker.fuzz(Fuzz(start=k, max_cases=10_000, seconds=1.0)).next
        for d in acc.values():
            d.clear()
        cases0, compiled0 = worker.cases_run, worker.compiles.compiled_cases
        start = time.perf_counter()
        while time.perf_counter() - start < span:
            k = worker.fuzz(Fuzz(start=k, max_cases=10_000, seconds=1.0)).next
        wall = time.perf_counter() - start
    finally:
        for owner, name, fn in patched:
            setattr(owner, name, fn)
    counts = {"compiled": worker.compiles.compiled_cases - compiled0}
    counts["torch_func"] = worker.cases_run - cases0 - counts["compiled"]
    counts["loop"] = worker.cases_run - cases0
    return {
        "seconds": round(wall, 3),
        "cases": counts,
        "compile_share": share,
        "ms_per_case": {
            kind: {
                label: round(1000 * v / counts[kind], 3)
                for label, v in sorted(acc[kind].items(), key=lambda kv: -kv[1])
                if counts[kind]
            }
            for kind in kinds
        },
        "share_of_wall": {
            kind: {label: round(v / wall, 4) for label, v in sorted(acc[kind].items(), key=lambda kv: -kv[1])}
            for kind in kinds
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=120.0, help="seconds of each campaign run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sample", type=int, default=4, help="time every N-th sampled torch.func case bare")
    p.add_argument("--compiled-sample", type=int, default=1, help="time every N-th sampled compiled case bare")
    p.add_argument("--profile-seconds", type=float, default=60.0, help="seconds of the phase profile (0: none)")
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
        result["overhead"] = overhead(args.from_run, summary, args.sample, args.compiled_sample)
        result["memory"] = memory(summary.get("rss_history") or [])
        result["queue"] = queue(summary.get("queue_history") or [])
        key = "scale_long_run"
    else:
        s, d = str(args.seed), str(args.duration)
        one = ["--workers", "1", "--duration", d, "--seed", s, "--shrink-budget", "0"]
        on = affuzz(args.out / "w1", *one)  # the default: compiled cases on
        off = affuzz(args.out / "w1-no-compile", *one, "--compile-share", "0")
        w2 = affuzz(args.out / "w2", "--workers", "2", "--duration", d, "--seed", s, "--shrink-budget", "0")
        after = min(60.0, args.duration / 2)
        r_on, r_off, r2 = (steady_rate(x, args.duration, after) for x in (on, off, w2))
        result["steady"] = {
            "duration": args.duration,
            "compiled_on": r_on,
            "compiled_off": r_off,
            "on_over_off": round(r_on["cases_per_second"] / r_off["cases_per_second"], 3) if r_on and r_off else None,
            "two_workers": r2,
            "speedup_2_over_1": round(r2["cases_per_second"] / r_on["cases_per_second"], 3) if r2 and r_on else None,
            "startup_seconds": [x.get("startup_seconds") for x in (on, off, w2)],
        }
        result["worker_time"] = {"compiled_on": on.get("worker_time"), "compiled_off": off.get("worker_time")}
        result["overhead"] = overhead(args.out / "w1", on, args.sample, args.compiled_sample)
        result["rss_history_2_workers"] = w2.get("rss_history")
        result["memory"] = memory(w2.get("rss_history") or [])
        if args.profile_seconds > 0:
            result["profile"] = phase_profile(args.seed, 30.0, args.profile_seconds, DEFAULT_SHARE)
            result["profile_tree"] = os.path.relpath(call_tree(args.seed, 300, args.out), ROOT)
        key = "scale"
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    results.setdefault(key, {})[torch.__version__] = result
    args.results.write_text(json.dumps(results, indent=2) + "\n")
    print_tables(result, torch.__version__)
    return 0


def print_tables(result: dict[str, Any], version: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"affuzz campaign benchmark, torch {version}, {result['cores']} cores")
    t.add_column("measure")
    t.add_column("value", justify="right")
    if result.get("steady"):
        st = result["steady"]
        for name, label in (("compiled_on", "default (compiled on)"), ("compiled_off", "--compile-share 0")):
            r = st[name]
            t.add_row(
                f"steady cases/s, 1 worker, {label}",
                f"{r['cases_per_second']:.1f} ({r['from']:.0f}-{r['to']:.0f} s)" if r else "-",
            )
        t.add_row("steady cases/s: compiled on / off", f"{st['on_over_off']}")
        if st["two_workers"]:
            t.add_row("steady cases/s, 2 workers (default)", f"{st['two_workers']['cases_per_second']:.1f}")
        t.add_row("speed-up, 2 workers over 1", f"{st['speedup_2_over_1']}")
    o = result["overhead"]
    t.add_row("bare torch seconds per case", f"{o['bare_seconds_per_case']:.4f} ({o['bare_cases_timed']} timed)")
    t.add_row("worker core-seconds per case", f"{o['core_seconds_per_case']:.4f} ({o['workers']} workers)")
    t.add_row("overhead ratio (all)", f"{o['overhead_ratio']:.2f}")
    t.add_row("overhead ratio (without shrink jobs)", f"{o['overhead_ratio_without_shrinking']:.2f}")
    t.add_row("overhead ratio (fuzz loop: without shrinking, triage)", f"{o['overhead_ratio_fuzz_loop']:.2f}")
    for kind, r in (o.get("by_kind") or {}).items():
        t.add_row(
            f"fuzz loop over bare torch, {kind} cases",
            f"{r['overhead_ratio']:.2f} ({1000 * r['loop_seconds_per_case']:.2f} / "
            f"{1000 * r['bare_seconds_per_case']:.2f} ms, {r['cases']} cases)",
        )
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
    console.print(t)
    if result.get("profile"):
        pr = result["profile"]
        t = Table(
            title=f"where a worker's fuzz loop goes (ms per case, {pr['seconds']:.0f} s, share {pr['compile_share']})"
        )
        t.add_column("phase")
        for kind in ("loop", "torch_func", "compiled"):
            t.add_column(f"{kind} ({pr['cases'][kind]} cases)", justify="right")
        labels = list(dict.fromkeys(lbl for kind in pr["ms_per_case"].values() for lbl in kind))
        for label in labels:
            t.add_row(
                label, *(f"{pr['ms_per_case'][k].get(label, 0.0):.3f}" for k in ("loop", "torch_func", "compiled"))
            )
        console.print(t)


if __name__ == "__main__":
    sys.exit(main())
