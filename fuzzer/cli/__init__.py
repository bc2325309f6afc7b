"""Command line: ``affuzz run``, ``shrink``, ``render``, ``corpus``, ``replay`` and ``bisect``. Only wiring lives here; ``main(argv) -> int``."""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .. import __version__
from ..codegen.render import SCRIPT_STYLES
from ..ir.errors import AffuzzError
from ..ir.oracles import MAIN, ORACLES
from ..triage.shrink import DEFAULT_BUDGET

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(AffuzzError):
    """Bad input from the user: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds, or a number with s, m or h (e.g. 90, 10m, 8h)"
        )
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a positive integer")
    return n


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: must be a non-negative integer")
    return n


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be an integer") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="affuzz",
        description="Differential consistency fuzzer for torch.func transforms vs plain autograd on custom autograd.Functions.",
    )
    p.add_argument("--version", action="version", version=f"affuzz {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run",
        help="run a fuzzing campaign",
        description="Generate random autograd.Functions and transform stacks, run each in functorch mode, in "
        "create_graph mode and under the metamorphic oracles that apply, and write every verified disagreement "
        "under OUT/findings/.",
    )
    limit = run.add_mutually_exclusive_group()
    limit.add_argument(
        "--duration", type=_duration, metavar="SECONDS", help="stop after this long (90, 10m, 8h; default 60 s)"
    )
    limit.add_argument("--max-cases", type=_positive_int, metavar="N", help="stop after N cases")
    run.add_argument(
        "--timeout",
        type=_duration,
        default=60.0,
        metavar="SECONDS",
        help="per-case limit for each side; a side that runs longer is a 'hang' finding (default 60 s)",
    )
    run.add_argument(
        "--seed",
        type=_seed,
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
        type=_count,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs one shrink may spend on a new finding; 0 publishes findings unshrunk (default {DEFAULT_BUDGET})",
    )
    run.add_argument(
        "--shrink-grace",
        type=_duration,
        default=60.0,
        metavar="SECONDS",
        help="at the end, wait this long for queued shrinks; the rest are published unshrunk (default 60 s)",
    )
    run.add_argument(
        "--workers",
        type=_count,
        metavar="N",
        help="worker processes (or Ray actors); 0 runs everything in this process, repeatable case for case "
        "(default: one per core, or per CPU of the Ray cluster)",
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
        "--family-limit",
        type=_count,
        default=3,
        metavar="N",
        help="shrink and publish at most N transform stacks of one bug family (verdict, oracle, error, essential "
        "features); later stacks count as hits of the first; 0: every stack (default 3)",
    )
    run.add_argument(
        "--shrink-share",
        type=_share,
        default=0.25,
        metavar="F",
        help="shrink jobs take at most this fraction of the worker time while fuzzing (default 0.25; with "
        "--workers 0 each finding is shrunk right away)",
    )
    run.add_argument(
        "--recycle-after",
        type=_positive_int,
        default=20_000,
        metavar="N",
        help="replace a worker after it ran N cases (default 20000)",
    )
    run.add_argument(
        "--max-rss",
        type=_positive_int,
        default=4096,
        metavar="MB",
        help="replace a worker once its resident memory passes MB MiB (default 4096)",
    )
    render = sub.add_parser(
        "render",
        help="print the standalone repro script of a case",
        description="Print the repro script for CASE.json.",
    )
    render.add_argument("case", type=Path, metavar="CASE.json")
    render.add_argument("--oracle", choices=ORACLES, default=MAIN, help=f"which two sides to compare (default {MAIN})")
    render.add_argument(
        "--style",
        choices=SCRIPT_STYLES,
        default="repro",
        help="repro: the published repro.py; pytest: test_repro.py; full: the script the fuzzer runs (default repro)",
    )
    shrink = sub.add_parser(
        "shrink",
        help="shrink a case that shows a disagreement into a minimal repro",
        description="Shrink CASE.json (a finding's case.json, a corpus case or a hand-written one) under this torch, "
        "keeping its verdict, error types and essential features, and write case.json, repro.py and test_repro.py "
        "to OUT.",
    )
    shrink.add_argument("case", type=Path, metavar="CASE.json")
    shrink.add_argument("--oracle", choices=ORACLES, default=MAIN, help=f"which two sides to compare (default {MAIN})")
    shrink.add_argument(
        "--budget",
        type=_positive_int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"case runs to spend (default {DEFAULT_BUDGET})",
    )
    shrink.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: print the repro only)")

    corpus = sub.add_parser(
        "corpus",
        help="manage the checked-in corpus of known disagreements",
        description="The corpus (default: corpus/) holds one directory per bucket: case.json, repro.py, meta.json.",
    )
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True, parser_class=_Parser)
    add = corpus_sub.add_parser(
        "add",
        help="promote findings into the corpus",
        description="Add OUT/findings/<id> directories (or whole OUT/findings directories) to the corpus, deduplicated "
        "by signature; of two repros of one signature the smaller is kept.",
    )
    add.add_argument("findings", type=Path, nargs="+", metavar="FINDING_DIR")
    add.add_argument("--corpus", type=Path, default=Path("corpus"), metavar="DIR", help="default: corpus/")
    ls = corpus_sub.add_parser("list", help="one line per corpus entry", description="List the corpus entries.")
    ls.add_argument("paths", type=Path, nargs="*", metavar="PATH", help="default: corpus/")

    replay = sub.add_parser(
        "replay",
        help="replay corpus cases under one or more torch versions",
        description="Replay every case under PATH (corpus directories, entries or case.json files; default corpus/) "
        "under this interpreter's torch and each --python, and show case x torch version -> verdict, with what "
        "changed since the entry's recorded status. Exit status: 0 as recorded, 1 when a case regressed or its "
        "verdict changed, 2 when an entry could not be read (the others still replay).",
    )
    replay.add_argument("paths", type=Path, nargs="*", metavar="PATH")
    replay.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PY",
        help="another interpreter to replay under, e.g. .venvs/torch-2.0.1/bin/python (repeatable); with --python "
        "given, this interpreter replays too only if it is listed",
    )
    replay.add_argument("--json", type=Path, metavar="FILE", help="write one record per case x interpreter")
    replay.add_argument(
        "--update", action="store_true", help="record new verdicts and statuses (fixed-in X) in the corpus"
    )
    replay.add_argument("--timeout", type=_duration, default=60.0, metavar="SECONDS", help="per case (default 60 s)")

    bisect = sub.add_parser(
        "bisect",
        help="find the first torch release where a case's verdict changed",
        description="Binary-search torch releases for the first one whose verdict for CASE differs from the oldest's. "
        "Each probed release gets .venvs/torch-X.Y.Z (created once, as by make torch-venv; several GB each).",
    )
    bisect.add_argument("case", type=Path, metavar="CASE", help="a corpus entry directory or a case.json")
    where = bisect.add_mutually_exclusive_group(required=True)
    where.add_argument("--versions", metavar="V1,V2,...", help="the releases to search, oldest first")
    where.add_argument("--range", metavar="LOW..HIGH", help="every final release from LOW to HIGH (from pip's index)")
    bisect.add_argument("--oracle", choices=ORACLES, help="default: the entry's oracle, else " + MAIN)
    bisect.add_argument("--timeout", type=_duration, default=60.0, metavar="SECONDS", help="per case (default 60 s)")
    bisect.add_argument("--update", action="store_true", help="record the result as the entry's status (fixed-in X)")
    return p


def _load_case(path: Path):  # noqa: ANN202 (fuzzer.ir.case is imported lazily)
    from ..ir.case import CaseError
    from ..ir.serde import load

    try:
        return load(str(path))
    except CaseError as e:
        raise UsageError(f"{e}; fix the file or regenerate it with affuzz") from None


def _cmd_render(args: argparse.Namespace) -> int:
    from ..codegen.render import render

    sys.stdout.write(render(_load_case(args.case), oracle=args.oracle, style=args.style))
    return EXIT_OK


def _cmd_shrink(args: argparse.Namespace) -> int:
    import torch

    from ..codegen.render import render
    from ..ir.files import atomic_write_text
    from ..ir.serde import dumps
    from ..publish.findings import repro_lines
    from ..triage.shrink import Shrinker, case_runner, goal_of

    case = _load_case(args.case)
    run = case_runner(args.oracle)
    goal = goal_of(case, args.oracle, run)
    if goal.verdict in ("consistent", "expected"):
        raise UsageError(
            f"affuzz shrink: {args.case}: {goal.verdict} under "
            f"{args.oracle} on torch {torch.__version__}, so there is nothing to shrink; try another --oracle"
        )
    err = sys.stderr

    def progress(stage: str, runs: int, best: object) -> None:
        if err.isatty():
            err.write(f"\rshrinking: {stage}, run {runs}/{args.budget}   ")

    result = Shrinker(goal, run, budget=args.budget, progress=progress).shrink(case)
    if err.isatty():
        err.write("\n")
    header = [
        f"affuzz shrink of {args.case.name} on torch {torch.__version__}: {goal.verdict} ({args.oracle}),"
        f" essential features: {'+'.join(goal.features) or '-'}",
        f"shrunk in {result.runs} runs ({result.seconds:.1f} s): {' '.join(result.steps) or 'no smaller case'}",
    ]
    before, after = repro_lines(case, args.oracle), repro_lines(result.case, args.oracle)
    if args.out is None:
        sys.stdout.write(render(result.case, header=header, oracle=args.oracle, style="repro"))
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "case.json", dumps(result.case))
        atomic_write_text(args.out / "repro.py", render(result.case, header=header, oracle=args.oracle, style="repro"))
        atomic_write_text(
            args.out / "test_repro.py", render(result.case, header=header, oracle=args.oracle, style="pytest")
        )
        print(
            f"{goal.verdict}: repro {before} -> {after} lines in {result.runs} runs ({result.seconds:.1f} s); wrote {args.out}/"
        )
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..campaign.driver import Campaign, CampaignBusy, CampaignConfig
    from ..campaign.state import StateError, load_state
    from ..judge.compare import RegistryError
    from ..publish.report import LiveView, summary_table, write_report

    resume = None
    if args.resume is not None:
        if args.out is not None or args.seed is not None:
            raise UsageError("affuzz run: --resume OUT continues that campaign; it takes no --out or --seed")
        try:
            resume = load_state(args.resume)
        except StateError as e:
            raise UsageError(f"affuzz run: {e}") from None
        config = CampaignConfig.from_json(args.resume, resume["config"])
        if args.duration is not None:
            config.duration, config.max_cases = args.duration, None
        elif args.max_cases is not None:
            config.duration, config.max_cases = None, args.max_cases
        if args.workers is not None:
            config.workers = args.workers
        if args.ray is not None:
            config.ray = args.ray
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
        duration = args.duration if args.duration is not None or args.max_cases is not None else 60.0
        config = CampaignConfig(
            out=out,
            seed=seed,
            duration=duration,
            max_cases=args.max_cases,
            case_timeout=args.timeout,
            shrink_budget=args.shrink_budget,
            shrink_grace=args.shrink_grace,
            strategy_kwargs={},
            workers=args.workers if args.workers is not None else (os.cpu_count() or 1),
            ray=args.ray,
            steer=args.steer,
            recycle_cases=args.recycle_after,
            max_rss_mb=float(args.max_rss),
            family_limit=args.family_limit,
            shrink_share=args.shrink_share,
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
    try:
        campaign = Campaign(config, resume=resume)
    except RegistryError as e:
        raise UsageError(str(e)) from None
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
    try:
        with LiveView(console) as view:
            campaign.run(on_tick=lambda c: view.tick(c.live()))
    except CampaignBusy as e:
        raise UsageError(f"affuzz run: {e}") from None
    finally:
        if config.ray:
            import ray

            ray.shutdown()
    summary = campaign.summary()
    write_report(out, summary)
    console.print(summary_table(summary))
    verified = sum(b["status"] == "verified" for b in summary["buckets"])
    console.print(
        f"report: {out / 'report.md'}  summary: {out / 'summary.json'}  verified findings: {verified}"
        f"  (continue with: affuzz run --resume {out} --duration <total>)",
        highlight=False,
    )
    return EXIT_OK


def _cmd_corpus(args: argparse.Namespace) -> int:
    from ..history.corpus import add_findings, load_corpus

    if args.corpus_command == "add":
        missing = [str(p) for p in args.findings if not p.exists()]
        if missing:
            raise UsageError(f"affuzz corpus add: {missing[0]}: no such directory; pass OUT/findings/<id> directories")
        result = add_findings(args.corpus, args.findings)
        for e in result.errors:
            print(f"error: {e}", file=sys.stderr)
        print(
            f"{args.corpus}: added {len(result.added)}, replaced with a smaller repro {len(result.replaced)}, "
            f"already there {len(result.kept)}"
        )
        return EXIT_USAGE if result.errors else EXIT_OK
    entries, errors = load_corpus(args.paths or [Path("corpus")])
    for e in entries:
        m = e.meta
        print(
            f"{e.id}\t{m.get('status', '-')}\t{m.get('verdict', '-')}\t{m.get('signature', '-')}\t{m.get('upstream') or ''}"
        )
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return EXIT_USAGE if errors else EXIT_OK


def _cmd_replay(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..history.corpus import load_corpus
    from ..history.replay import INFORMATIONAL, open_interpreter, replay, update_corpus, write_json
    from ..publish.report import replay_table

    entries, errors = load_corpus(args.paths or [Path("corpus")])
    for e in errors:
        print(f"error: {e}", file=sys.stderr)  # one line each, never wrapped
    console = Console(width=None if sys.stdout.isatty() else 200)
    interpreters = []
    try:
        for py in args.python or [sys.executable]:
            interpreters.append(open_interpreter(py))
    except (OSError, TimeoutError, Exception) as e:  # noqa: BLE001 (any failure to start is one line)
        for i in interpreters:
            i.close()
        raise UsageError(f"affuzz replay: cannot start a replay worker with --python {py}: {e}") from None
    try:
        with console.status("replaying") as status:

            def progress(r: Any) -> None:
                status.update(f"replaying: torch {r.torch_version}, {r.entry.id}: {r.verdict}")

            results = replay(entries, interpreters, timeout=args.timeout, on_result=progress)
    finally:
        for i in interpreters:
            i.close()
    versions = list(dict.fromkeys(i.torch_version for i in interpreters))
    console.print(replay_table(results, versions))
    changed = [r for r in results if r.change and r.change not in INFORMATIONAL]
    noted = [r for r in results if r.change]
    console.print(
        f"{len(entries)} cases x {len(versions)} torch versions; "
        + (
            ", ".join(f"{c} {sum(r.change == c for r in noted)}" for c in dict.fromkeys(r.change for r in noted))
            or "all as recorded"
        )
        + (f"; {len(errors)} {'entry' if len(errors) == 1 else 'entries'} could not be read" if errors else ""),
        highlight=False,
    )
    if args.json:
        write_json(args.json, results, errors)
    if args.update:
        for line in update_corpus(results):
            console.print(f"recorded: {line}", highlight=False)
    if errors:
        return EXIT_USAGE
    if args.update:
        return EXIT_FINDINGS if any(r.change in ("regressed", "crash", "hang") for r in results) else EXIT_OK
    return EXIT_FINDINGS if changed else EXIT_OK


def _cmd_bisect(args: argparse.Namespace) -> int:
    from ..history.corpus import CorpusError, load_entry, update_meta
    from ..history.torch_bisect import BisectError, bisect, evaluator, released_versions

    try:
        entry = load_entry(args.case)
    except CorpusError as e:
        raise UsageError(f"{e}; fix the file or pass another case") from None
    try:
        if args.versions:
            versions = [v.strip() for v in args.versions.split(",") if v.strip()]
            bad = [v for v in versions if not re.fullmatch(r"\d+\.\d+\.\d+", v)]
            if bad:
                raise UsageError(f"affuzz bisect: --versions: {bad[0]!r} is not a release like 2.1.0")
        else:
            low, sep, high = args.range.partition("..")
            if not sep or not re.fullmatch(r"\d+\.\d+\.\d+", low) or not re.fullmatch(r"\d+\.\d+\.\d+", high):
                raise UsageError(f"affuzz bisect: --range {args.range!r}: use LOW..HIGH, e.g. 2.0.1..2.13.0")
            versions = released_versions(low, high)
        if any(v.startswith(("0.", "1.")) for v in versions):
            raise UsageError("affuzz bisect: affuzz supports torch >= 2.0")
        oracle = args.oracle or entry.oracle
        print(f"bisecting {entry.id} ({oracle}) over {len(versions)} releases: {', '.join(versions)}", flush=True)
        result = bisect(
            versions, evaluator(entry.case, oracle, timeout=args.timeout), log=lambda s: print(s, flush=True)
        )
    except BisectError as e:
        raise UsageError(f"affuzz bisect: {e}") from None
    print(result.summary())
    if args.update and entry.meta and result.first_changed is not None:
        if result.verdicts[result.first_changed] == "consistent":
            update_meta(entry, status=f"fixed-in {result.first_changed}")
            print(f"recorded: {entry.id}: status fixed-in {result.first_changed}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        commands = {
            "run": _cmd_run,
            "render": _cmd_render,
            "shrink": _cmd_shrink,
            "corpus": _cmd_corpus,
            "replay": _cmd_replay,
            "bisect": _cmd_bisect,
        }
        return commands[args.command](args)
    except UsageError as e:
        print(
            f"error: {e}" if not str(e).startswith("affuzz") else str(e).replace(": ", ": error: ", 1), file=sys.stderr
        )
        return EXIT_USAGE
