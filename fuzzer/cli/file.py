"""``affuzz file``: file a run's issue drafts with the GitHub CLI, each bucket once (NOTE [filing] in
:mod:`fuzzer.publish.filing`); a dry run unless ``--yes``."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_OK, UsageError

if TYPE_CHECKING:
    from ..publish.filing import Candidate, Draft, Filed, Skip

DESCRIPTION = """\
File the issue drafts of the affuzz run in OUT (OUT/issues/<bucket id>.md, written first when they are
missing or older than the run's findings) as GitHub issues, one per verified bucket, with the GitHub CLI.

Without --yes this is a dry run: it prints, per draft, the repository, title, labels and body file it
would file, the tracker search it would run, and what it skips and why (not verified, known upstream per
the known-issues table fuzzer/publish/known_issues.json, already filed per the ledger OUT/filed.json).
The dry run does not call gh, unless --search: then gh must be usable (as for --yes) and the dry run runs
the searches and lists what they find, still filing nothing.

With --yes: gh must be on PATH and logged in (`gh auth status`), else one line and exit 2, nothing filed.
For each draft it
  1. searches the repository for an issue (open or closed) whose title carries the draft's token
     [affuzz:<bucket id>] and skips the draft if there is one (whatever --force says);
  2. searches the repository's issues (`gh search issues`, open and closed) for the bug: an error finding
     by its error message (numbers, file paths and the raising frame left out), a value finding by its
     stack's transforms and essential features, and lists the candidates (number, state, title, url). A
     candidate whose title or body carries the finding's error message is the same error: the draft is
     skipped, unless --force;
  3. runs `gh issue create --repo OWNER/NAME --title TITLE --body-file OUT/issues/.body/<id>.md` (the draft
     below its title line) and records the issue, with its candidates, in OUT/filed.json at once, so an
     interrupted run loses nothing and a repeated one files nothing twice.
OUT/filed.json also records, per bucket, what the last --yes run skipped and why (with the candidates).
When the bucket is also a corpus entry (DIR/<bucket id>/meta.json), the entry's `upstream` is set to the
new issue's URL (an entry that already links an issue is left as is).

PyTorch's tracker is used only when named exactly, --repo pytorch/pytorch; near misses (pytorch/PyTorch,
pytorch/pytorch.git, https://github.com/pytorch/pytorch) are refused. Try a sandbox repository first.
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "file",
        help="file a run's issue drafts on GitHub (a dry run unless --yes)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", type=Path, metavar="OUT", help="the run's output directory (affuzz run --out)")
    p.add_argument(
        "--repo",
        required=True,
        metavar="OWNER/NAME",
        help="the GitHub repository to file in; pytorch/pytorch only when named exactly",
    )
    p.add_argument("--yes", action="store_true", help="really file (default: a dry run that prints what it would do)")
    p.add_argument(
        "--search",
        action="store_true",
        help="in a dry run, also run the tracker searches with gh and list the candidates (default: only print "
        "the searches; --yes always runs them)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --yes, file a draft even when the repository has an issue carrying the same error message "
        "(never one whose title carries the draft's [affuzz:<bucket id>] token, nor a known-upstream bucket)",
    )
    p.add_argument(
        "--labels",
        action="store_true",
        help="also pass each draft's suggested labels (module: functorch, module: autograd, module: forward ad, "
        "module: correctness (silent)) as --label; off by default because gh refuses labels the repository does "
        "not have (a fork or sandbox usually lacks PyTorch's)",
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        metavar="DIR",
        help="the corpus whose entries get the new issue's URL as `upstream` (default: corpus/ when filing in "
        "pytorch/pytorch, none otherwise, so a sandbox's URLs never land in the checked-in corpus)",
    )
    p.add_argument(
        "--python",
        metavar="PY",
        help="the interpreter whose `python -m torch.utils.collect_env` goes into a draft's Versions section when "
        "the drafts are written (default: this one; use the one that ran the campaign)",
    )


