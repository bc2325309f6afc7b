"""What a campaign shows and leaves behind: the live status, the closing table, ``summary.json`` and
``report.md`` under OUT. Everything here takes plain data: the driver's ``live()`` (the numbers of
``stats.json``) and ``summary()`` dictionaries, never the driver itself."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..ir.case import TRANSFORMS
from ..ir.features import ALL_FEATURES
from ..ir.files import atomic_write_json, atomic_write_text
from ..ir.verdicts import FINDING_VERDICTS
from .upstream import known_issue, related_issues


def status_line(live: dict[str, Any]) -> str:
    """libFuzzer-style one-line status from the driver's ``live()`` numbers."""
    v = live["verdicts"]
    findings = sum(v[k] for k in FINDING_VERDICTS)
    cov = live["coverage"]
    return (
        f"#{live['cases']}\telapsed: {live['elapsed_seconds']:.0f}s cases/s: {live['cases_per_second']:.1f}"
        f" workers: {live['workers']}"
        f" consistent: {v['consistent']} expected: {v['expected']} findings: {findings}"
        f" buckets: {live['buckets']} (verified {live['verified_buckets']}) restarts: {live['worker_restarts']}"
        f" cov: {cov['cells_covered']}/{cov['cells_possible']} cells, {cov['skeletons']} stacks"
        + (
            f" compiled: {live['oracles']['compiled_vs_eager']['cases']}"
            if "compiled_vs_eager" in live.get("oracles", {})
            else ""
        )
        + (f" internal_errors: {live['internal_errors']}" if live["internal_errors"] else "")
        + (f" {live['shrinking']}" if live["shrinking"] else "")
    )


def _compact(n: int) -> str:
    return "." if n == 0 else str(n) if n < 1000 else f"{n / 1000:.0f}k" if n < 10**6 else f"{n / 10**6:.0f}M"


