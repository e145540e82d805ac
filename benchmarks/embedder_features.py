"""Chem-GMNet's own features for other models: RF and ridge on GMNetEmbedder features vs RF on ECFP4.

    python -m benchmarks.embedder_features --endpoints esol bbbp --seeds 0 1 2 --threads 1 --resume
    python -m benchmarks.report          # adds the "Model features" section once records exist

Per (endpoint, seed), on the DeepChem scaffold split (``_common.load_endpoint``):

1. the estimator with the library's defaults (protocol ``tuned``) is fitted on train, with the
   valid split as ``X_valid``/``y_valid`` (the epochs kept), and scored itself;
2. ``GMNetEmbedder`` turns train/valid/test into features: ``pooled`` (the encoder's pooled state)
   and ``moments`` (the flattened terminal Gated-SFA moment matrices of every layer);
3. on each feature set a random forest (500 trees) and a linear model (``RidgeCV`` for
   regression, L2 logistic regression for classification, on standardised features) are fitted
   on train, one per task on its labelled rows, beside RF on ECFP4
   (``gmnet_sklearn.fingerprints.MorganFingerprint``, 500 trees, the peer arm's forest);
4. every model is scored on valid and test with the harness's metrics (``score_predictions``).

The forests on ``pooled`` and ECFP4 use scikit-learn's defaults, as the RF-ECFP4 peer; on
``moments`` (about 30,000 features at the defaults) they split on sqrt(n_features) features,
which keeps a fit in minutes (recorded in the file). One JSON per (endpoint, seed):
``benchmarks/results/embedder/<run>/<endpoint>/seed<s>.json``, ``<run>`` = ``tuned`` (the
protocol) or, for shortened runs, ``tuned@max_epochs=M,limit=N`` (never shown by the report).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from . import _common as C
from .peers import RF_TREES, fit_per_task
from .protocols import ENDPOINTS, by_size, get_protocol, resolve_endpoints

SCHEMA = "gmnet-embedder-features/1"
PROTOCOL = "tuned"
FEATURES = ("pooled", "moments")
#: The forests' split features per feature set (None: scikit-learn's default, as the RF-ECFP4 peer).
RF_MAX_FEATURES = {"pooled": None, "head": None, "moments": "sqrt", "ecfp4": None}


def run_id(protocol: str = PROTOCOL, max_epochs: Optional[int] = None, limit: Optional[int] = None) -> str:
    return C.protocol_id(get_protocol(protocol), max_epochs=max_epochs, limit=limit)


def result_path(results_dir, run: str, endpoint: str, seed: int) -> Path:
    return Path(results_dir) / "embedder" / run / endpoint / f"seed{seed}.json"


# ------------------------------------------------------------------------------------------
# Per-task models
# ------------------------------------------------------------------------------------------
def forest(task_type: str, seed: int, n_jobs: int, max_features=None) -> Callable[[], object]:
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if task_type == "classification" else RandomForestRegressor
    extra = {} if max_features is None else {"max_features": max_features}
    return lambda: cls(n_estimators=RF_TREES, random_state=seed, n_jobs=n_jobs, **extra)


def linear(task_type: str, seed: int, n_jobs: int) -> Callable[[], object]:
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if task_type == "classification":
        return lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    return lambda: make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-2, 4, 13)))


def predict_per_task(task_type: str, models: Sequence[object], X: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Regression values (fit space) or positive-class probabilities, shaped as ``like``'s tasks."""
    cols = []
    for m in models:
        if isinstance(m, float):
            cols.append(np.full(len(X), m))
        elif task_type == "classification":
            cols.append(m.predict_proba(X)[:, list(m.classes_).index(1)])
        else:
            cols.append(m.predict(X))
    pred = np.stack(cols, axis=1)
    return pred[:, 0] if np.asarray(like).ndim == 1 else pred


def _describe(model) -> Dict[str, object]:
    """The model's class and parameters (a pipeline: its steps and its last step's)."""
    if isinstance(model, float):
        return {"constant": model}
    out: Dict[str, object] = {}
    if hasattr(model, "steps"):
        out["steps"] = [type(step).__name__ for _, step in model.steps]
        model = model.steps[-1][1]
    out.update(estimator=type(model).__name__, params=C.jsonable(model.get_params(deep=False)))
    if hasattr(model, "alpha_"):  # RidgeCV's choice (first task)
        out["alpha_chosen"] = float(model.alpha_)
    return out


