"""Heat maps of the (k, L) grids (ESOL test RMSE, BBBP test ROC-AUC), ours beside the paper's.

Reads the committed aggregate of the benchmark records, ``benchmarks/results/summary.json``
(written by ``python -m benchmarks.report`` from the per-run JSON files); trains nothing.

    python examples/plot_kl_grid.py --out docs/images
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
parser = argparse.ArgumentParser()
parser.add_argument("--summary", default=str(REPO / "benchmarks" / "results" / "summary.json"))
parser.add_argument("--protocol", default=None, help="default: the report's primary protocol")
parser.add_argument("--out", default="docs/images")
args = parser.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)

summary = json.loads(Path(args.summary).read_text())
protocol = args.protocol or summary["primary_protocol"]
grids = summary["protocols"][protocol]["kl_grids"]
# endpoint: (title, higher is better)
ENDPOINTS = {"esol": ("ESOL test RMSE", False), "bbbp": ("BBBP test ROC-AUC", True)}


def grid_values(cells: dict, who: str):
    """(ks, Ls, means, sds) from cells keyed "k{k}_L{L}"; NaN where a cell has no value."""
    keys = [tuple(int(part[1:]) for part in key.split("_")) for key in cells]
    ks, Ls = sorted({k for k, _ in keys}), sorted({L for _, L in keys})
    mean = np.full((len(ks), len(Ls)), np.nan)
    sd = np.full_like(mean, np.nan)
    for (k, L), cell in zip(keys, cells.values()):
        if cell.get(who):
            mean[ks.index(k), Ls.index(L)] = cell[who]["mean"]
            sd[ks.index(k), Ls.index(L)] = cell[who]["sd"]
    return ks, Ls, mean, sd


fig, axes = plt.subplots(2, 2, figsize=(8.4, 7.0))
for row, (endpoint, (title, higher)) in enumerate(ENDPOINTS.items()):
    panels = [grid_values(grids[endpoint], who) for who in ("ours", "paper")]
    finite = np.concatenate([p[2][np.isfinite(p[2])] for p in panels])
    vmin, vmax = finite.min(), finite.max()  # one colour scale per endpoint, ours and paper alike
    for col, (who, (ks, Ls, mean, sd)) in enumerate(zip(("ours", "paper"), panels)):
        ax = axes[row, col]
        # better is always the light end of the scale
        image = ax.imshow(mean, cmap="viridis" if higher else "viridis_r", vmin=vmin, vmax=vmax, origin="lower")
        best = np.nanargmax(mean) if higher else np.nanargmin(mean)
        for i in range(len(ks)):
            for j in range(len(Ls)):
                if np.isfinite(mean[i, j]):
                    text = f"{mean[i, j]:.3f}\n±{sd[i, j]:.3f}"
                    weight = "bold" if np.ravel_multi_index((i, j), mean.shape) == best else "normal"
                    light = (mean[i, j] - vmin) / max(vmax - vmin, 1e-12)
                    light = light if higher else 1 - light
                    ax.text(j, i, text, ha="center", va="center", fontsize=8, weight=weight,
                            color="black" if light > 0.6 else "white")
        ax.set_xticks(range(len(Ls)), [f"L={L}" for L in Ls])
        ax.set_yticks(range(len(ks)), [f"k={k}" for k in ks])
        ax.set_title(f"{title}, {'ours' if who == 'ours' else 'paper'}", fontsize=10)
        fig.colorbar(image, ax=ax, shrink=0.8)
fig.suptitle(f"Chem-GMNet over (k, L), protocol `{protocol}` (mean ± sd over seeds; bold: best)", fontsize=10)
fig.tight_layout()
fig.savefig(out / "kl_grid.png", dpi=110)
print(f"wrote {out}/kl_grid.png")