def coverage_grid(cov: dict[str, Any]) -> Table:
    """NOTE [coverage cells]: cases per feature tag x transform (``cov``: the ``coverage`` of ``live()``
    or ``summary()``, its ``cells`` a list of [feature, transform, cases]); uncovered cells dim, the
    rarest covered ones highlighted (steering sends cases there, NOTE [steering])."""
    cells = {(f, t): n for f, t, n in cov["cells"]}
    counts = sorted(cells.values())
    rare = counts[len(counts) // 10] if counts else 0
    t = Table(
        title=f"coverage: {cov['cells_covered']}/{cov['cells_possible']} cells, {cov['skeletons']} stacks, "
        f"{cov['cases_since_new_cell']} cases since a new cell, {cov['cases_since_new_skeleton']} since a new stack",
        box=None,
        pad_edge=False,
        padding=(0, 1),
    )
    t.add_column("feature \\ transform")
    short = {"autograd_grad": "ag_grad", "forward_ad": "fwd_ad", "linearize": "linrz"}
    for name in TRANSFORMS:
        t.add_column(short.get(name, name), justify="right")
    for tag in ALL_FEATURES:
        row = []
        for name in TRANSFORMS:
            n = cells.get((tag, name), 0)
            style = "dim" if n == 0 else ("bold yellow" if n <= rare else "")
            row.append(Text(_compact(n), style=style))
        t.add_row(tag, *row)
    return t


class LiveView:
    """A rich Live dashboard on a terminal, a plain status line every ``plain_interval`` seconds otherwise."""

    def __init__(self, console: Console, plain_interval: float = 10.0) -> None:
        self.console = console
        self.plain_interval = plain_interval
        self._live: Live | None = None
        self._last_plain = time.monotonic()

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def tick(self, live: dict[str, Any]) -> None:
        """Show the driver's ``live()`` numbers."""
        if self._live is not None:
            self._live.update(dashboard(live))
        elif time.monotonic() - self._last_plain >= self.plain_interval:
            self._last_plain = time.monotonic()
            self.console.print(status_line(live), highlight=False)


def _compiled_text(oracles: dict[str, Any]) -> str:
    d = oracles.get("compiled_vs_eager")
    if not d:
        return ""
    share = d.get("share_of_worker_time") or 0.0
    return f"  compiled {d['cases']} ({d.get('cases_per_core_second') or 0} per core s, {100 * share:.0f} % of worker time)"


def dashboard(live: dict[str, Any]) -> Group:
    """The live view (the driver's ``live()`` numbers): time, throughput per worker, verdicts, buckets,
    restarts, coverage."""
    left = []
    if live["remaining_seconds"] is not None:
        left.append(f"{live['remaining_seconds']:.0f}s left")
    if live["max_cases"] is not None:
        left.append(f"{max(0, live['max_cases'] - live['cases'])} cases left")
    head = Text(
        f"affuzz  seed {live['seed']}  torch {live['torch_version']}  {live['workers']} {live['transport']} workers  "
        f"{live['elapsed_seconds']:.0f}s elapsed ({', '.join(left) or 'no limit'})  cases {live['cases']}  "
        f"{live['cases_per_second']:.1f} cases/s  restarts {live['worker_restarts']}  "
        f"recycled {live['worker_recycles']}  RSS {live['rss_mb']['driver'] + live['rss_mb']['workers']:.0f} MiB"
        + _compiled_text(live.get("oracles", {})),
        style="bold",
    )
    workers = Table(box=None, pad_edge=False, padding=(0, 1))
    for col in ("worker", "pid", "doing", "cases", "cases/s", "restarts", "RSS MiB"):
        workers.add_column(col, justify="right" if col not in ("doing",) else "left")
    for w in live["worker_stats"]:
        workers.add_row(
            str(w["slot"]),
            str(w["pid"]),
            w["doing"],
            str(w["cases"]),
            f"{w['cases_per_second']:.1f}",
            str(w["restarts"]),
            f"{w['rss_mb']:.0f}",
        )
    verdicts = Table(box=None, pad_edge=False, padding=(0, 1))
    for v in live["verdicts"]:
        verdicts.add_column(v, justify="right")
    verdicts.add_row(*[str(n) for n in live["verdicts"].values()])
    b = Table(
        title=f"buckets: {live['buckets']} ({live['verified_buckets']} verified), last new one "
        f"{live['seconds_since_new_bucket']:.0f}s ago",
        show_header=True,
    )
    for col in ("bucket", "transforms", "essential features", "hits", "repro lines", "status"):
        b.add_column(col)
    for row in live["recent_buckets"]:
        b.add_row(
            row["id"],
            ">".join(row["transforms"]),
            ", ".join(row["signature_features"]) or "-",
            str(row["hits"]),
            f"{row['lines_before'] or '?'} -> {row['lines_after'] or '?'}",
            row["status"],
        )
    parts: list[Any] = [head, workers, verdicts, b, coverage_grid(live["coverage"])]
    if live["shrinking"]:
        parts.insert(1, Text(live["shrinking"], style="yellow"))
    return Group(*parts)


def _shrink_text(b: dict[str, Any]) -> str:
    secs = b.get("shrink_seconds") or []
    if b.get("unshrunk"):  # published before it was shrunk: never drafted so (NOTE [issue drafts])
        return f"unshrunk, {b.get('repro_lines') or '?'} lines"
    return f"{max(secs, default=0.0):.1f}s, {b.get('repro_lines') or '?'} lines" if secs else "-"


def summary_table(summary: dict[str, Any]) -> Group:
    counts = Table(title="verdicts")
    counts.add_column("verdict")
    counts.add_column("cases", justify="right")
    for v, n in summary["verdicts"].items():
        counts.add_row(v, str(n))
    found = Table(title="findings (one row per bucket)")
    for col in (
        "bucket",
        "verdict",
        "oracle",
        "triage",
        "transforms",
        "essential features",
        "hits",
        "found after",
        "shrink",
        "status",
    ):
        found.add_column(col)
    for b in summary["buckets"]:
        found.add_row(
            b["id"],
            b["verdict"],
            b["oracle"],
            b.get("triage") or "-",
            " > ".join(b["transforms"]),
            ", ".join(b["signature_features"]) or "-",
            str(b["hits"]),
            f"{b['seconds_to_find']:.1f}s / {b['cases_to_find']} cases",
            _shrink_text(b),
            b["status"],
        )
    head = Text(
        f"{summary['cases']} cases in {summary['elapsed_seconds']:.1f}s ({summary['cases_per_second']} cases/s), "
        f"seed {summary['seed']}, torch {summary['torch_version']}",
        style="bold",
    )
    return Group(head, counts, found)


def _saturation_text(cov: dict[str, Any]) -> str:
    if not cov:
        return "(no coverage recorded)"
    least = cov.get("least_covered_cell")
    return (
        f"{cov['cells_covered']} of {cov['cells_possible']} feature x transform cells covered, "
        f"{cov['skeletons']} distinct transform stacks; least-covered cell "
        f"{' x '.join(least) if least else '-'} ({cov['least_covered_count']} cases), median cell "
        f"{cov['median_cell_count']} cases; {cov['cases_since_new_cell']} cases since a new cell, "
        f"{cov.get('cases_since_new_skeleton', '?')} since a new stack."
    )


def _oracle_lines(oracles: dict[str, Any]) -> list[str]:
    """Cost per oracle (cases, core seconds, share of the worker wall time: NOTE [worker time]), and the
    compiled oracle's documented limitations (NOTE [compiled mode])."""
    if not oracles:
        return []
    lines = [
        "| oracle | cases | core s | cases per core s | share of worker time |",
        "|---|---:|---:|---:|---:|",
    ]
    for o, d in oracles.items():
        share = d.get("share_of_worker_time")
        lines.append(
            f"| {o} | {d['cases']} | {d['core_seconds']} | {d.get('cases_per_core_second') or '-'} |"
            f" {f'{100 * share:.1f} %' if share is not None else '-'} |"
        )
    compiled = oracles.get("compiled_vs_eager")
    if compiled is not None:
        lines += [
            "",
            f"Compiled oracle (--compile-share {compiled.get('compile_share')}): expected, by documented limitation: "
            + (", ".join(f"{k} {n}" for k, n in compiled.get("expected_by_limitation", {}).items()) or "none"),
        ]
    return [*lines, ""]


#: How report.md names the parts of the worker time (NOTE [worker time] in fuzzer/campaign/worker.py).
WORKER_TIME_PARTS = {
    "generate": "decoding cases (and the draws steering skipped)",
    "torch_func_sides": "the torch.func oracles' sides (torch)",
    "compiled": "running cases compiled (all of it, their findings' triage too)",
    "loop_rest": "the rest of the fuzz loop (render, load, compare, bookkeeping)",
    "triage": "triage of new torch.func findings",
    "shrink": "shrink jobs",
    "other": "waiting for the driver, restarts",
}


def _worker_time_lines(wt: dict[str, Any]) -> list[str]:
    """Where the workers' wall time went (NOTE [worker time])."""
    if not wt or not wt.get("wall_core_seconds"):
        return []
    lines = ["| worker time | core s | share |", "|---|---:|---:|"]
    for part, label in WORKER_TIME_PARTS.items():
        lines.append(f"| {label} | {wt['core_seconds'][part]:.1f} | {100 * (wt['share'][part] or 0):.1f} % |")
    lines.append(f"| all ({wt['wall_core_seconds']:.1f} core s after start-up) | | 100 % |")
    return [*lines, ""]


def report_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# affuzz campaign report",
        "",
        f"- torch {summary['torch_version']}, Python {summary['python_version']}, seed {summary['seed']}",
        f"- {summary['cases']} cases in {summary['elapsed_seconds']:.1f} s ({summary['cases_per_second']} cases/s)",
        f"- internal errors: {summary['internal_errors']}",
        f"- workers: {summary.get('workers', 1)} ({summary.get('transport', 'in-process')}), restarted "
        f"{summary.get('worker_restarts', 0)}, recycled {summary.get('worker_recycles', 0)}; draws skipped by "
        f"steering: {summary.get('skipped_by_steering', 0)}",
        "- shrinking: "
        + (
            "{shrinks} shrinks, {seconds_total} s in all, median {seconds_median} s, max {seconds_max} s"
            " (budget {budget} runs each)".format(**summary["shrink"])
            if summary.get("shrink", {}).get("shrinks")
            else "nothing shrunk"
        ),
        "",
        "## Verdicts",
        "",
        "| verdict | cases |",
        "|---|---:|",
        *[f"| {v} | {n} |" for v, n in summary["verdicts"].items()],
        "",
        "Expected (documented limitations): "
        + (", ".join(f"{k} {n}" for k, n in summary["expected_by_limitation"].items()) or "none"),
        "",
        "Metamorphic oracles (checks by verdict): "
        + (
            "; ".join(
                f"{o}: " + ", ".join(f"{v} {n}" for v, n in c.items())
                for o, c in summary.get("metamorphic_verdicts", {}).items()
            )
            or "none applied"
        ),
        "",
        *_oracle_lines(summary.get("oracles") or {}),
        *_worker_time_lines(summary.get("worker_time") or {}),
        "## Coverage (cases exercising each feature tag / transform)",
        "",
        _saturation_text(summary.get("coverage") or {}),
        "",
        ", ".join(f"{t} {n}" for t, n in summary.get("feature_counts", {}).items()),
        "",
        ", ".join(f"{t} {n}" for t, n in summary.get("transform_counts", {}).items()),
        "",
        "## Findings",
        "",
    ]
    if not summary["buckets"]:
        lines.append("No disagreement found.")
    else:
        lines += [
            "| bucket | verdict | oracle | triage | transforms | essential features | hits | found after | shrink | status | repro |",
            "|---|---|---|---|---|---|---:|---|---|---|---|",
        ]
        for b in summary["buckets"]:
            repro = f"{b['path']}/repro.py" if b["path"] else "-"
            lines.append(
                f"| {b['id']} | {b['verdict']} | {b['oracle']} | {b.get('triage') or '-'} | {' > '.join(b['transforms'])} | {', '.join(b['signature_features']) or '-'}"
                f" | {b['hits']} | {b['seconds_to_find']:.1f} s, {b['cases_to_find']} cases | {_shrink_text(b)} | {b['status']} | {repro} |"
            )
        lines += [
            "",
            "Each verified repro exits 1 under this torch: `python findings/<bucket>/repro.py`; the same check as a"
            " test: `pytest findings/<bucket>/test_repro.py`. Shrink: the longest shrink of the bucket and the"
            " non-blank lines of its published repro.",
            "",
            "### Where each bucket was hit",
            "",
            "An error bucket is one torch error under every oracle, stack and verdict (NOTE [error buckets]);"
            " every `oracle: stack` it was hit under, most hits first (all of them: `stacks` in summary.json):",
            "",
        ]
        for b in summary["buckets"]:
            stacks = sorted((b.get("stacks") or {}).items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"`{k}` {n}" for k, n in stacks[:8]) + (
                f", ... ({len(stacks)} in all)" if len(stacks) > 8 else ""
            )
            lines.append(f"- {b['id']}: {shown or '-'}")
        lines += upstream_lines(summary["buckets"])
        na = summary.get("not_applicable_by_reason") or {}
        if na:
            lines += [
                "",
                "Comparisons not run because the Function's own rules disagree there (NOTE [valid comparisons]): "
                + ", ".join(f"{k} {v}" for k, v in sorted(na.items(), key=lambda kv: -kv[1])),
            ]
    return "\n".join(lines) + "\n"


