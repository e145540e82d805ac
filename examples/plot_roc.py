"""ROC curves on BBBP's scaffold test split: Chem-GMNet, a random forest on its own features
(GMNetEmbedder), and the usual RF on ECFP4 (PNG file).

Needs BBBP (``fetch_moleculenet`` finds it in GMNET_DATA or downloads it). The library's
defaults with fewer epochs: a few minutes on a laptop CPU.

    python examples/plot_roc.py --epochs 10 --out docs/images
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.metrics import RocCurveDisplay  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from gmnet_sklearn import GMNetClassifier  # noqa: E402
from gmnet_sklearn.datasets import fetch_moleculenet  # noqa: E402
from gmnet_sklearn.embedder import GMNetEmbedder  # noqa: E402
from gmnet_sklearn.fingerprints import MorganFingerprint  # noqa: E402
from gmnet_sklearn.model_selection import scaffold_split  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--out", default="docs/images")
args = parser.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)

data = fetch_moleculenet("bbbp")
X, y = np.asarray(data.data, dtype=object), np.asarray(data.target)
train, valid, test = scaffold_split(X)
gmnet = GMNetClassifier(max_epochs=args.epochs, random_state=0)
gmnet.fit(X[train], y[train], X_valid=X[valid], y_valid=y[valid])
# the fitted model's pooled encoder state as features for another model
rf_embed = make_pipeline(GMNetEmbedder(gmnet, prefit=True), RandomForestClassifier(500, random_state=0))
rf_ecfp = make_pipeline(MorganFingerprint(radius=2, n_bits=2048), RandomForestClassifier(500, random_state=0))
rf_embed.fit(X[train], y[train])
rf_ecfp.fit(X[train], y[train])

fig, ax = plt.subplots(figsize=(5.2, 5.0))
for model, name in [(gmnet, "Chem-GMNet"), (rf_embed, "RF on Chem-GMNet features"), (rf_ecfp, "RF on ECFP4")]:
    RocCurveDisplay.from_estimator(model, X[test], y[test], name=name, ax=ax)
ax.plot([0, 1], [0, 1], color="0.7", linestyle=":", linewidth=1)
ax.set_title("BBBP, scaffold test split")
fig.tight_layout()
fig.savefig(out / "roc_bbbp.png", dpi=110)
print(f"wrote {out}/roc_bbbp.png")
