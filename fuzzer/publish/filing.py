"""Filing issue drafts (:mod:`.drafts`) with the GitHub CLI, each bucket at most once per repository.

NOTE [filing]
``affuzz file OUT --repo OWNER/NAME`` is a dry run unless ``--yes``: it lists what it would file and what
it skips and why (not verified, known upstream, already in the ledger). With ``--yes`` it first checks
that ``gh`` is on PATH and logged in (else one line, exit 2, nothing filed), then, for each draft, asks the
repository for an issue whose title carries the draft's token ``[affuzz:<bucket id>]`` (open or closed)
and files only if there is none, with ``gh issue create --repo R --title T --body-file F`` (the draft
below its title line). Each created issue is recorded in the ledger ``OUT/filed.json`` right away
(``{schema_version, filed: [{bucket, repo, url, title, filed_at}]}``, written atomically), so a crash
midway loses nothing and a second run files nothing twice; the token search covers a ledger that was
lost. PyTorch's own tracker is used only when named exactly, ``--repo pytorch/pytorch``; near misses
(``pytorch/PyTorch``, ``pytorch/pytorch.git``, its URL) are refused.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ir.errors import AffuzzError
from ..ir.files import atomic_write_json, atomic_write_text
from .drafts import INDEX, ISSUES_DIR, LABELS_PREFIX, TOKEN, draft_plan, write_drafts
from .rundata import load_run
from .upstream import KnownIssue, known_issue

LEDGER = "filed.json"
LEDGER_SCHEMA_VERSION = 1
PYTORCH = "pytorch/pytorch"
REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?/[A-Za-z0-9._-]+")
BODIES = ".body"  # OUT/issues/.body/<id>.md: a draft below its title line, what --body-file gets
GH_TIMEOUT = 120.0  # seconds per gh call


class FilingError(AffuzzError):
    """Something stopped filing (a bad ledger or draft, a gh call that failed): one line, exit 2. What was
    filed before it is in the ledger."""


class GhUnavailable(FilingError):
    """No usable ``gh``: not on PATH, or not logged in. Nothing was filed."""


def repo_problem(repo: str) -> str | None:
    """Why ``repo`` cannot be filed to (one line), or None: OWNER/NAME, and PyTorch only as ``pytorch/pytorch``."""
    norm = re.sub(r"\s+", "", repo).lower()
    norm = re.sub(r"^(?:(?:https?|ssh|git)://)?(?:[^@/]+@)?(?:www\.)?github\.com[/:]", "", norm)
    norm = norm.strip("/").removesuffix(".git").strip("/")
    if repo != PYTORCH and norm == PYTORCH:
        return f"--repo {repo!r}: to file in PyTorch's tracker, name it exactly: --repo {PYTORCH}"
    if not REPO.fullmatch(repo) or repo.endswith(".git"):
        return f"--repo {repo!r}: not a GitHub repository as OWNER/NAME (e.g. --repo you/sandbox)"
    return None


# ---------------------------------------------------------------------------------------------- drafts


def drafts_stale(out: Path, known: tuple[KnownIssue, ...] | None = None) -> bool:
    """Whether ``OUT/issues/`` is missing, older than the run's files, or lacks a draft it should have."""
    index = out / ISSUES_DIR / INDEX
    if not index.exists():
        return True
    sources = [out / name for name in ("summary.json", "stats.json", "state.json")]
    sources += [p for p in (out / "findings").rglob("*") if p.is_file()] if (out / "findings").exists() else []
    newest = max((p.stat().st_mtime for p in sources if p.exists()), default=0.0)
    if newest > index.stat().st_mtime:
        return True
    to_draft, _ = draft_plan(load_run(out), known)
    return any(not (out / ISSUES_DIR / f"{b.id}.md").exists() for b in to_draft)


def ensure_drafts(out: Path, *, python: str | None = None, known: tuple[KnownIssue, ...] | None = None) -> bool:
    """Write the drafts when :func:`drafts_stale`; True when they were (re)written."""
    if not drafts_stale(out, known):
        return False
    write_drafts(out, python=python, known=known)
    return True


