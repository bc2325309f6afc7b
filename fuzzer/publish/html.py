"""The morning report: ``OUT/report.html``, one self-contained page (inline CSS, inline SVG plots, no
external resources) built from :func:`fuzzer.publish.rundata.load_run`'s plain data, for a finished run
(``summary.json``) or one still running (``stats.json`` + ``state.json``).

It shows the run's numbers, plots of its history (:mod:`.plots`), and one section per bucket: verified
ones with their highlighted repro, both sides' output and the verification's, pending and unverified
ones marked as such without a repro. The template is ``templates/report.html.j2``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from ..ir.files import atomic_write_text
from . import plots
from .rundata import BucketData, RunData, load_run
from .upstream import KnownIssue, known_issue, related_issues

TEMPLATES = Path(__file__).with_name("templates")
STATUS_ORDER = {"verified": 0, "pending": 1, "unverified": 2}


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["duration"] = duration
    return env


def duration(seconds: float | None) -> str:
    """``seconds`` for people: ``8.2 s``, ``12 min 05 s``, ``3 h 02 min``."""
    if seconds is None:
        return "-"
    s = float(seconds)
    if s < 120:
        return f"{s:.1f} s"
    if s < 3 * 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def _when(iso: str | None) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM:SS UTC`` (as given when it does not parse)."""
    if not iso:
        return "unknown"
    try:
        t = dt.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def _state(run: RunData) -> tuple[str, str, str]:
    """(state word, how it ended or what it is doing, when the numbers were last updated)."""
    stop = next((e for e in reversed(run.events) if e.get("event") == "stop"), None)
    if run.finished:
        updated = stop.get("time") if stop else None
        if updated is None:
            mtime = (run.out / "summary.json").stat().st_mtime
            updated = dt.datetime.fromtimestamp(mtime, dt.timezone.utc).isoformat()
        return "finished", f"stopped: {stop.get('reason', '?')}" if stop else "", _when(updated)
    status = str(run.numbers.get("status", "running"))
    if status == "running":
        doing = run.numbers.get("shrinking") or ""
        return "running", f"still running; {doing}" if doing else "still running", _when(run.numbers.get("updated"))
    return status, "stopped, without a summary.json yet", _when(run.numbers.get("updated"))


def _summary(run: RunData) -> list[tuple[str, str]]:
    """The summary table's rows (label, value)."""
    n = run.numbers
    verified = sum(b.verified for b in run.buckets)
    cov = n.get("coverage") or {}
    rows = [
        ("seed", str(n.get("seed", "-"))),
        ("torch", str(n.get("torch_version", "-"))),
        ("cases", f"{n.get('cases', 0):,}" + (f" of {n['max_cases']:,}" if n.get("max_cases") else "")),
        ("elapsed", duration(n.get("elapsed_seconds"))),
        ("cases/s", f"{float(n.get('cases_per_second', 0.0)):.1f}"),
        ("workers", f"{n.get('workers', '-')} ({n.get('transport', '?')})"),
        ("buckets verified / total", f"{verified} / {len(run.buckets)}"),
        (
            "coverage",
            f"{cov.get('cells_covered', '-')}/{cov.get('cells_possible', '-')} cells, "
            f"{cov.get('skeletons', '-')} stacks",
        ),
        ("worker restarts", str(n.get("worker_restarts", 0))),
        ("internal errors", str(n.get("internal_errors", 0))),
    ]
    if n.get("python_version"):  # summary.json only
        rows.insert(2, ("python", str(n["python_version"])))
    if n.get("remaining_seconds") is not None:
        rows.insert(
            rows.index(("elapsed", duration(n.get("elapsed_seconds")))) + 1,
            ("time left", duration(n["remaining_seconds"])),
        )
    return rows


def _progress(run: RunData) -> list[list[float]]:
    """``progress_history``, closed with the run's current numbers (the history is sampled every few
    seconds, so its last row can be older than the totals)."""
    rows = [list(r) for r in run.numbers.get("progress_history") or []]
    n = run.numbers
    elapsed = n.get("elapsed_seconds")
    if rows and elapsed is not None and float(elapsed) > rows[-1][0]:
        verified = sum(b.verified for b in run.buckets)
        rows.append([float(elapsed), n.get("cases", rows[-1][1]), max(len(run.buckets), verified), verified])
    return rows


