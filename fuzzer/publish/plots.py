"""The HTML report's plots, each a function from plain numbers (``summary.json`` / ``stats.json`` fields) to
the text of one inline ``<svg>`` element, or None when there is nothing to plot yet.

Figures are made with matplotlib's object API (no pyplot: no global figure state, no GUI backend; the SVG
backend is picked by ``savefig(format="svg")``), with text left as ``<text>`` so the page's fonts draw it.
Each SVG's ids are prefixed with the plot's name, so several can sit in one page without their clip paths
and markers colliding. matplotlib is imported on first use: importing this module stays cheap.
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec

from ..ir.case import TRANSFORMS
from ..ir.features import ALL_FEATURES
from ..ir.verdicts import ALL_VERDICTS, FINDING_VERDICTS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

P = ParamSpec("P")
#: Rows of a history kept for a plot; longer ones are thinned (slopes then span several rows).
MAX_POINTS = 600
BLUE, GREEN, ORANGE, RED, GREY = "#3465a4", "#4e9a06", "#f57900", "#cc0000", "#888a85"
UNCOVERED = "#f4c7c3"
_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "affuzz-report",  # deterministic ids
    "font.size": 9,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _styled(plot: Callable[P, str | None]) -> Callable[P, str | None]:
    """Run a plot function under the report's matplotlib style (font sizes are fixed when text is made)."""

    @functools.wraps(plot)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str | None:
        import matplotlib

        with matplotlib.rc_context(_RC):
            return plot(*args, **kwargs)

    return wrapper


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig: Figure, name: str) -> str:
    """``fig`` as an inline ``<svg>`` element (no XML prolog), its ids prefixed with ``name``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue().decode("utf-8")
    text = text[text.index("<svg") :]
    text = re.sub(r'\bid="([^"]+)"', rf'id="{name}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{name}-\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{name}-\1"', text)
    return text.replace("<svg ", f'<svg class="plot-svg" data-plot="{name}" ', 1)


def _time_axis(ax: Axes, last: float) -> float:
    """Label the x axis in the unit that suits a run of ``last`` seconds; the divisor for seconds."""
    unit, scale = ("hours", 3600.0) if last > 3 * 3600 else ("minutes", 60.0) if last > 180 else ("seconds", 1.0)
    ax.set_xlabel(f"elapsed ({unit})")
    return scale


def _legend(ax: Axes, handles: list[Any] | None = None) -> None:
    """A one-row legend above the axes, where it hides no data."""
    kwargs: dict[str, Any] = {"handles": handles} if handles is not None else {}
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, frameon=False, borderaxespad=0.2, **kwargs)


def _thin(rows: Sequence[Sequence[float]]) -> list[Sequence[float]]:
    """At most :data:`MAX_POINTS` rows, the first and last kept."""
    if len(rows) <= MAX_POINTS:
        return list(rows)
    step = math.ceil(len(rows) / MAX_POINTS)
    kept = list(rows[::step])
    return kept if kept[-1] is rows[-1] else [*kept, rows[-1]]


@_styled
def rate_plot(progress: Sequence[Sequence[float]]) -> str | None:
    """Cases/s over time: the slope between consecutive ``progress_history`` rows
    ([elapsed, cases, buckets, verified]), drawn as steps, with the run's average dashed."""
    rows = [r for r in _thin(progress) if len(r) >= 2]
    if len(rows) < 2 or rows[-1][0] <= rows[0][0]:
        return None
    fig = _figure(6.0, 2.8)
    ax = fig.subplots()
    scale = _time_axis(ax, rows[-1][0])
    xs, ys = [], []
    for (t0, c0, *_), (t1, c1, *_) in zip(rows, rows[1:], strict=False):
        if t1 > t0:
            xs += [t0 / scale, t1 / scale]
            ys += [(c1 - c0) / (t1 - t0)] * 2
    ax.fill_between(xs, ys, color=BLUE, alpha=0.15, linewidth=0)
    ax.plot(xs, ys, color=BLUE, linewidth=1.2, label="cases/s")
    t_end, c_end = rows[-1][0], rows[-1][1]
    average = (c_end - rows[0][1]) / (t_end - rows[0][0])
    ax.axhline(average, color=GREY, linestyle="--", linewidth=1, label=f"average {average:.1f}")
    ax.set_ylabel("cases/s")
    ax.set_ylim(bottom=0)
    _legend(ax)
    return _svg(fig, "rate")


@_styled
def buckets_plot(progress: Sequence[Sequence[float]]) -> str | None:
    """Buckets and verified buckets over time, from ``progress_history`` rows."""
    rows = [r for r in _thin(progress) if len(r) >= 4]
    if len(rows) < 2:
        return None
    fig = _figure(6.0, 2.8)
    ax = fig.subplots()
    scale = _time_axis(ax, rows[-1][0])
    xs = [r[0] / scale for r in rows]
    ax.step(xs, [r[2] for r in rows], where="post", color=ORANGE, linewidth=1.5, label="buckets")
    ax.step(xs, [r[3] for r in rows], where="post", color=GREEN, linewidth=1.5, label="verified")
    ax.plot(xs[-1], rows[-1][2], "o", color=ORANGE, markersize=3)  # the latest counts, visible even when new
    ax.plot(xs[-1], rows[-1][3], "o", color=GREEN, markersize=3)
    ax.set_ylabel("buckets")
    ax.set_ylim(bottom=0, top=max(1, max(r[2] for r in rows)) * 1.15)
    ax.yaxis.get_major_locator().set_params(integer=True)
    _legend(ax)
    return _svg(fig, "buckets")


