"""``--plot``: a PNG of the sweep, precision and recall per combination and per class
(matplotlib, Agg).

A null ratio (not enough data) gets no bar and an explicit "null" label, never a bar of height
0: the chart must not turn "unknown" into "0%". The recall ceiling of any correctable-ECC rule
(faults preceded by a correctable error) is drawn as a line when known. matplotlib is the
optional ``plot`` extra; without it, ``--plot`` fails before anything runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_health.errors import ConfigError


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError("--plot needs matplotlib: pip install 'gpu-health[plot]'") from exc


def _bars(ax: Any, entries: list[dict[str, Any]], pick: Any, title: str) -> None:
    """Precision and recall bars per entry; a null ratio is the word "null", never a bar."""
    width = 0.38
    for offset, key, color in ((-width / 2, "precision", "#3b6ea8"),
                               (width / 2, "recall", "#d9822b")):
        labelled = False
        for i, entry in enumerate(entries):
            x, value = i + offset, pick(entry)[key]
            if value is None:
                ax.text(x, 0.02, "null", ha="center", va="bottom", rotation=90, fontsize=8,
                        color=color)
                continue
            ax.bar(x, value, width, color=color, label=None if labelled else key)
            labelled = True
            ax.text(x, value + 0.01, f"{value:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(entries)), [e["label"].replace(" (", "\n(") for e in entries],
                  fontsize=7, rotation=15, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("ratio (null = not enough data)")
    ax.set_title(title, fontsize=9)


def plot_sweep(report: dict[str, Any], path: Path) -> None:
    """Three panels: the totals per version, then per class (first faults, repeats) with the
    baselines beside the versions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versions = report["versions"]
    both = [*versions, *({**b, "label": "baseline " + b["label"]}
                         for b in report.get("baselines", []))]
    fig, axes = plt.subplots(3, 1, figsize=(max(9.0, 1.5 * len(both) + 3), 13.0))
    _bars(axes[0], versions, lambda e: e, "all predictions")
    ceiling = report["base_rates"].get("recall_ceiling_correctable")
    if ceiling is not None:
        axes[0].axhline(ceiling, color="#d9822b", linestyle="--", linewidth=1,
                        label=f"recall ceiling of a correctable-ECC rule ({ceiling:.2f})")
    _bars(axes[1], both, lambda e: e["by_class"]["first_fault"],
          "first faults (warned before any fault)")
    _bars(axes[2], both, lambda e: e["by_class"]["repeat"], "repeats (card had already failed)")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
    period = report["period"]
    fig.suptitle(f"backtest {period['since'][:10]} .. {period['until'][:10]}: precision and "
                 "recall per rule version and class", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
