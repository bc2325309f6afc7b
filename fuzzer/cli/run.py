"""``affuzz run``: a fuzzing campaign, new (``--out``) or continued (``--resume``)."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from .. import __version__
from ..gen.compiled import DEFAULT_SHARE
from ..gen.coverage import STEER_BY
from ..gen.modes import DEFAULT_SHARE as CHECKPOINT_SHARE
from ..gen.modes import DEFAULT_SHARE as CUSTOM_OP_SHARE
from ..gen.modes import MODE_NAMES, MODES, UnknownMode, parse_modes
from ..gen.swarm import SLICE
from ..triage.shrink import DEFAULT_BUDGET
from .common import EXIT_OK, UsageError, count, duration, fraction, positive_int, seed_int, share


def modes_arg(text: str) -> tuple[str, ...]:
    """``--modes`` (NOTE [modes] in :mod:`fuzzer.gen.modes`): an unknown name is a usage error."""
    try:
        return parse_modes(text)
    except UnknownMode as e:
        raise argparse.ArgumentTypeError(str(e)) from None


#: Seconds a campaign waits at its end for queued shrinks, unless ``--shrink-grace`` says otherwise.
DEFAULT_GRACE = 60.0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run a fuzzing campaign",
        description="Generate random autograd.Functions and transform stacks, run each in functorch mode, in "
        "create_graph mode and under the metamorphic oracles that apply, and write every verified disagreement "
        "under OUT/findings/.",
    )
    limit = run.add_mutually_exclusive_group()
    limit.add_argument(
        "--duration", type=duration, metavar="SECONDS", help="stop after this long (90, 10m, 8h; default 60 s)"
    )
    limit.add_argument("--max-cases", type=positive_int, metavar="N", help="stop after N cases")
    run.add_argument(
        "--timeout",
        type=duration,
        default=60.0,
        metavar="SECONDS",
        help="per-case limit for each side; a side that runs longer is a 'hang' finding (default 60 s)",
    )
    run.add_argument(
        "--seed",
        type=seed_int,
        help="campaign seed; the same seed repeats the same cases in each worker slot (default: random, printed)",
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="output directory, must be new or empty (default: reports/run-<time>-seed<N>)",
    )
    run.add_argument(
        "--shrink-budget",
        type=count,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs one shrink may spend on a new finding; 0 publishes findings unshrunk (default {DEFAULT_BUDGET})",
    )
    run.add_argument(
        "--shrink-grace",
        type=duration,
        metavar="SECONDS",
        help=f"at the end, wait this long for queued shrinks; the rest are published unshrunk (default {DEFAULT_GRACE:g} s; with "
        "--resume, the campaign's own unless given)",
    )
    run.add_argument(
        "--workers",
        type=count,
        metavar="N",
        help="worker processes (or Ray actors); 0 runs everything in this process, repeatable case for case with "
        "--steer-by cases (default: one per core, or per CPU of the Ray cluster)",
    )
    run.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the workers as Ray actors on the cluster at ADDRESS (HOST:PORT, or 'auto'); needs the ray extra",
    )
    run.add_argument(
        "--resume",
        type=Path,
        metavar="OUT",
        help="continue the campaign in OUT (same seed, buckets, counters, coverage) up to its --duration, or to a "
        "new total given with --duration",
    )
    run.add_argument(
        "--no-steer",
        dest="steer",
        action="store_false",
        help="draw cases as the strategies give them, without steering toward the least-covered feature x "
        "transform cells",
    )
    run.add_argument(
        "--steer-by",
        choices=STEER_BY,
        default="time",
        help="weigh the feature x transform cells in core seconds, so that expensive transforms (linearize) get "
        "a fair share of the time rather than of the cases (default), or in cases, which makes two campaigns of "
        "one seed run the same cases",
    )
    run.add_argument(
        "--no-swarm",
        dest="swarm",
        action="store_false",
        help="draw every case from the whole vocabulary of features and transforms, instead of swarm "
        f"configurations (each slice of {SLICE} positions of a worker's stream enables a random three quarters of them)",
    )
    run.add_argument(
        "--family-limit",
        type=count,
        default=3,
        metavar="N",
        help="shrink and publish at most N transform stacks of one bug family (verdict, oracle, error, essential "
        "features); later stacks count as hits of the first; 0: every stack (default 3)",
    )
    run.add_argument(
        "--shrink-share",
        type=share,
        default=0.25,
        metavar="F",
        help="shrink jobs take at most this fraction of the worker time while fuzzing (default 0.25; with "
        "--workers 0 each finding is shrunk right away)",
    )
    run.add_argument(
        "--triage-share",
        type=share,
        default=0.2,
        metavar="F",
        help="triage of new findings (ablating each feature) takes at most this fraction of the worker time; a "
        "finding past it waits and is triaged later, in the grace at the latest (default 0.2; with --workers 0 "
        "each finding is triaged right away)",
    )
    run.add_argument(
        "--compile-share",
        type=fraction,
        default=DEFAULT_SHARE,
        metavar="F",
        help="cases that also run under torch.compile (the compiled_vs_eager oracle; each a Dynamo compile, 50-200 "
        f"times a torch.func case) take at most this fraction of the fuzzing time, everything they cost counted "
        f"(default {DEFAULT_SHARE}); 0 turns the oracle off; with --steer-by cases, a fixed share of the positions "
        "instead",
    )
    run.add_argument(
        "--modes",
        type=modes_arg,
        default=MODE_NAMES,
        metavar="M,M",
        help="the modes switched on, comma-separated: "
        + "; ".join(f"{m.name} ({m.doc}{', its share: ' + m.share_option if m.share_option else ''})" for m in MODES)
        + " (default: all; 'none': the torch.func oracles alone); each mode's oracle is not_applicable where this "
        "torch lacks its API",
    )
    run.add_argument(
        "--checkpoint-share",
        type=fraction,
        default=CHECKPOINT_SHARE,
        metavar="F",
        help="cases that also run with f under activation checkpointing or saved-tensor hooks (the "
        f"checkpoint_vs_plain oracle) take at most this fraction of the fuzzing time (default {CHECKPOINT_SHARE}); "
        "with --steer-by cases, a fixed share of the positions instead",
    )
    run.add_argument(
        "--custom-op-share",
        type=fraction,
        default=CUSTOM_OP_SHARE,
        metavar="F",
        help="cases whose Function is written as a torch.library.custom_op instead (every oracle over the op, "
        "and custom_op_vs_function against its autograd.Function twin; only Functions a custom op can say) take "
        f"at most this fraction of the fuzzing time (default {CUSTOM_OP_SHARE}); with --steer-by cases, a fixed "
        "share of the positions instead",
    )
    run.add_argument(
        "--recycle-after",
        type=positive_int,
        default=20_000,
        metavar="N",
        help="replace a worker after it ran N cases (default 20000)",
    )
    run.add_argument(
        "--max-rss",
        type=positive_int,
        default=4096,
        metavar="MB",
        help="replace a worker once its resident memory passes MB MiB (default 4096)",
    )


def command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..campaign.config import CampaignConfig
    from ..campaign.driver import Campaign
    from ..campaign.state import load_state
    from ..publish.drafts import write_drafts
    from ..publish.env_probe import EnvProbe
    from ..publish.html import write_html
    from ..publish.report import LiveView, summary_table, write_report

    resume = None
    if args.resume is not None:
        if args.out is not None or args.seed is not None:
            raise UsageError("affuzz run: --resume OUT continues that campaign; it takes no --out or --seed")
        resume = load_state(args.resume)
        config = CampaignConfig.from_json(args.resume, resume["config"])
        if args.duration is not None:
            config.duration, config.max_cases = args.duration, None
        elif args.max_cases is not None:
            config.duration, config.max_cases = None, args.max_cases
        if args.workers is not None:
            config.workers = args.workers
        if args.ray is not None:
            config.ray = args.ray
        if args.shrink_grace is not None:
            config.shrink_grace = args.shrink_grace
        seed, out = config.seed, args.resume
    else:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
        out = args.out or Path("reports") / f"run-{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}"
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(
                f"affuzz run: --out {out} already exists and is not an empty directory; choose a new one, remove it, "
                "or continue it with --resume"
            )
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"affuzz run: cannot create --out {out} ({e.strerror})") from None
        config = CampaignConfig(
            out=out,
            seed=seed,
            duration=args.duration if args.duration is not None or args.max_cases is not None else 60.0,
            max_cases=args.max_cases,
            case_timeout=args.timeout,
            shrink_budget=args.shrink_budget,
            shrink_grace=args.shrink_grace if args.shrink_grace is not None else DEFAULT_GRACE,
            strategy_kwargs={},
            workers=args.workers if args.workers is not None else (os.cpu_count() or 1),
            ray=args.ray,
            steer=args.steer,
            steer_by=args.steer_by,
            swarm=args.swarm,
            recycle_cases=args.recycle_after,
            max_rss_mb=float(args.max_rss),
            family_limit=args.family_limit,
            shrink_share=args.shrink_share,
            triage_share=args.triage_share,
            compile_share=args.compile_share,
            modes=args.modes,
            checkpoint_share=args.checkpoint_share,
            custom_op_share=args.custom_op_share,
        )
    if config.ray:
        try:
            from ..campaign.transport import ray_connect

            cpus = ray_connect(config.ray)
        except ImportError:
            raise UsageError("affuzz run: --ray needs Ray: pip install -e '.[ray]'") from None
        except Exception as e:  # noqa: BLE001 (any failure to connect is one line)
            raise UsageError(f"affuzz run: cannot connect to the Ray cluster at {config.ray!r}: {e}") from None
        if args.workers is None and resume is None:
            config.workers = cpus
        config.workers = max(1, config.workers)
    console = Console(width=None if sys.stdout.isatty() else 160)
    campaign = Campaign(config, resume=resume)
    if resume is not None and not campaign.has_work_left():
        raise UsageError(
            f"affuzz run: {out} already ran its {config.duration or config.max_cases}"
            f"{' s' if config.duration else ' cases'}; give a larger total with --duration (e.g. --duration 16h)"
        )
    console.print(
        f"affuzz {__version__}: {'resuming ' if resume else ''}seed {seed}, torch {campaign.torch_version}, "
        f"{len(campaign.slots)} {campaign.transport} worker{'s' if len(campaign.slots) != 1 else ''}, writing to {out}",
        highlight=False,
    )
    env = EnvProbe(config.verify_python)  # the drafts' Versions section, collected beside the campaign
    try:
        with LiveView(console) as view:
            campaign.run(on_tick=lambda c: view.tick(c.live()))
    except BaseException:
        env.close()
        raise
    finally:
        if config.ray:
            import ray

            ray.shutdown()
    summary = campaign.summary()
    write_report(out, summary)
    html = write_html(out)  # after summary.json: the report of a finished run
    drafts = write_drafts(out, python=config.verify_python, env=env)
    console.print(summary_table(summary))
    verified = sum(b["status"] == "verified" for b in summary["buckets"])
    console.print(
        f"report: {html}  summary: {out / 'summary.json'}  verified findings: {verified}"
        f"  issue drafts: {len(drafts)} in {out / 'issues'}"
        f"  (continue with: affuzz run --resume {out} --duration <total>)",
        highlight=False,
    )
    return EXIT_OK
