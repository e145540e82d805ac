"""Which molecule features the blend's forest should read, on the validation splits only.

    python -m benchmarks.forest_features --seeds 0 1 2 --threads 1

The defaults' forest (``forest=True``, ``gmnet_sklearn/forest.py``) reads the features the head
gets: the RDKit descriptors, quantile-scaled on the training part, and log(1 + Morgan count)
(radius 2, 2048 bits). The ``rf_ecfp`` peer reads Morgan *bits* (ECFP4), and beats the defaults on
BACE-cls's test split. This fits the same forest (``MoleculeForest``: the estimators' trees and
features per split) on each feature set and scores the DeepChem **valid** split only (the test
parts are never scored), seeds 0-2, so a change of the forest's features is chosen the way the
defaults are. The network does not enter: its training does not depend on the forest.

Writes ``benchmarks/results/forest_features/valid.json`` (per endpoint, feature set and seed the
validation metric; per feature set the mean over seeds and its error ratio to ``head``,
``protocols.error_ratio``: below 1 is better than the defaults' features).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, Sequence

import numpy as np

from . import _common as C
from .protocols import ENDPOINTS, error_ratio

SCHEMA = "gmnet-forest-features/1"
#: The endpoints of the peer targets (issue 25), single-task.
DEFAULT_ENDPOINTS = ("esol", "freesolv", "lipophilicity", "bace_regression", "clearance", "bace_classification", "bbbp")
FEATURE_SETS = ("head", "ecfp4", "ecfp4+descriptors")
DEFAULT_OUTPUT = Path(__file__).parent / "results" / "forest_features" / "valid.json"


def feature_sets(X_train, X_valid) -> Dict[str, Dict[str, np.ndarray]]:
    """``{name: {"train": ..., "valid": ...}}``: ``head`` as the estimators build the forest's input
    with their defaults (descriptors scaled on the training part, then log Morgan counts),
    ``ecfp4`` the rf_ecfp peer's bits, and the bits beside the scaled descriptors."""
    from gmnet_sklearn.descriptors import RDKitDescriptors
    from gmnet_sklearn.estimators._base import FUSED_FINGERPRINT
    from gmnet_sklearn.fingerprints import MorganFingerprint

    from .peers import morgan_fingerprints

    scaler = RDKitDescriptors()
    descriptors = {"train": scaler.fit_transform(list(X_train)), "valid": scaler.transform(list(X_valid))}
    counts = MorganFingerprint(**FUSED_FINGERPRINT, counts=True)
    out: Dict[str, Dict[str, np.ndarray]] = {name: {} for name in FEATURE_SETS}
    for part, X in (("train", X_train), ("valid", X_valid)):
        log_counts = np.log1p(counts.fit_transform(list(X)), dtype=np.float32)
        bits = morgan_fingerprints(X)[0].astype(np.float32)
        out["head"][part] = np.hstack([descriptors[part], log_counts])
        out["ecfp4"][part] = bits
        out["ecfp4+descriptors"][part] = np.hstack([descriptors[part], bits])
    return out


def run_endpoint(name: str, seeds: Sequence[int], threads: int, data_home=None) -> Dict[str, object]:
    from gmnet_sklearn.forest import MoleculeForest

    endpoint = ENDPOINTS[name]
    data = C.load_endpoint(endpoint, data_home=data_home)
    if data.y_train.ndim != 1:
        raise ValueError(f"{name}: single-task endpoints only")
    t0 = time.perf_counter()
    feats = feature_sets(data.X_train, data.X_valid)
    featurize_s = time.perf_counter() - t0
    kind = endpoint.task_type
    y_fit = data.to_fit(data.y_train) if kind == "regression" else data.y_train.astype(int)
    result: Dict[str, object] = {"metric": endpoint.metric, "split_sha256": data.split_sha256,
                                 "n_train": len(data.X_train), "n_valid": len(data.X_valid),
                                 "featurize_s": featurize_s, "valid": {}, "fit_s": {}}
    for fname in FEATURE_SETS:
        values, seconds = [], []
        for seed in seeds:
            t = time.perf_counter()
            forest = MoleculeForest(kind, random_state=seed, n_jobs=threads).fit(feats[fname]["train"], y_fit)
            pred = forest.predict(feats[fname]["valid"])
            pred = pred[:, 0] if kind == "regression" else pred[:, 1]
            value, _ = C.score_predictions(endpoint, pred, data.y_valid, data)
            values.append(float(value))
            seconds.append(time.perf_counter() - t)
            C.eprint(f"{name} {fname} seed {seed}: valid {endpoint.metric} {value:.4f} ({seconds[-1]:.1f} s)")
        result["valid"][fname] = values
        result["fit_s"][fname] = seconds
    means = {f: float(np.mean(v)) for f, v in result["valid"].items()}
    result["mean"] = means
    result["error_ratio_vs_head"] = {f: error_ratio(name, means[f], means["head"]) for f in FEATURE_SETS}
    return result


def summarise(per_endpoint: Dict[str, Dict[str, object]]) -> Dict[str, object]:
    """Per feature set: the mean over endpoints of the error ratio to ``head`` and on how many
    endpoints it is lower (better) than ``head``'s."""
    out = {}
    for f in FEATURE_SETS:
        ratios = [r["error_ratio_vs_head"][f] for r in per_endpoint.values()]
        out[f] = {"mean_error_ratio_vs_head": float(np.mean(ratios)),
                  "better_than_head_on": sum(x < 1 for x in ratios), "endpoints": len(ratios)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.forest_features", description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", nargs="+", default=list(DEFAULT_ENDPOINTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-home", default=None, help="MoleculeNet files (default: GMNET_DATA, else ../shared)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    unknown = [e for e in args.endpoints if e not in ENDPOINTS]
    if unknown:
        parser.error(f"unknown endpoints {unknown}; known: {sorted(ENDPOINTS)}")
    C.set_threads(args.threads)
    started, git = C.utc_now(), C.git_info()  # the commit the run started from (the tree may move on)
    per_endpoint = {name: run_endpoint(name, args.seeds, args.threads, args.data_home) for name in args.endpoints}
    record = {
        "schema": SCHEMA,
        "command": C.command_line("benchmarks.forest_features", sys.argv[1:] if argv is None else argv),
        "started_utc": started, "finished_utc": C.utc_now(),
        "split": "valid (DeepChem scaffold split); test never scored",
        "forest": "gmnet_sklearn.forest.MoleculeForest (the estimators' forest: 500 trees; a third of the "
                  "features per split for regression, the square root for classification)",
        "feature_sets": {"head": "RDKit descriptors quantile-scaled on train + log(1 + Morgan counts), radius 2, "
                                 "2048 bits (what forest=True reads with the defaults)",
                         "ecfp4": "Morgan bits, radius 2, 2048 (the rf_ecfp peer's features)",
                         "ecfp4+descriptors": "the scaled descriptors beside the Morgan bits"},
        "seeds": args.seeds, "threads": args.threads,
        "hardware": C.hardware_info("cpu"), "versions": C.versions(), "git": git,
        "endpoints": per_endpoint,
        "summary": summarise(per_endpoint),
    }
    C.write_json_atomic(args.output, C.jsonable(record))
    print(f"wrote {args.output}")
    for f, s in record["summary"].items():
        print(f"{f}: mean error ratio vs head {s['mean_error_ratio_vs_head']:.3f}, "
              f"better on {s['better_than_head_on']} of {s['endpoints']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