def upstream_lines(buckets: list[dict[str, Any]]) -> list[str]:
    """The buckets the known-issues table matches (NOTE [known issues] in fuzzer/publish/upstream.py):
    "known: #N" (never drafted nor filed) and "related: #N" (a neighbouring mechanism)."""
    lines = []
    for b in buckets:
        k = known_issue(b)
        if k is not None:
            lines.append(f"- {b['id']}: known: {k.ref} {k.issue} ({k.state_text}; {k.summary})")
        lines += [
            f"- {b['id']}: related: {r.ref} {r.issue} ({r.state_text}; not the same mechanism: {r.summary})"
            for r in related_issues(b)
        ]
    if not lines:
        return []
    head = (
        "Known upstream issues (fuzzer/publish/known_issues.json): a known bucket gets no issue draft and is "
        "never filed; a related issue is only listed."
    )
    return ["", "### Upstream", "", head, "", *lines]


def write_report(out: Path, summary: dict[str, Any]) -> None:
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "report.md", report_markdown(summary))


CHANGE_STYLE = {
    "fixed": "bold green",
    "regressed": "bold red",
    "new_error": "yellow",
    "changed": "yellow",
    "crash": "bold magenta",
    "hang": "bold magenta",
    "new": "cyan",
    "absent": "cyan",
    "earlier": "cyan",
}


def replay_table(results: list[Any], versions: list[str]) -> Table:
    """Case x torch version -> verdict; a cell that differs from the corpus record is highlighted and
    names the change (fixed, regressed, new_error, changed, crash, hang)."""
    t = Table(title="affuzz replay", show_lines=False)
    t.add_column("case")
    t.add_column("recorded")
    for v in versions:
        t.add_column(f"torch {v}")
    rows: dict[str, dict[str, Any]] = {}
    recorded_of: dict[str, str] = {}
    for r in results:
        key = r.entry.id
        rows.setdefault(key, {})[r.torch_version] = r
        meta = r.entry.meta
        recorded_of[key] = f"{meta.get('verdict', '-')} ({r.entry.status})" if meta else "-"
    for key, by_version in rows.items():
        cells = []
        for v in versions:
            r = by_version.get(v)
            if r is None:
                cells.append(Text("-"))
            elif r.change:
                cells.append(Text(f"{r.verdict} [{r.change}]", style=CHANGE_STYLE.get(r.change, "")))
            else:
                cells.append(Text(r.verdict))
        t.add_row(key, recorded_of[key], *cells)
    return t