@_styled
def queue_plot(queue: Sequence[Sequence[float]]) -> str | None:
    """The shrink queue over time from ``queue_history`` rows ([elapsed, queued, running, shrink seconds]):
    jobs queued and running, and the shrink core-seconds spent so far on a second axis."""
    rows = [r for r in _thin(queue) if len(r) >= 4]
    if len(rows) < 2:
        return None
    fig = _figure(6.0, 2.8)
    ax = fig.subplots()
    scale = _time_axis(ax, rows[-1][0])
    xs = [r[0] / scale for r in rows]
    ax.step(xs, [r[1] for r in rows], where="post", color=RED, linewidth=1.5, label="queued")
    ax.step(xs, [r[2] for r in rows], where="post", color=BLUE, linewidth=1.5, label="running")
    ax.set_ylabel("shrink jobs")
    ax.set_ylim(bottom=0, top=max(1, max(max(r[1], r[2]) for r in rows)) * 1.15)
    ax.yaxis.get_major_locator().set_params(integer=True)
    right = ax.twinx()
    right.plot(xs, [r[3] for r in rows], color=GREY, linestyle="--", linewidth=1, label="shrink seconds")
    right.set_ylabel("shrink seconds (total)")
    right.set_ylim(bottom=0)
    right.spines["right"].set_visible(True)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    _legend(ax, handles)
    return _svg(fig, "queue")


@_styled
def verdict_plot(verdicts: dict[str, int]) -> str | None:
    """Cases per verdict as horizontal bars (findings red), each labelled with its count; a log scale
    when the counts span more than two orders of magnitude."""
    names = [v for v in ALL_VERDICTS if v in verdicts] + sorted(set(verdicts) - set(ALL_VERDICTS))
    if not names:
        return None
    counts = [int(verdicts[v]) for v in names]
    fig = _figure(6.0, 0.3 * len(names) + 0.8)
    ax = fig.subplots()
    ys = list(range(len(names)))[::-1]
    colors = [RED if v in FINDING_VERDICTS else BLUE for v in names]
    ax.barh(ys, counts, color=colors, height=0.7)
    ax.set_yticks(ys, names)
    nonzero = [n for n in counts if n > 0]
    log = bool(nonzero) and max(nonzero) / min(nonzero) > 100
    if log:
        ax.set_xscale("log")
    top = max(counts, default=0) or 1
    ax.set_xlim(left=0.5 if log else 0, right=top * (4 if log else 1.15))
    for y, n in zip(ys, counts, strict=True):
        ax.text(max(n, 1 if log else 0), y, f" {n}", va="center", fontsize=8)
    ax.set_xlabel("cases" + (" (log scale)" if log else ""))
    return _svg(fig, "verdicts")


def _compact(n: int) -> str:
    return str(n) if n < 1000 else f"{n / 1000:.0f}k" if n < 10**6 else f"{n / 10**6:.0f}M"


@_styled
def coverage_plot(cells: Sequence[Sequence[Any]]) -> str | None:
    """The coverage grid (NOTE [coverage cells] in fuzzer/gen/coverage.py) as a heatmap: cases per feature
    (rows, :data:`ALL_FEATURES`) x transform (columns, :data:`TRANSFORMS`), log colour scale, each cell
    labelled; uncovered cells hatched pink."""
    if not cells:
        return None
    from matplotlib.colors import LinearSegmentedColormap, LogNorm
    from matplotlib.patches import Rectangle

    counts = {(str(f), str(t)): int(n) for f, t, n in cells}
    grid = [[counts.get((f, t), 0) for t in TRANSFORMS] for f in ALL_FEATURES]
    top = max((n for row in grid for n in row), default=0)
    fig = _figure(6.4, 0.26 * len(ALL_FEATURES) + 1.4)
    ax = fig.subplots()
    masked = [[n if n > 0 else math.nan for n in row] for row in grid]
    # light blue (never white: pink is for nothing) to dark blue, over at least 1..10 cases
    cmap = LinearSegmentedColormap.from_list("covered", ["#dbe9f6", "#08306b"])
    image = ax.imshow(masked, cmap=cmap, norm=LogNorm(vmin=1, vmax=max(top, 10)), aspect="auto")
    threshold = math.sqrt(max(top, 10))
    for i, row in enumerate(grid):
        for j, n in enumerate(row):
            if n == 0:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=UNCOVERED, edgecolor=RED, hatch="///", lw=0))
            else:
                ax.text(
                    j, i, _compact(n), ha="center", va="center", fontsize=7, color="white" if n > threshold else "black"
                )
    ax.set_xticks(range(len(TRANSFORMS)), TRANSFORMS, rotation=45, ha="left", rotation_mode="anchor")
    ax.set_yticks(range(len(ALL_FEATURES)), ALL_FEATURES)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    fig.colorbar(image, ax=ax, shrink=0.6, label="cases (log scale)")
    return _svg(fig, "coverage")