@dataclass(frozen=True)
class Draft:
    bucket: str
    path: Path
    title: str
    labels: tuple[str, ...]

    @property
    def token(self) -> str:
        return f"[affuzz:{self.bucket}]"

    def body(self) -> str:
        """The draft below its title line: what the issue's body is."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return "\n".join(lines[1:]).lstrip("\n") + "\n"


def read_draft(path: Path) -> Draft:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise FilingError(f"{path}: cannot read the draft ({e.strerror}); rebuild it (delete {path.parent})") from None
    first = text.splitlines()[0] if text else ""
    m = TOKEN.search(first)
    if not first.startswith("# ") or m is None:
        raise FilingError(f"{path}: its first line must be '# <title> [affuzz:<bucket id>]'; fix or delete the draft")
    labels: tuple[str, ...] = ()
    for line in text.splitlines():
        if line.startswith(LABELS_PREFIX):
            labels = tuple(re.findall(r"`([^`]+)`", line))
    return Draft(m.group(1), path, first.removeprefix("# ").strip(), labels)


# ---------------------------------------------------------------------------------------------- the ledger


def ledger_path(out: Path) -> Path:
    return out / LEDGER


def load_ledger(out: Path) -> list[dict[str, Any]]:
    """The ``filed`` records of ``OUT/filed.json`` ([] when there is none)."""
    path = ledger_path(out)
    if not path.exists():
        return []
    problem = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        data, problem = None, str(e)
    if problem is None:
        if not isinstance(data, dict) or not isinstance(data.get("filed"), list):
            problem = "not {schema_version, filed: [...]}"
        elif data.get("schema_version") != LEDGER_SCHEMA_VERSION:
            problem = f"unsupported schema_version {data.get('schema_version')!r} (this affuzz reads 1)"
        elif not all(isinstance(r, dict) and {"bucket", "repo", "url"} <= set(r) for r in data["filed"]):
            problem = "a record lacks bucket, repo or url"
    if problem is not None:
        raise FilingError(f"{path}: cannot be read ({problem}); it records what was filed: fix it, don't delete it")
    return list(data["filed"])


def record_filed(out: Path, record: dict[str, Any]) -> None:
    filed = [*load_ledger(out), record]
    atomic_write_json(ledger_path(out), {"schema_version": LEDGER_SCHEMA_VERSION, "filed": filed})


# ---------------------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Skip:
    bucket: str
    reason: str


@dataclass
class Plan:
    out: Path
    repo: str
    to_file: list[Draft] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


def plan(out: Path, repo: str, *, known: tuple[KnownIssue, ...] | None = None) -> Plan:
    """What ``affuzz file`` would file to ``repo`` and what it skips and why (from the drafts, the run and
    the ledger; the repository itself is asked only when filing)."""
    problem = repo_problem(repo)
    if problem:
        raise FilingError(problem)
    run = load_run(out)
    ledger = {r["bucket"]: r for r in load_ledger(out) if r.get("repo") == repo}
    result = Plan(out, repo)
    for b in run.buckets:
        if not b.verified:
            result.skipped.append(
                Skip(
                    b.id,
                    f"not verified ({b.summary.get('status', '?')}): only findings whose repro reproduced are filed",
                )
            )
            continue
        k = known_issue(b.summary, known)
        if k is not None:
            result.skipped.append(Skip(b.id, f"known upstream: #{k.number} {k.issue}"))
            continue
        if b.id in ledger:
            result.skipped.append(Skip(b.id, f"already filed in {repo}: {ledger[b.id]['url']} ({ledger_path(out)})"))
            continue
        path = out / ISSUES_DIR / f"{b.id}.md"
        if not path.exists():
            raise FilingError(
                f"{path}: no draft for verified bucket {b.id}; delete {path.parent} to rebuild the drafts"
            )
        result.to_file.append(read_draft(path))
    return result


# ---------------------------------------------------------------------------------------------- gh


class Gh:
    """The GitHub CLI, found on PATH (raises :class:`GhUnavailable` when it is not)."""

    def __init__(self, executable: str | None = None) -> None:
        exe = executable or shutil.which("gh")
        if exe is None:
            raise GhUnavailable(
                "gh (the GitHub CLI) is not on PATH; install it (https://cli.github.com) and run `gh auth login`; "
                "nothing was filed"
            )
        self.exe = exe

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}
        try:
            return subprocess.run(
                [self.exe, *args],
                capture_output=True,
                text=True,
                timeout=GH_TIMEOUT,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise FilingError(f"`gh {' '.join(args[:2])}` did not answer within {GH_TIMEOUT:.0f} s") from None
        except OSError as e:
            raise GhUnavailable(f"{self.exe} cannot be run ({e.strerror or e}); nothing was filed") from None

    @staticmethod
    def _said(proc: subprocess.CompletedProcess[str]) -> str:
        lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
        return lines[0] if lines else f"exit status {proc.returncode}"

    def check_auth(self) -> None:
        proc = self.run("auth", "status")
        if proc.returncode != 0:
            raise GhUnavailable(
                f"gh is not logged in to GitHub (`gh auth status`: {self._said(proc)}); run `gh auth login`; "
                "nothing was filed"
            )

    def existing(self, repo: str, token: str) -> str | None:
        """The URL of an issue of ``repo`` (open or closed) whose title carries ``token``, or None."""
        proc = self.run(
            "issue", "list", "--repo", repo, "--search", f'"{token}" in:title', "--state", "all", "--json", "url,title"
        )
        if proc.returncode != 0:
            raise FilingError(f"cannot search {repo} for {token} (`gh issue list`: {self._said(proc)})")
        try:
            issues = json.loads(proc.stdout or "[]")
        except ValueError:
            raise FilingError(f"`gh issue list` printed no JSON for {repo}: {proc.stdout[:200]!r}") from None
        for issue in issues if isinstance(issues, list) else []:
            if isinstance(issue, dict) and token in str(issue.get("title", "")):
                return str(issue.get("url", ""))
        return None

    def create(self, repo: str, title: str, body_file: Path, labels: tuple[str, ...] = ()) -> str:
        """File one issue; its URL."""
        args = ["issue", "create", "--repo", repo, "--title", title, "--body-file", str(body_file)]
        for label in labels:
            args += ["--label", label]
        proc = self.run(*args)
        if proc.returncode != 0:
            raise FilingError(f"`gh issue create` failed for {repo} ({title[-60:]!r}): {self._said(proc)}")
        urls = re.findall(r"https?://\S+", proc.stdout)
        if not urls:
            raise FilingError(f"`gh issue create` printed no issue URL for {repo}: {proc.stdout.strip()[:200]!r}")
        return urls[-1]


@dataclass(frozen=True)
class Filed:
    bucket: str
    repo: str
    url: str
    title: str
    filed_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "repo": self.repo,
            "url": self.url,
            "title": self.title,
            "filed_at": self.filed_at,
        }


def file_plan(
    p: Plan,
    gh: Gh,
    *,
    labels: bool = False,
    on_filed: Callable[[Filed], None] | None = None,
    on_skip: Callable[[Skip], None] | None = None,
) -> list[Filed]:
    """File every draft of ``p`` that ``p.repo`` does not have yet (NOTE [filing]): each is recorded in the
    ledger as soon as it exists, then ``on_filed`` is called. ``labels``: pass the drafts' suggested labels
    (the repository must have them, or gh refuses). Raises :class:`FilingError` on the first failure."""
    gh.check_auth()
    filed: list[Filed] = []
    for d in p.to_file:
        url = gh.existing(p.repo, d.token)
        if url is not None:
            skip = Skip(d.bucket, f"already in {p.repo}: {url} (its title carries {d.token})")
            p.skipped.append(skip)
            if on_skip:
                on_skip(skip)
            continue
        body = p.out / ISSUES_DIR / BODIES / f"{d.bucket}.md"
        atomic_write_text(body, d.body())
        url = gh.create(p.repo, d.title, body, d.labels if labels else ())
        f = Filed(
            d.bucket, p.repo, url, d.title, datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        )
        record_filed(p.out, f.to_json())
        filed.append(f)
        if on_filed:
            on_filed(f)
    return filed