# ------------------------------------------------------------------------------------------
# One (endpoint, seed)
# ------------------------------------------------------------------------------------------
def run_one(data: C.EndpointData, seed: int, *, vocab_file: str, features: Sequence[str], device: str = "auto",
            max_epochs: Optional[int] = None, threads: int = 1, command: str = "", protocol: str = PROTOCOL,
            run: Optional[str] = None) -> dict:
    from gmnet_sklearn.embedder import GMNetEmbedder
    from gmnet_sklearn.fingerprints import MorganFingerprint

    endpoint = data.endpoint
    task_type = endpoint.task_type
    run = run or run_id(protocol, max_epochs)
    t0 = time.perf_counter()
    est = C.make_estimator(get_protocol(protocol), "gmnet", endpoint, seed, vocab_file=vocab_file, device=device,
                           max_epochs=max_epochs)
    est.fit(data.X_train, data.to_fit(data.y_train), X_valid=data.X_valid, y_valid=data.to_fit(data.y_valid))
    fit_s = time.perf_counter() - t0
    models: Dict[str, dict] = {"gmnet": {
        "valid": C.score(endpoint, est, data.X_valid, data.y_valid, data),
        "test": C.score(endpoint, est, data.X_test, data.y_test, data),
        "fit_seconds": fit_s, "best_epoch": int(est.best_epoch_), "n_epochs": len(est.history_)}}

    parts = ("train", "valid", "test")
    feature_sets: Dict[str, Dict[str, np.ndarray]] = {}
    featurize_s: Dict[str, float] = {}
    for name in features:
        t = time.perf_counter()
        embedder = GMNetEmbedder(est, features=name, prefit=True).fit(data.X_train)
        feature_sets[name] = {p: embedder.transform(getattr(data, f"X_{p}")) for p in parts}
        featurize_s[name] = time.perf_counter() - t
    t = time.perf_counter()
    ecfp = MorganFingerprint(radius=2, n_bits=2048).fit(data.X_train)
    feature_sets["ecfp4"] = {p: ecfp.transform(getattr(data, f"X_{p}")) for p in parts}
    featurize_s["ecfp4"] = time.perf_counter() - t

    y_fit = data.to_fit(data.y_train)
    heads = [(f"rf_{name}", name, forest(task_type, seed, threads, RF_MAX_FEATURES.get(name))) for name in features]
    heads += [(f"ridge_{name}", name, linear(task_type, seed, threads)) for name in features]
    heads.append(("rf_ecfp4", "ecfp4", forest(task_type, seed, threads, RF_MAX_FEATURES["ecfp4"])))
    for label, name, make in heads:
        X = feature_sets[name]
        t = time.perf_counter()
        fitted = fit_per_task(task_type, make, X["train"], y_fit)
        fit_one = time.perf_counter() - t
        models[label] = {
            "features": name, "n_features": int(X["train"].shape[1]),
            "valid": C.score_predictions(endpoint, predict_per_task(task_type, fitted, X["valid"], data.y_valid),
                                         data.y_valid, data),
            "test": C.score_predictions(endpoint, predict_per_task(task_type, fitted, X["test"], data.y_test),
                                        data.y_test, data),
            "fit_seconds": fit_one, "model": _describe(next((m for m in fitted if not isinstance(m, float)), 0.0)),
        }
    for entry in models.values():  # (value, per-task) pairs as record fields
        for split in ("valid", "test"):
            value, per_task = entry.pop(split)
            entry[f"{split}_metric"], entry[f"{split}_per_task"] = value, per_task
    return {
        "schema": SCHEMA,
        "source": "benchmarks.embedder_features",
        "endpoint": endpoint.name,
        "endpoint_label": endpoint.label,
        "task_type": task_type,
        "tasks": data.target_names,
        "metric": endpoint.metric,
        "higher_is_better": endpoint.higher_is_better,
        "run": run,
        "protocol_base": protocol,
        "seed": seed,
        "estimator": type(est).__name__,
        "hyperparameters": C.estimator_params_record(est),
        "embedder": {"features": list(features), "member": 0, "moments": "mean", "layers": "all"},
        "rf_max_features": {k: RF_MAX_FEATURES.get(k) for k in (*features, "ecfp4")},
        "models": models,
        "sizes": {**data.sizes, "split_sha256": data.split_sha256},
        "wall_time_s": {"data_prep": data.prep_seconds, "gmnet_fit": fit_s, "featurize": featurize_s,
                        "total": data.prep_seconds + (time.perf_counter() - t0)},
        "hardware": C.hardware_info(getattr(est, "device_", "cpu")),
        "versions": C.versions(),
        "git": C._GIT_AT_START if C._GIT_AT_START is not None else C.git_info(),
        "command": command,
        "timestamp_utc": C.utc_now(),
    }