def _plots(run: RunData) -> list[dict[str, Any]]:
    """Every plot: title, caption, and its SVG (None: ``missing`` says why there is none)."""
    n = run.numbers
    progress = _progress(run)
    no_history = "no history (this run's numbers predate progress_history, or it has only just started)"
    cells = (n.get("coverage") or {}).get("cells")
    spec = [
        (
            "cases/s over time",
            "slope between samples of progress_history; dashed: the average",
            plots.rate_plot(progress),
            no_history,
        ),
        (
            "buckets over time",
            "all buckets and those whose repro reproduced in a fresh process",
            plots.buckets_plot(progress),
            no_history,
        ),
        (
            "shrink queue over time",
            "jobs waiting and running; dashed: shrink seconds spent so far",
            plots.queue_plot(n.get("queue_history") or []),
            "no history (no queue_history in this run's numbers)",
        ),
        (
            "coverage: feature x transform",
            "cases per cell; hatched pink: never covered",
            plots.coverage_plot(cells or []),
            "no coverage cells in this run's numbers",
        ),
        (
            "verdicts",
            "cases per verdict (red: findings)",
            plots.verdict_plot(n.get("verdicts") or {}),
            "no verdicts yet",
        ),
    ]
    return [
        {"title": t, "caption": c, "svg": Markup(svg) if svg else None, "missing": m, "wide": t.startswith("coverage")}
        for t, c, svg, m in spec
    ]


def _highlight(code: str) -> Markup:
    return Markup(highlight(code, PythonLexer(), HtmlFormatter(noclasses=True, style="default")))


def _bucket(b: BucketData, run: RunData) -> dict[str, Any]:
    """One bucket's section, as plain values for the template."""
    s, r = b.summary, b.record or {}
    issue = known_issue(s)
    stacks = sorted((s.get("stacks") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    verification = r.get("verification") or {}
    return {
        "id": b.id,
        "status": "verified" if b.verified else str(s.get("status", "pending")),
        "verified": b.verified,
        "signature": s.get("signature", ""),
        "verdict": s.get("verdict", "?"),
        "oracle": s.get("oracle", "?"),
        "transforms": " > ".join(s.get("transforms") or []) or "-",
        "features": ", ".join(s.get("features") or []) or "-",
        "essential": ", ".join(s.get("signature_features") or []) or "-",
        "hits": s.get("hits", 1),
        "stacks": stacks,
        "seconds_to_find": s.get("seconds_to_find", r.get("seconds_to_find")),
        "cases_to_find": s.get("cases_to_find", r.get("cases_to_find")),
        "torch_version": r.get("torch_version") or run.numbers.get("torch_version", "?"),
        "triage": r.get("triage") or s.get("triage"),
        "triage_detail": r.get("triage_detail"),
        "repro_lines": s.get("repro_lines"),
        "shrink_seconds": sum(s.get("shrink_seconds") or []),
        "path": str(b.path.relative_to(run.out)) if b.path else s.get("path"),
        "repro": _highlight(b.repro) if b.verified and b.repro else None,
        "functorch": r.get("functorch"),
        "reference": r.get("reference"),
        "verification": verification,
        "output_tail": verification.get("output_tail"),
        "issue": _issue(issue) if issue else None,
        "related": [_issue(k) for k in related_issues(s)],
    }


def _issue(k: KnownIssue) -> dict[str, Any]:
    return {"url": k.issue, "number": k.number, "ref": k.ref, "state": k.state_text, "summary": k.summary}


def _events(run: RunData, limit: int = 50) -> list[dict[str, Any]]:
    """The run's notable events (not new buckets: those have sections), the last ``limit``."""
    notable = [e for e in run.events if e.get("event") not in ("new_bucket",)]
    rows = []
    for e in notable[-limit:]:
        rest = {k: v for k, v in e.items() if k not in ("time", "elapsed", "event")}
        detail = ", ".join(f"{k}={v}" for k, v in rest.items())
        rows.append({"elapsed": duration(e.get("elapsed")), "event": e.get("event", "?"), "detail": detail})
    return rows


def render_html(run: RunData) -> str:
    """The report page for ``run``: one self-contained HTML document."""
    state, note, updated = _state(run)
    buckets = sorted(run.buckets, key=lambda b: STATUS_ORDER.get("verified" if b.verified else b.status, 3))
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            out=str(run.out),
            seed=run.numbers.get("seed", "?"),
            torch_version=run.numbers.get("torch_version", "?"),
            state=state,
            state_note=note,
            updated=updated,
            summary=_summary(run),
            plots=_plots(run),
            buckets=[_bucket(b, run) for b in buckets],
            events=_events(run),
            generated=_when(dt.datetime.now(dt.timezone.utc).isoformat()),
        )
    )


def write_html(out: Path) -> Path:
    """Write ``OUT/report.html`` (atomically, so a browser refresh never sees half a page); its path."""
    path = out / "report.html"
    atomic_write_text(path, render_html(load_run(out)))
    return path