def command(args: argparse.Namespace) -> int:
    from ..publish.filing import (
        Gh,
        ensure_drafts,
        file_plan,
        plan,
        record_plan_skips,
        repo_problem,
        same_error_reason,
        search_command,
        search_plan,
        token_command,
    )

    problem = repo_problem(args.repo)
    if problem:
        raise UsageError(f"affuzz file: {problem}")
    if not args.out.is_dir():
        raise UsageError(f"affuzz file: {args.out}: no such directory; pass the OUT directory of an affuzz run")
    if ensure_drafts(args.out, python=args.python):
        print(f"drafts written: {args.out / 'issues'}/")
    todo = plan(args.out, args.repo)
    for s in todo.skipped:
        _print_skip(s)
    if not args.yes:
        for d in todo.to_file:
            print(f"would file {d.bucket}")
            print(f"    repo:   {todo.repo}")
            print(f"    title:  {d.title}")
            print(
                f"    labels: {', '.join(d.labels) or '-'}"
                + (" (passed with --labels)" if args.labels else " (suggested; passed to gh only with --labels)")
            )
            print(f"    body:   {d.path} (below its title line)")
            print(f"    search: gh {shlex.join(token_command(todo.repo, d.token))}")
            for query in d.queries:
                print(f"    search: gh {shlex.join(search_command(todo.repo, query))}")
        if args.search and todo.to_file:
            found = search_plan(todo, Gh(), on_candidates=_print_candidates)
            for bucket, (url, cands) in found.items():
                if url is not None:
                    print(f"    {bucket}: would skip: already in {todo.repo}: {url}")
                elif (reason := same_error_reason(todo.repo, cands)) is not None:
                    print(f"    {bucket}: would skip: {reason}")
        print(
            f"dry run: {len(todo.to_file)} to file in {todo.repo}, {len(todo.skipped)} skipped; nothing was filed "
            "(add --yes to file; it first searches the repository for each draft's [affuzz:<id>] token and for "
            "its error" + ("" if args.search else "; --search runs those searches now") + ")"
        )
        return EXIT_OK

    if not todo.to_file:
        record_plan_skips(todo)
        print(f"nothing to file in {todo.repo} ({len(todo.skipped)} skipped)")
        return EXIT_OK

    def filed(f: Filed) -> None:
        print(f"filed {f.bucket}: {f.url}", flush=True)
        corpus = (
            args.corpus if args.corpus is not None else (Path("corpus") if todo.repo == "pytorch/pytorch" else None)
        )
        if corpus is not None:
            _link_corpus(corpus, f.bucket, f.url)

    result = file_plan(
        todo,
        Gh(),
        labels=args.labels,
        force=args.force,
        on_filed=filed,
        on_skip=_print_skip,
        on_candidates=_print_candidates,
    )
    print(f"filed {len(result)} in {todo.repo}, skipped {len(todo.skipped)}; ledger: {args.out / 'filed.json'}")
    return EXIT_OK


def _print_skip(s: Skip) -> None:
    print(f"skip {s.bucket}: {s.reason}", flush=True)


def _print_candidates(d: Draft, found: list[Candidate]) -> None:
    print(f"candidates {d.bucket}: " + (f"{len(found)} found" if found else "none found"), flush=True)
    for c in found:
        print(f"    {c.line()}", flush=True)


def _link_corpus(corpus: Path, bucket: str, url: str) -> None:
    """Set the corpus entry's ``upstream`` to ``url`` when the bucket is in the corpus and links nothing yet."""
    from ..history.corpus import CorpusError, load_entry, update_meta

    entry_dir = corpus / bucket
    if not (entry_dir / "meta.json").exists():
        return
    try:
        entry = load_entry(entry_dir)
        linked = entry.meta.get("upstream")
        if linked and linked != url:
            print(f"    corpus: {entry_dir / 'meta.json'} already links {linked}; left as is")
            return
        update_meta(entry, upstream=url)
    except (CorpusError, OSError) as e:  # the issue exists and is in the ledger: say so, go on with the rest
        print(f"warning: {entry_dir}: upstream not recorded ({e})", file=sys.stderr)
        return
    print(f"    corpus: {entry_dir / 'meta.json'}: upstream = {url}")