def summary_line(rec: dict) -> str:
    cells = ", ".join(f"{name} {C.fmt_metric(m['test_metric'], rec['metric'])}" for name, m in rec["models"].items())
    return f"[{rec['run']}] {rec['endpoint']} seed{rec['seed']}: test {rec['metric']}: {cells}"


def load_records(results_dir) -> List[dict]:
    """Every record of this benchmark under ``<results>/embedder/``."""
    out = []
    for path in sorted((Path(results_dir) / "embedder").glob("*/*/*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA:
            rec["_path"] = path
            out.append(rec)
    return out


def stale_record(path: Path, est, features: Sequence[str]) -> Optional[str]:
    """Why the record at ``path`` is not this run's (other estimator parameters, e.g. the library
    defaults "tuned" follows changed since, or other features), or None: what ``--resume`` may
    keep. The run id in the path holds only the protocol's name, epochs and row limit."""
    rec = json.loads(path.read_text())
    differ = C.params_differ(rec.get("hyperparameters", {}), C.estimator_params_record(est))
    if differ is not None:
        return "other estimator parameters: " + differ
    if sorted(rec.get("embedder", {}).get("features") or []) != sorted(features):  # (the order changes nothing)
        return f"other features {rec.get('embedder', {}).get('features')} (now {list(features)})"
    return None


# ------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.embedder_features", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoints", nargs="+", default=["table1"], help="endpoint names, or table1 / extras / all")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--protocol", default=PROTOCOL, help="the estimator's protocol (default tuned: the library's "
                   "defaults; smoke: a tiny model for tests)")
    p.add_argument("--features", nargs="+", default=list(FEATURES), choices=("pooled", "head", "moments"))
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch threads and the forests' n_jobs (default 1 for RF)")
    p.add_argument("--max-epochs", type=int, default=None, help="shorten the estimator's training (a test run)")
    p.add_argument("--limit", type=int, default=None, help="first N rows of each file only (a test run)")
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--resume", action="store_true", help="skip (endpoint, seed) pairs whose JSON exists")
    p.add_argument("--data-home", default=None)
    p.add_argument("--vocab-file", default=None)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    with C.git_at_start():
        return _main(list(sys.argv[1:] if argv is None else argv))


def _main(argv: List[str]) -> int:
    args = build_parser().parse_args(argv)
    C.set_threads(args.threads)
    vocab_file = C.resolve_vocab_file(args.vocab_file)
    data_home = C.resolve_data_home(args.data_home)
    run = run_id(args.protocol, args.max_epochs, args.limit)
    command = C.command_line("benchmarks.embedder_features", argv)
    failures = 0
    for name in by_size(resolve_endpoints(args.endpoints)):
        data = None
        for seed in args.seeds:
            path = result_path(args.results_dir, run, name, seed)
            if args.resume and path.is_file():
                stale = stale_record(path, C.make_estimator(get_protocol(args.protocol), "gmnet", ENDPOINTS[name], seed,
                                                            vocab_file=vocab_file, device=args.device,
                                                            max_epochs=args.max_epochs), args.features)
                if stale is None:
                    C.eprint(f"skip {path} (exists)")
                    continue
                C.eprint(f"redo {path}: {stale}")
            try:
                if data is None:
                    data = C.load_endpoint(ENDPOINTS[name], data_home=data_home, limit=args.limit)
                rec = run_one(data, seed, vocab_file=vocab_file, features=args.features, device=args.device,
                              max_epochs=args.max_epochs, threads=args.threads or 1, command=command,
                              protocol=args.protocol, run=run)
            except Exception:  # one failed run must not stop the others
                failures += 1
                C.eprint(f"FAILED {name} seed{seed}:\n{traceback.format_exc()}")
                continue
            C.write_json_atomic(path, rec)
            print(summary_line(rec), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
