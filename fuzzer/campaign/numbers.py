"""A campaign's numbers: ``stats.json`` and the live view (:func:`live`), ``summary.json`` (:func:`summary`).
Read from the driver's counters and book; written by the driver."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from ..gen.swarm import SLICE
from ..ir.case import TRANSFORMS
from ..ir.features import ALL_FEATURES
from ..ir.oracles import CHECKPOINT, COMPILED, CUSTOM_OP
from ..ir.verdicts import ALL_VERDICTS
from ..publish.findings import bucket_row
from .worker import rss_mb

if TYPE_CHECKING:
    from .driver import Campaign


def live(c: Campaign, updated: str) -> dict[str, Any]:
    """The numbers of ``stats.json`` and the live view."""
    s = c.stats
    cfg = c.config
    elapsed = s.elapsed
    now = time.monotonic()
    workers = []
    for slot in c.slots:
        h = slot.handle
        up = now - slot.started
        workers.append(
            {
                "slot": slot.index,
                "pid": h.pid if h is not None else None,
                "cases": slot.cases,
                "cases_per_second": round(slot.cases_since_start / up, 2) if up > 0 else 0.0,
                "restarts": slot.restarts,
                "recycles": slot.recycles,
                "rss_mb": round(slot.rss_mb, 1),
                "doing": "shrinking" if slot.job is not None else ("fuzzing" if h and h.command else "idle"),
                "next_position": slot.next,
            }
        )
    verified = sum(b.status == "verified" for b in c.buckets.values())
    return {
        "schema_version": 1,
        "updated": updated,
        "seed": cfg.seed,
        "torch_version": c.torch_version,
        "transport": c.transport,
        "elapsed_seconds": round(elapsed, 3),
        "remaining_seconds": round(max(0.0, cfg.duration - elapsed), 3) if cfg.duration is not None else None,
        "cases": s.cases,
        "cases_per_second": round(s.cases / elapsed, 3) if elapsed > 0 else 0.0,
        "workers": len(c.slots),
        "worker_stats": workers,
        "buckets": len(c.buckets),
        "verified_buckets": verified,
        "seconds_since_new_bucket": round(elapsed - s.last_bucket_elapsed, 3),
        "shrinks_queued": len(c.scheduler.queue),
        "shrinks_queued_max": max((q[1] for q in c.queue_history), default=len(c.scheduler.queue)),
        "worker_restarts": s.worker_restarts,
        "worker_recycles": s.worker_recycles,
        "crashes": s.verdicts.get("crash", 0),
        "hangs": s.verdicts.get("hang", 0),
        "verdicts": {v: s.verdicts.get(v, 0) for v in ALL_VERDICTS},
        "skipped_by_steering": s.skipped,
        "invalid_inputs": s.invalid,
        "internal_errors": s.internal_errors,
        "oracles": oracles(c),
        "worker_time": worker_time(c),
        "triage": triage_stats(c),
        "swarm": swarm(c),
        "coverage": {
            **c.coverage.saturation(ALL_FEATURES, TRANSFORMS),
            "cells": c.coverage.to_json()["cells"],
        },
        "shrinking": c.shrinking,
        "max_cases": cfg.max_cases,
        "recent_buckets": [
            {
                "id": b.signature.id,
                "transforms": list(b.signature.skeleton),
                "signature_features": list(b.signature.features),
                "hits": b.hits,
                "lines_before": b.published.shrink.get("lines_before"),
                "lines_after": b.published.shrink.get("lines_after"),
                "status": b.status,
            }
            for b in list(c.buckets.values())[-6:]
        ],
        "rss_mb": {
            "driver": round(rss_mb(), 1),
            "workers": round(sum(w["rss_mb"] for w in workers), 1),
        },
        "worker_seconds": {k: round(v, 3) for k, v in s.seconds.items()},
        "startup_seconds": round(c.startup_seconds, 3) if c.startup_seconds is not None else None,
        "rss_history": c.rss_history,
        "queue_history": c.queue_history,
        "progress_history": c.progress_history,
    }


def triage_stats(c: Campaign) -> dict[str, Any]:
    """NOTE [triage share]: what triage of new findings cost (per new bucket), and how many waited."""
    s = c.stats
    seconds = s.seconds.get("triage", 0.0)
    return {
        "share": c.config.triage_share,
        "core_seconds": round(seconds, 3),
        "of_which_compiled": round(s.seconds.get("triage_compiled", 0.0), 3),
        "seconds_per_bucket": round(seconds / len(c.buckets), 3) if c.buckets else None,
        "waited": s.untriaged,
        "waiting": len(c.scheduler.untriaged),
        "left_untriaged": s.left_untriaged,
    }


def shrink_stats(c: Campaign) -> dict[str, Any]:
    seconds = sorted(t for b in c.buckets.values() for t in b.shrink_seconds)
    return {
        "budget": c.config.shrink_budget,
        "shrinks": len(seconds),
        "seconds_total": round(sum(seconds), 3),
        "seconds_median": seconds[len(seconds) // 2] if seconds else None,
        "seconds_max": seconds[-1] if seconds else None,
        "unshrunk": sum(1 for b in c.buckets.values() if "skipped" in b.published.shrink),
        "worker_crashes": c.stats.shrink_worker_crashes,
    }


def worker_wall(c: Campaign) -> float:
    """Core seconds the workers have had since each slot's first worker first spoke (its start-up over; a
    restart's counts in): the campaign's elapsed time times the workers, less each slot's first start-up
    (NOTE [worker time])."""
    elapsed = c.elapsed if c.elapsed is not None else c.stats.elapsed  # a stopped campaign: its length
    end = c.stats.started + elapsed - c.stats.elapsed_before
    wall = elapsed * len(c.slots)
    for slot in c.slots:
        wall -= min(slot.ready if slot.ready is not None else end, end) - c.stats.started
    return max(0.0, wall)


def oracles(c: Campaign) -> dict[str, Any]:
    """Per oracle: the cases it ran on, the core seconds it took, cases per core second and its share of the
    worker wall time (NOTE [worker time]: a torch.func oracle's sides; the compiled oracle all that its
    cases cost for running compiled, their findings' triage included, NOTE [compile share]); the compiled
    oracle's documented limitations by name (NOTE [compiled mode])."""
    s = c.stats
    wall = worker_wall(c)
    out: dict[str, Any] = {}
    compiled = s.seconds.get("compiled", 0.0) + s.seconds.get("triage_compiled", 0.0)
    for oracle, n in s.oracle_cases.items():
        secs = compiled if oracle == COMPILED else s.oracle_seconds.get(oracle, 0.0)
        out[oracle] = {
            "cases": n,
            "core_seconds": round(secs, 3),
            "cases_per_core_second": round(n / secs, 2) if secs else None,
            "share_of_worker_time": round(secs / wall, 4) if wall else None,
        }
    if COMPILED in out:
        out[COMPILED]["sides_core_seconds"] = round(s.oracle_seconds.get(COMPILED, 0.0), 3)
        out[COMPILED]["compile_share"] = c.config.compile_share
        out[COMPILED]["expected_by_limitation"] = dict(s.compiled_limitations)
    if CHECKPOINT in out:
        out[CHECKPOINT]["checkpoint_share"] = c.config.checkpoint_share
    if CUSTOM_OP in out:  # NOTE [modes]: the whole of a custom-op case is the mode's (it runs instead)
        op = s.seconds.get("custom_op", 0.0)
        out[CUSTOM_OP]["custom_op_share"] = c.config.custom_op_share
        out[CUSTOM_OP]["cases_as_custom_op"] = s.feature_counts.get("custom_op", 0)
        out[CUSTOM_OP]["mode_core_seconds"] = round(op, 3)
        out[CUSTOM_OP]["mode_share_of_worker_time"] = round(op / wall, 4) if wall else None
    for key, verdicts in sorted(s.mode_verdicts.items()):  # NOTE [modes]: per configuration of a mode
        oracle = CHECKPOINT if key.startswith("checkpoint:") else COMPILED
        if oracle in out:
            out[oracle].setdefault("verdicts_by_mode", {})[key] = dict(verdicts)
    return out


def worker_time(c: Campaign) -> dict[str, Any]:
    """NOTE [worker time]: where the workers' wall time went, in core seconds and as shares of it: the fuzz
    loop (of it: decoding and steering, the torch.func oracles' sides, running cases compiled, the rest:
    rendering, loading, comparing, bookkeeping), triage of new findings, shrink jobs, and what is left
    (waiting for the driver, restarts)."""
    s = c.stats
    wall = worker_wall(c)
    loop = s.seconds.get("loop", 0.0)
    compiled = s.seconds.get("compiled", 0.0)
    compiled_triage = s.seconds.get("triage_compiled", 0.0)
    sides = sum(v for o, v in s.oracle_seconds.items() if o != COMPILED)
    parts = {
        "generate": s.seconds.get("generate", 0.0),
        "torch_func_sides": sides,
        "compiled": compiled + compiled_triage,
        "loop_rest": max(0.0, loop - s.seconds.get("generate", 0.0) - sides - compiled),
        "triage": s.seconds.get("triage", 0.0) - compiled_triage,
        "shrink": s.seconds.get("shrink", 0.0),
    }
    parts["other"] = max(0.0, wall - loop - s.seconds.get("triage", 0.0) - parts["shrink"])
    return {
        "wall_core_seconds": round(wall, 3),
        "fuzz_loop_core_seconds": round(loop, 3),
        "core_seconds": {k: round(v, 3) for k, v in parts.items()},
        "share": {k: round(v / wall, 4) if wall else None for k, v in parts.items()},
        "cases": {"torch_func": s.cases - s.sample.seen["compiled"], "compiled": s.sample.seen["compiled"]},
        "loop_seconds_per_case": {
            "torch_func": round(
                (loop - s.seconds.get("loop_compiled", 0.0)) / max(1, s.cases - s.sample.seen["compiled"]), 6
            ),
            "compiled": round(s.seconds.get("loop_compiled", 0.0) / max(1, s.sample.seen["compiled"]), 6),
        },
    }


def swarm(c: Campaign) -> dict[str, Any]:
    """NOTE [swarm]: whether it is on, the positions per configuration, and the configurations (slices of
    a slot's stream) the run has drawn from; each finding's own configuration is in its finding.json."""
    if not c.config.swarm:
        return {"enabled": False}
    return {"enabled": True, "slice": SLICE, "configurations": sum(-(-slot.next // SLICE) for slot in c.slots)}


def summary(c: Campaign) -> dict[str, Any]:
    s = c.stats
    elapsed = c.elapsed if c.elapsed is not None else s.elapsed
    return {
        "schema_version": 1,
        "seed": c.config.seed,
        "torch_version": c.torch_version,
        "python_version": sys.version.split()[0],
        "cases": s.cases,
        "invalid_inputs": s.invalid,
        "skipped_by_steering": s.skipped,
        "workers": len(c.slots),
        "transport": c.transport,
        "worker_restarts": s.worker_restarts,
        "worker_recycles": s.worker_recycles,
        "worker_seconds": {k: round(v, 3) for k, v in s.seconds.items()},
        "startup_seconds": round(c.startup_seconds, 3) if c.startup_seconds is not None else None,
        "rss_history": c.rss_history,
        "queue_history": c.queue_history,
        "progress_history": c.progress_history,
        "swarm": swarm(c),
        "coverage": {
            **c.coverage.saturation(ALL_FEATURES, TRANSFORMS),
            "cells": c.coverage.to_json()["cells"],
        },
        "elapsed_seconds": round(elapsed, 3),
        "cases_per_second": round(s.cases / elapsed, 2) if elapsed else 0.0,
        "verdicts": {v: s.verdicts.get(v, 0) for v in ALL_VERDICTS},
        "expected_by_limitation": dict(s.limitations),
        "not_applicable_by_reason": dict(s.not_applicable),  # every oracle (NOTE [valid comparisons])
        "internal_errors": s.internal_errors,
        "float32_noise": s.float32_noise,
        "metamorphic_verdicts": {o: dict(c) for o, c in s.metamorphic.items()},
        "oracles": oracles(c),
        "worker_time": worker_time(c),
        "case_sample": s.sample.to_json(),  # NOTE [case sample]
        "triage": triage_stats(c),
        "shrink": shrink_stats(c),
        "feature_counts": {t: s.feature_counts.get(t, 0) for t in ALL_FEATURES},
        "transform_counts": {t: s.transform_counts.get(t, 0) for t in TRANSFORMS},
        "buckets": [
            bucket_row(b, c.config.out, c.book.stacks.get(b.signature.id, {}))  # stacks: "oracle: stack" -> hits
            for b in c.buckets.values()
        ],
    }
