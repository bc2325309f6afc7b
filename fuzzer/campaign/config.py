"""A campaign's configuration and counters: what ``affuzz run`` was asked for (:class:`CampaignConfig`,
saved in ``state.json`` for ``--resume``) and what it has counted so far (:class:`Stats`)."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ir.case import Compile
from ..ir.oracles import COMPILED, MAIN, mode_key
from ..triage.shrink import DEFAULT_BUDGET
from .protocol import CaseReport, WorkerInit


@dataclass
class CampaignConfig:
    out: Path
    seed: int
    duration: float | None = 60.0  # total seconds (a resumed campaign counts the time before, too)
    max_cases: int | None = None
    verify_python: str = sys.executable
    case_timeout: float | None = 60.0  # seconds per case and oracle; over it the case is a hang finding
    shrink_budget: int = DEFAULT_BUDGET  # case runs one shrink may spend (NOTE [shrinking]); 0: no shrinking
    shrink_grace: float | None = None  # seconds to wait for queued shrinks at the end (None: all of them)
    strategy_kwargs: dict[str, Any] = field(default_factory=dict)  # strategies.cases(**strategy_kwargs)
    workers: int = 0  # 0: everything in this process; N: N worker processes (or Ray actors)
    ray: str | None = None  # a Ray cluster address ("auto", "HOST:PORT"): workers are Ray actors
    steer: bool = True  # NOTE [steering]
    steer_by: str = "time"  # NOTE [cost-aware steering]: cells weighed in core seconds, or "cases"
    swarm: bool = True  # NOTE [swarm]: each slice of a slot's stream draws from its own configuration
    recycle_cases: int | None = 20_000  # a worker is replaced after this many cases ...
    max_rss_mb: float | None = 4096.0  # ... or once it is larger than this
    slice_seconds: float = 1.0  # the length of one fuzz command (NOTE [campaign driver])
    stats_interval: float = 5.0  # seconds between stats.json rewrites (and plain status lines)
    rss_interval: float = 60.0  # seconds between samples of the memory history (stats.json, summary)
    command: str = "affuzz run"

    hang_limit: float | None = None  # silence before a worker is killed as hung (default 2 x timeout + 30 s)
    family_limit: int = 3  # NOTE [bucket families]: stacks shrunk per family; 0: every one
    shrink_share: float = 0.25  # NOTE [campaign driver]: most of the worker time shrink jobs may take
    triage_share: float = 0.2  # NOTE [triage share]: most of the worker time triage of new findings may take
    # NOTE [compile share]: most of the case time compiled cases may take (affuzz run: DEFAULT_SHARE)
    compile_share: float = 0.0
    modes: tuple[str, ...] = ("compiled",)  # NOTE [modes]: the modes switched on (affuzz run: all)
    checkpoint_share: float = 0.0  # NOTE [modes]: most of the case time checkpointed cases may take
    custom_op_share: float = 0.0  # NOTE [modes]: most of the case time custom-op cases may take

    def worker_init(
        self, slot: int, *, coverage: dict[str, Any] | None, database: str | None, campaign_seconds: float
    ) -> WorkerInit:
        """What a worker of slot ``slot`` starts with: this configuration's part of it, and the campaign's
        steering coverage (None without steering), example database and elapsed seconds so far."""
        return WorkerInit(
            slot=slot,
            seed=self.seed,
            strategy_kwargs=self.strategy_kwargs,
            case_timeout=self.case_timeout,
            coverage=coverage,
            steer=self.steer,
            steer_by=self.steer_by,
            recycle_cases=self.recycle_cases,
            max_rss_mb=self.max_rss_mb,
            database=database,
            swarm=self.swarm,
            compile_share=self.compile_share if "compiled" in self.modes else 0.0,
            modes=self.modes,
            checkpoint_share=self.checkpoint_share,
            custom_op_share=self.custom_op_share if "custom_op" in self.modes else 0.0,
            campaign_seconds=campaign_seconds,
        )

    @property
    def silence_limit(self) -> float:
        """Seconds a worker may stay silent before it is killed and its case recorded as a hang."""
        if self.hang_limit is not None:
            return self.hang_limit
        return 2 * (self.case_timeout or 60.0) + 30.0

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "duration": self.duration,
            "max_cases": self.max_cases,
            "case_timeout": self.case_timeout,
            "shrink_budget": self.shrink_budget,
            "shrink_grace": self.shrink_grace,
            "strategy_kwargs": self.strategy_kwargs,
            "workers": self.workers,
            "ray": self.ray,
            "steer": self.steer,
            "steer_by": self.steer_by,
            "swarm": self.swarm,
            "recycle_cases": self.recycle_cases,
            "max_rss_mb": self.max_rss_mb,
            "hang_limit": self.hang_limit,
            "family_limit": self.family_limit,
            "shrink_share": self.shrink_share,
            "triage_share": self.triage_share,
            "compile_share": self.compile_share,
            "modes": list(self.modes),
            "checkpoint_share": self.checkpoint_share,
            "custom_op_share": self.custom_op_share,
            "command": self.command,
        }

    @classmethod
    def from_json(cls, out: Path, d: dict[str, Any]) -> CampaignConfig:
        # a campaign saved before NOTE [swarm] drew without it, one before NOTE [cost-aware steering] by
        # cases, one before NOTE [compile share] ran nothing compiled, one before NOTE [modes] ran compiled
        # cases (where its compile share said so) and no other mode
        d = {"swarm": False, "steer_by": "cases", "compile_share": 0.0, "modes": ["compiled"], **d}
        d["modes"] = tuple(d["modes"])
        return cls(out=out, **{k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k != "out"})


# NOTE [case sample]
# ``bench/scale_bench.py --from-run`` compares what a campaign's fuzz loop spent per case with the bare
# torch work of the same cases, which it regenerates: a stream position names a case
# (NOTE [worker streams] in fuzzer/gen/streams.py), but which positions a time-steered worker ran, and
# which of them ran compiled and how, only the run knows. So the driver keeps a uniform sample of the cases reported, compiled and not
# apart (reservoir sampling, Vitter's algorithm R, :data:`SAMPLE_SIZE` each: the same size after a
# minute as after a night), saved with the counters and written to ``summary.json`` as ``case_sample``.
SAMPLE_SIZE = 2000
SAMPLE_KINDS = ("torch_func", "compiled")


class CaseSample:
    """NOTE [case sample]: per kind, a uniform sample of the cases reported so far, each as ``[slot,
    position]`` (a compiled one also ``backend, fullgraph, placement``), and how many it was drawn from."""

    def __init__(self, seed: int = 0, size: int = SAMPLE_SIZE) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size!r}")
        self.size = size
        self.seen = dict.fromkeys(SAMPLE_KINDS, 0)
        self.cases: dict[str, list[list[Any]]] = {k: [] for k in SAMPLE_KINDS}
        self._rng = random.Random(f"{seed}/case-sample")

    def add(self, slot: int, k: int, compiled: Compile | None) -> None:
        kind = "torch_func" if compiled is None else "compiled"
        entry: list[Any] = [slot, k]
        if compiled is not None:
            entry += [compiled.backend, compiled.fullgraph, compiled.placement]
        self.seen[kind] += 1
        chosen = self.cases[kind]
        if len(chosen) < self.size:
            chosen.append(entry)
        else:
            j = self._rng.randrange(self.seen[kind])
            if j < self.size:
                chosen[j] = entry

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "seen": dict(self.seen), "cases": {k: list(v) for k, v in self.cases.items()}}

    @classmethod
    def from_json(cls, d: dict[str, Any], seed: int = 0) -> CaseSample:
        sample = cls(seed, int(d.get("size", SAMPLE_SIZE)))
        for kind in SAMPLE_KINDS:
            sample.seen[kind] = int(d.get("seen", {}).get(kind, 0))
            sample.cases[kind] = [list(e) for e in d.get("cases", {}).get(kind, [])]
        return sample


@dataclass
class Stats:
    cases: int = 0
    invalid: int = 0
    skipped: int = 0  # draws steering did not run (NOTE [steering])
    internal_errors: int = 0
    float32_noise: int = 0  # float32 disagreements that vanished in float64 (not findings)
    worker_restarts: int = 0  # workers that died or hung and were replaced
    worker_recycles: int = 0  # workers replaced after recycle_cases or max_rss_mb
    shrink_worker_crashes: int = 0  # workers that died in a shrink job
    untriaged: int = 0  # NOTE [triage share]: new findings whose triage waited for the share
    left_untriaged: int = 0  # ... and of them, those never triaged (the grace ended, or their triage killed a worker)
    metamorphic: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    feature_counts: Counter[str] = field(default_factory=Counter)  # cases exercising each feature tag
    transform_counts: Counter[str] = field(default_factory=Counter)  # cases with each transform in the stack
    verdicts: Counter[str] = field(default_factory=Counter)
    limitations: Counter[str] = field(default_factory=Counter)
    not_applicable: Counter[str] = field(default_factory=Counter)  # NOTE [valid comparisons]: reason -> count
    # worker time (NOTE [worker time]): generate, torch, case, triage, shrink; loop (the fuzz loop, triage
    # apart), loop_compiled (of it, the compiled cases'), compiled (what running them compiled cost),
    # triage_compiled (of triage, the compiled oracle's findings')
    seconds: Counter[str] = field(default_factory=Counter)
    oracle_cases: Counter[str] = field(default_factory=Counter)  # cases each oracle ran on
    oracle_seconds: Counter[str] = field(default_factory=Counter)  # seconds each oracle's sides ran
    compiled_limitations: Counter[str] = field(default_factory=Counter)  # NOTE [compiled mode]: expected, by limitation
    # NOTE [modes]: verdicts of a mode's oracle per configuration (mode_key: backend/placement[/compiled_autograd],
    # checkpoint:kind/placement)
    mode_verdicts: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    sample: CaseSample = field(default_factory=CaseSample)  # NOTE [case sample]
    elapsed_before: float = 0.0  # seconds run before a resume
    last_bucket_elapsed: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def count(self, r: CaseReport, slot: int = 0) -> None:
        """Count one case the worker of ``slot`` reported (its findings are the bucket book's)."""
        self.cases += 1
        self.sample.add(slot, r.k, r.compile)
        self.feature_counts.update(r.features)
        self.transform_counts.update(set(r.transforms))
        self.seconds["generate"] += r.generate_seconds
        self.seconds["torch"] += r.torch_seconds
        self.seconds["case"] += r.seconds
        self.seconds["triage"] += r.triage_seconds
        self.seconds["loop"] += r.loop_seconds  # NOTE [worker time]
        self.seconds["triage_compiled"] += r.compiled_triage_seconds
        if r.compile is not None:
            self.seconds["loop_compiled"] += r.loop_seconds
            self.seconds["compiled"] += r.compiled_seconds
        self.seconds["custom_op"] += r.custom_op_seconds  # NOTE [modes]
        self.float32_noise += r.float32_noise
        for oracle, seconds in r.oracle_seconds:
            self.oracle_cases[oracle] += 1
            self.oracle_seconds[oracle] += seconds
        for oracle, verdict, limitation in r.verdicts:
            if verdict == "not_applicable":
                self.not_applicable[limitation or "-"] += 1
            if oracle == MAIN:
                self.verdicts[verdict] += 1
                if limitation and verdict == "expected":
                    self.limitations[limitation] += 1
            else:
                self.metamorphic[oracle][verdict] += 1
                if oracle == COMPILED and limitation and verdict == "expected":
                    self.compiled_limitations[limitation] += 1
                key = mode_key(oracle, r.compile, r.checkpoint)
                if key:
                    self.mode_verdicts[key][verdict] += 1
        self.internal_errors += len(r.internal_errors)

    @property
    def rate(self) -> float:
        return self.cases / self.elapsed if self.elapsed > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "invalid": self.invalid,
            "skipped": self.skipped,
            "internal_errors": self.internal_errors,
            "float32_noise": self.float32_noise,
            "worker_restarts": self.worker_restarts,
            "worker_recycles": self.worker_recycles,
            "shrink_worker_crashes": self.shrink_worker_crashes,
            "untriaged": self.untriaged,
            "left_untriaged": self.left_untriaged,
            "metamorphic": {o: dict(c) for o, c in self.metamorphic.items()},
            "feature_counts": dict(self.feature_counts),
            "transform_counts": dict(self.transform_counts),
            "verdicts": dict(self.verdicts),
            "limitations": dict(self.limitations),
            "not_applicable": dict(self.not_applicable),
            "seconds": dict(self.seconds),
            "oracle_cases": dict(self.oracle_cases),
            "oracle_seconds": dict(self.oracle_seconds),
            "compiled_limitations": dict(self.compiled_limitations),
            "mode_verdicts": {k: dict(c) for k, c in self.mode_verdicts.items()},
            "case_sample": self.sample.to_json(),
            "elapsed": self.elapsed,
            "last_bucket_elapsed": self.last_bucket_elapsed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stats:
        s = cls()
        for name in (
            "cases",
            "invalid",
            "skipped",
            "internal_errors",
            "float32_noise",
            "worker_restarts",
            "worker_recycles",
            "shrink_worker_crashes",
            "untriaged",
            "left_untriaged",
        ):
            setattr(s, name, int(d.get(name, 0)))
        for o, c in d.get("metamorphic", {}).items():
            s.metamorphic[o].update(c)
        for k, c in d.get("mode_verdicts", {}).items():
            s.mode_verdicts[k].update(c)
        for name in (
            "feature_counts",
            "transform_counts",
            "verdicts",
            "limitations",
            "not_applicable",
            "seconds",
            "oracle_cases",
            "oracle_seconds",
            "compiled_limitations",
        ):
            getattr(s, name).update(d.get(name, {}))
        s.sample = CaseSample.from_json(d.get("case_sample", {}))
        s.elapsed_before = float(d.get("elapsed", 0.0))
        s.last_bucket_elapsed = float(d.get("last_bucket_elapsed", 0.0))
        return s
