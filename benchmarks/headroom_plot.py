"""The headroom benchmark's figure: each measure's summed MASE over persistence's, per group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

LABELS = {
    "champion": "champion (held out)",
    "best_family": "best family or peer per cell, hindsight",
    "best_pool": "best simple forecaster per cell, hindsight",
    "best_of_both": "best of both per cell, hindsight",
    "fair_half": "simple, per cell, chosen on alternate windows",
    "fair_cell": "simple, per cell, chosen on tune",
    "fair_series": "simple, per series, chosen on tune",
    "fair_group": "simple, per trace group, chosen on tune",
}


def draw(summary: dict[str, Any], output: Path) -> None:
    """One panel per trace group, a bar per measure, lines at persistence and the target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = summary["groups"]
    measures = [m for m in LABELS if m in next(iter(groups.values()))["over_persistence"]]
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 4.5), sharey=True)
    for ax, (name, group) in zip(axes, groups.items(), strict=True):
        ratios = [group["over_persistence"][m] for m in measures]
        colours = ["tab:blue" if "hindsight" in LABELS[m] else "tab:grey" for m in measures]
        colours[0] = "tab:green"
        ax.barh(range(len(measures)), ratios, color=colours)
        ax.axvline(1.0, color="black", linewidth=1, label="persistence")
        ax.axvline(summary["target"], color="tab:red", linestyle="--", label="target")
        ax.set_xlim(0.5, max(1.4, min(max(ratios) + 0.05, 2.0)))
        ax.set_title(f"{name} ({group['cells']} cells)")
        ax.set_xlabel("summed MASE / persistence's")
        for y, r in enumerate(ratios):
            ax.text(min(r, 1.95), y, f" {r:.3f}", va="center", fontsize=8)
    axes[0].set_yticks(range(len(measures)), [LABELS[m] for m in measures], fontsize=8)
    axes[0].invert_yaxis()
    handles, _ = axes[0].get_legend_handles_labels()
    fig.legend(handles, ["persistence", "target (all cells)"], loc="lower center", ncol=2)
    fig.suptitle("Headroom above persistence on forecast_accuracy's test windows")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
