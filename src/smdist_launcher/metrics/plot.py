"""A job's metrics as one PNG: one panel per metric, one line per host/rank. matplotlib (the `plot` extra) is
imported only here, when a plot is asked for."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO

from .store import TRAINING, MetricPoint
from .summary import series

X_TIME, X_STEP = "time", "step"


class PlotUnavailable(ImportError):
    """matplotlib is not installed."""


def _pyplot() -> object:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed (CI, servers)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable("plotting needs matplotlib: pip install 'smdist-launcher[plot]'") from exc
    return plt


def plot_points(points: Iterable[MetricPoint], out: Path | IO[bytes], *, x: str = X_TIME, title: str = "") -> int:
    """Draw the points into `out` (a PNG path or binary file); returns the number of panels. x: `time` (seconds
    since the job's first point) or `step` (training points without a step are left out)."""
    plt = _pyplot()
    points = list(points)
    by_series = series(points)
    metrics: dict[tuple[str, str], list[tuple[str, int | None]]] = {}
    for kind, name, host, rank in by_series:
        metrics.setdefault((kind, name), []).append((host, rank))
    panels = sorted(metrics, key=lambda k: (k[0] != TRAINING, list(metrics).index(k)))
    start = min((p.timestamp for p in points), default=0.0)
    rows = max(1, len(panels))
    fig, axes = plt.subplots(rows, 1, figsize=(9, 2.6 * rows), squeeze=False)  # type: ignore[attr-defined]
    for ax, (kind, name) in zip(axes[:, 0], panels, strict=False):
        for host, rank in sorted(metrics[(kind, name)], key=lambda hr: (hr[0], -1 if hr[1] is None else hr[1])):
            pts = by_series[(kind, name, host, rank)]
            if x == X_STEP:
                pts = [p for p in pts if p.step is not None]
                xs = [float(p.step) for p in pts]  # type: ignore[arg-type]
            else:
                xs = [p.timestamp - start for p in pts]
            label = f"{host} r{rank}" if rank is not None else host
            ax.plot(xs, [p.value for p in pts], marker="." if len(pts) < 50 else None, linewidth=1.2, label=label)
        ax.set_title(f"{name} ({kind})", fontsize=10)
        ax.set_xlabel("step" if x == X_STEP else "seconds since start", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no metrics recorded", ha="center", va="center")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)  # type: ignore[attr-defined]
    return len(panels)
