"""``--plot``: a PNG of the sweep, precision and recall per combination (matplotlib, Agg).

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


def plot_sweep(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versions = report["versions"]
    labels = [v["label"].replace(" (", "\n(") for v in versions]
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(versions) + 2), 4.8))
    for offset, key, color in ((-width / 2, "precision", "#3b6ea8"),
                               (width / 2, "recall", "#d9822b")):
        labelled = False
        for i, v in enumerate(versions):
            x = i + offset
            value = v[key]
            if value is None:
                ax.text(x, 0.02, "null", ha="center", va="bottom", rotation=90, fontsize=8,
                        color=color)
                continue
            ax.bar(x, value, width, color=color, label=None if labelled else key)
            labelled = True
            ax.text(x, value + 0.01, f"{value:.2f}", ha="center", va="bottom", fontsize=8)
    ceiling = report["base_rates"].get("recall_ceiling_correctable")
    if ceiling is not None:
        ax.axhline(ceiling, color="#d9822b", linestyle="--", linewidth=1,
                   label=f"recall ceiling of a correctable-ECC rule ({ceiling:.2f})")
    ax.set_xticks(range(len(versions)), labels, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("ratio (null = not enough data)")
    period = report["period"]
    ax.set_title(f"backtest {period['since'][:10]} .. {period['until'][:10]}: precision and "
                 "recall per rule version", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
