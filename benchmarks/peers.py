"""Peer arms: what a chemist would pick instead of a transformer, on exactly our splits.

- ``rf_ecfp``: scikit-learn random forest (500 trees) on RDKit Morgan fingerprints, radius 2,
  2048 bits (ECFP4-like, ``rdFingerprintGenerator.GetMorganGenerator``). Multi-task endpoints get
  one forest per task, fitted on the rows where that task is labelled.
- ``chemprop``: Chemprop v2 (a directed message-passing network) with its own defaults, through
  its command line (``chemprop train`` on our train/valid/test CSV files, ``chemprop predict``
  with the best-validation model on valid and test). Chemprop pins an older RDKit than ours, and
  our scaffold split rests on RDKit's canonical SMILES, so it lives in its own virtual
  environment (``.venv-chemprop``, see DEVELOPERS.md) and is run as a subprocess.

Both take the data from :func:`benchmarks._common.load_endpoint` (the DeepChem scaffold split the
transformer arms use, ``split_sha256`` in every record), train clearance on log(y + 1) and score
every endpoint with the library's metrics in original units, as the transformer arms. Neither is
tuned: each runs with its own defaults. Records go to
``benchmarks/results/peers/<arm>/<endpoint>/seed<s>.json`` (protocol ``peers``) in the schema the
report reads. Runs go through the one front door::

    python -m benchmarks.run --arm rf_ecfp chemprop --endpoints table1 --seeds 0 1 2 --threads 1 --resume
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _common as C

PEER_ARMS: Tuple[str, ...] = ("rf_ecfp", "chemprop")
PEER_ARM_LABELS: Mapping[str, str] = MappingProxyType({"rf_ecfp": "RF-ECFP4", "chemprop": "Chemprop"})
PEER_PROTOCOL = "peers"
PEER_SEEDS: Tuple[int, ...] = (0, 1, 2)

FP_RADIUS = 2
FP_BITS = 2048
RF_TREES = 500
CHEMPROP_VERSION = "2.3.1"  # the version pinned by the `peers` extra of pyproject.toml

PEER_DESCRIPTION = (
    "Peer arms, each with its own defaults (not tuned): rf_ecfp = scikit-learn RandomForest"
    f"{{Regressor,Classifier}}(n_estimators={RF_TREES}, random_state=seed) on RDKit Morgan fingerprints "
    f"(radius {FP_RADIUS}, {FP_BITS} bits), one forest per task on its labelled rows; chemprop = Chemprop v2 CLI "
    "defaults (chemprop train with only data paths, columns, task type, seeds, output folder, "
    "--num-workers 0 and --accelerator cpu; the best-validation model predicts valid and test). "
    "Same DeepChem scaffold split as the transformer arms (split_sha256), clearance trained on "
    "log(y+1), every metric in original units."
)


def peer_protocol_definition() -> Dict[str, object]:
    return {
        "name": PEER_PROTOCOL,
        "description": PEER_DESCRIPTION,
        "seeds": list(PEER_SEEDS),
        "rf_ecfp": {"fingerprint": morgan_spec(), "n_estimators": RF_TREES, "one_forest_per_task": True},
        "chemprop": {"version": CHEMPROP_VERSION, "defaults": True, "interface": "CLI"},
    }


def peer_protocol_id(limit: Optional[int] = None) -> str:
    """``peers``, or ``peers@limit=N`` for runs on the first N rows (never among the full runs)."""
    return PEER_PROTOCOL + (f"@limit={limit}" if limit is not None else "")


def peer_result_path(results_dir, arm: str, endpoint: str, seed: int, limit: Optional[int] = None) -> Path:
    return C.result_path(results_dir, peer_protocol_id(limit), arm, endpoint, seed)


# ------------------------------------------------------------------------------------------
# Fingerprints and the random forest
# ------------------------------------------------------------------------------------------
def morgan_spec() -> Dict[str, object]:
    return {"kind": "Morgan (ECFP4-like), rdFingerprintGenerator.GetMorganGenerator", "radius": FP_RADIUS,
            "fpSize": FP_BITS, "bits": "binary (GetFingerprintAsNumPy)"}


def morgan_fingerprints(smiles: Sequence[str]) -> Tuple[np.ndarray, int]:
    """(n, 2048) uint8 bit matrix and the number of SMILES RDKit could not parse (their rows are
    all zero)."""
    from rdkit import Chem, rdBase
    from rdkit.Chem import rdFingerprintGenerator

    gen = rdFingerprintGenerator.GetMorganGenerator(radius=FP_RADIUS, fpSize=FP_BITS)
    out = np.zeros((len(smiles), FP_BITS), dtype=np.uint8)
    invalid = 0
    # RDKit's log is blocked, then restored as it was.
    with rdBase.BlockLogs():
        for i, s in enumerate(smiles):
            mol = Chem.MolFromSmiles(s) if isinstance(s, str) else None
            if mol is None:
                invalid += 1
                continue
            out[i] = gen.GetFingerprintAsNumPy(mol)
    return out, invalid


def _tasks(y: np.ndarray) -> np.ndarray:
    return np.asarray(y, dtype=np.float64).reshape(len(y), -1)


def fit_per_task(task_type: str, make: Callable[[], object], X: np.ndarray, y: np.ndarray) -> List[object]:
    """One model per task (column of ``y``) on its labelled rows; a classification task with one
    class in those rows is that constant (as the RF-ECFP4 peer)."""
    models: List[object] = []
    for col in np.asarray(y, dtype=np.float64).reshape(len(y), -1).T:
        obs = ~np.isnan(col)
        if not obs.any():
            raise ValueError("a task has no labelled training row")
        if task_type == "classification":
            classes = np.unique(col[obs])
            if len(classes) < 2:
                models.append(float(classes[0]))
                continue
            models.append(make().fit(X[obs], col[obs].astype(int)))
        else:
            models.append(make().fit(X[obs], col[obs]))
    return models


def fit_rf(task_type: str, X: np.ndarray, y: np.ndarray, seed: int, n_jobs: int = 1) -> List[object]:
    """One forest per task (column of ``y``), each on the rows where its label is present
    (:func:`fit_per_task`)."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    forest = RandomForestClassifier if task_type == "classification" else RandomForestRegressor
    return fit_per_task(task_type, lambda: forest(n_estimators=RF_TREES, random_state=seed, n_jobs=n_jobs), X, y)


def predict_rf(task_type: str, models: Sequence[object], X: np.ndarray) -> np.ndarray:
    """(n, tasks): regression predictions, or the probability of the positive class."""
    cols = []
    for m in models:
        if isinstance(m, float):
            cols.append(np.full(len(X), m))
        elif task_type == "classification":
            cols.append(m.predict_proba(X)[:, list(m.classes_).index(1)])
        else:
            cols.append(m.predict(X))
    return np.stack(cols, axis=1)


def _squeeze_like(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    return pred[:, 0] if np.asarray(y).ndim == 1 else pred


def run_rf(data: C.EndpointData, seed: int, threads: int = 1) -> Dict[str, object]:
    """Fingerprint, fit and predict one (endpoint, seed): predictions (fit space for regression),
    timings and what the record says about the model."""
    t0 = time.perf_counter()
    fps, invalid = {}, {}
    for part in ("train", "valid", "test"):
        fps[part], invalid[part] = morgan_fingerprints(getattr(data, f"X_{part}"))
    featurize_s = time.perf_counter() - t0
    task_type = data.endpoint.task_type
    t1 = time.perf_counter()
    models = fit_rf(task_type, fps["train"], data.to_fit(data.y_train), seed, n_jobs=threads)
    fit_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    preds = {part: _squeeze_like(predict_rf(task_type, models, fps[part]), data.y_train) for part in ("valid", "test")}
    predict_s = time.perf_counter() - t2
    forest = next((m for m in models if not isinstance(m, float)), None)
    params = forest.get_params() if forest is not None else {"n_estimators": RF_TREES, "random_state": seed}
    warnings = []
    if sum(invalid.values()):
        warnings.append(f"{sum(invalid.values())} SMILES RDKit could not parse got all-zero fingerprints ({invalid})")
    constant = [data.target_names[j] for j, m in enumerate(models) if isinstance(m, float)]
    if constant:
        warnings.append(f"one class only in the labelled training rows of {constant}: predicted as that constant")
    return {
        "valid_pred": preds["valid"], "test_pred": preds["test"],
        "estimator": type(forest).__name__ if forest is not None else "constant",
        "hyperparameters": {k: v for k, v in params.items()},
        "n_models": len(models),
        "wall": {"featurize": featurize_s, "fit": fit_s, "predict": predict_s},
        "peer": {"fingerprint": morgan_spec(), "invalid_smiles": invalid,
                 "n_forests": sum(not isinstance(m, float) for m in models), "constant_tasks": constant,
                 "n_jobs": threads},
        "warnings": warnings,
        "n_epochs": None, "best_epoch": None, "valid_curve": [], "selection_metric": None,
    }


# ------------------------------------------------------------------------------------------
# Chemprop (its own virtual environment, through its CLI)
# ------------------------------------------------------------------------------------------
class ChempropNotFound(RuntimeError):
    """No Chemprop executable: the chemprop arm cannot run here."""


#: A ``chemprop`` command that runs longer is stopped (a hung process would hold the whole run):
#: far above the longest fit measured (Lipophilicity, minutes on one thread).
CHEMPROP_TIMEOUT_S = 6 * 3600


def resolve_chemprop_bin(explicit: Optional[str] = None) -> str:
    """``--chemprop-bin``, else ``GMNET_CHEMPROP_BIN``, else ``.venv-chemprop/bin/chemprop`` in the
    checkout when present, else ``chemprop`` on PATH."""
    for cand, where in ((explicit, "--chemprop-bin"), (os.environ.get("GMNET_CHEMPROP_BIN"), "GMNET_CHEMPROP_BIN")):
        if cand:
            path = shutil.which(cand) if os.sep not in cand else (cand if os.access(cand, os.X_OK) else None)
            if not path:
                raise ChempropNotFound(f"{where} names {cand!r}, which is not an executable")
            return str(Path(path).absolute())
    local = C.REPO / ".venv-chemprop" / "bin" / "chemprop"
    if os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("chemprop")
    if found:
        return str(Path(found).absolute())
    raise ChempropNotFound(
        "no Chemprop executable: pass --chemprop-bin, set GMNET_CHEMPROP_BIN, or install Chemprop "
        f"{CHEMPROP_VERSION} in its own venv at {local.parent.parent} (DEVELOPERS.md, 'Peer arms')")


@functools.lru_cache(maxsize=None)
def chemprop_env(chemprop_bin: str) -> Dict[str, Optional[str]]:
    """Versions in Chemprop's environment (its own Python next to the executable)."""
    py = Path(chemprop_bin).parent / "python"
    code = ("import json, platform, chemprop, rdkit, torch\n"
            "try:\n import lightning; lv = lightning.__version__\nexcept Exception: lv = None\n"
            "print(json.dumps({'python': platform.python_version(), 'chemprop': chemprop.__version__, "
            "'rdkit': rdkit.__version__, 'torch': torch.__version__, 'lightning': lv}))")
    out: Dict[str, Optional[str]] = {"executable": chemprop_bin, "python_executable": str(py) if py.exists() else None}
    try:
        if py.exists():
            r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=300, env=_clean_env(1))
            if r.returncode == 0:
                out.update(json.loads(r.stdout.strip().splitlines()[-1]))
                return out
        r = subprocess.run([chemprop_bin, "--version"], capture_output=True, text=True, timeout=300, env=_clean_env(1))
        m = re.search(r"(\d+\.\d+\.\d+)", r.stdout + r.stderr)
        out["chemprop"] = m.group(1) if m else None
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return out


def _clean_env(threads: int) -> Dict[str, str]:
    """The subprocess environment: this one without PYTHONPATH / PYTHONHOME (Chemprop's venv must
    not see our packages), with its thread counts set."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(threads)
    return env


def _write_csv(path: Path, smiles, y: Optional[np.ndarray], columns: Sequence[str]) -> None:
    import pandas as pd

    df = pd.DataFrame({"smiles": list(smiles)})
    if y is not None:
        y2 = _tasks(y)
        for j, c in enumerate(columns):
            df[c] = y2[:, j]
    df.to_csv(path, index=False)


def _run(cmd: List[str], cwd: Path, log: Path, threads: int, timeout: Optional[float]) -> float:
    t0 = time.perf_counter()
    with open(log, "ab") as fh:
        fh.write(("$ " + shlex.join(cmd) + "\n").encode())
        fh.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=_clean_env(threads), timeout=timeout)
    if r.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise RuntimeError(f"{shlex.join(cmd[:2])} exited with {r.returncode}:\n" + "\n".join(tail))
    return time.perf_counter() - t0


def _read_config(path: Path) -> Dict[str, str]:
    """The settings ``chemprop train`` saved (``key = value`` lines of its config.toml, which is
    ConfigArgParse's format rather than strict TOML), values as written."""
    out: Dict[str, str] = {}
    try:
        for line in path.read_text().splitlines():
            key, sep, value = line.partition(" = ")
            if sep and not line.lstrip().startswith("#"):
                out[key.strip()] = value.strip()
    except OSError:
        pass
    return out


def _chemprop_curve(model_dir: Path) -> Tuple[List[Optional[float]], Optional[int]]:
    """Per-epoch val_loss from Lightning's metrics.csv, and the best epoch (1-based) from the
    checkpoint Chemprop kept (``best-epoch=<0-based>-val_loss=...``)."""
    import pandas as pd

    curve: List[Optional[float]] = []
    logs = sorted(model_dir.glob("trainer_logs/version_*/metrics.csv"))
    if logs:
        df = pd.read_csv(logs[-1])
        if "val_loss" in df:
            v = df.dropna(subset=["val_loss"]).groupby("epoch")["val_loss"].last()
            curve = [float(x) for x in v.sort_index().tolist()]
    best = None
    for ck in model_dir.glob("checkpoints/best-epoch=*"):
        m = re.match(r"best-epoch=(\d+)", ck.name)
        if m:
            best = int(m.group(1)) + 1
    return curve, best


def run_chemprop(data: C.EndpointData, seed: int, threads: int = 1, chemprop_bin: Optional[str] = None,
                 workdir: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, object]:
    """``chemprop train`` on our split (CSV files in a temporary folder), ``chemprop predict`` on
    valid and test with its best-validation model; predictions in fit space."""
    import pandas as pd

    exe = resolve_chemprop_bin(chemprop_bin)
    env_info = chemprop_env(exe)
    ep = data.endpoint
    cols = [f"task_{j}" for j in range(_tasks(data.y_train).shape[1])]
    task = "classification" if ep.task_type == "classification" else "regression"
    with tempfile.TemporaryDirectory(prefix="gmnet-chemprop-", dir=workdir) as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        for part in ("train", "valid", "test"):
            _write_csv(tmp / f"{part}.csv", getattr(data, f"X_{part}"), data.to_fit(getattr(data, f"y_{part}")), cols)
            _write_csv(tmp / f"{part}_smiles.csv", getattr(data, f"X_{part}"), None, cols)
        prep_s = time.perf_counter() - t0
        log = tmp / "chemprop.log"
        train_cmd = [exe, "train", "--data-path", "train.csv", "valid.csv", "test.csv", "--smiles-columns", "smiles",
                     "--target-columns", *cols, "--task-type", task, "--data-seed", str(seed),
                     "--pytorch-seed", str(seed), "--output-dir", "out", "--num-workers", "0", "--accelerator", "cpu"]
        fit_s = _run(train_cmd, tmp, log, threads, timeout)
        model = tmp / "out" / "model_0" / "best.pt"
        if not model.is_file():
            raise RuntimeError(f"chemprop train left no {model.relative_to(tmp)}")
        curve, best = _chemprop_curve(model.parent)
        trained_sizes = _chemprop_split_sizes(tmp)
        expected = [len(data.X_train), len(data.X_valid), len(data.X_test)]
        if trained_sizes is not None and trained_sizes != expected:  # its RDKit dropped rows of our split
            raise RuntimeError(f"chemprop train used {trained_sizes} train/valid/test rows of our split's {expected}")
        preds, predict_s, cmds = {}, 0.0, [train_cmd]
        for part in ("valid", "test"):
            cmd = [exe, "predict", "--test-path", f"{part}_smiles.csv", "--smiles-columns", "smiles",
                   "--model-paths", "out/model_0/best.pt", "--output", f"pred_{part}.csv",
                   "--num-workers", "0", "--accelerator", "cpu"]
            predict_s += _run(cmd, tmp, log, threads, timeout)
            cmds.append(cmd)
            df = pd.read_csv(tmp / f"pred_{part}.csv")
            X = getattr(data, f"X_{part}")
            if len(df) != len(X) or list(df["smiles"].astype(str)) != [str(s) for s in X]:
                raise RuntimeError(f"chemprop predict returned rows that do not match the {part} split")
            preds[part] = _squeeze_like(df[cols].to_numpy(dtype=np.float64), data.y_train)
        config = _read_config(tmp / "out" / "config.toml")
        n_params = None
        m = re.search(r"Trainable params:\s*([\d.]+\s*[KMG]?)", log.read_text(errors="replace"))
        if m:
            n_params = m.group(1).replace(" ", "")
    exe_shown = _display_path(exe)
    return {
        "valid_pred": preds["valid"], "test_pred": preds["test"],
        "estimator": "chemprop MPNN (CLI)",
        "hyperparameters": {k: v for k, v in config.items() if k not in ("data-path", "output-dir")},
        "wall": {"write_csv": prep_s, "fit": fit_s, "predict": predict_s},
        "peer": {"chemprop_env": dict(env_info), "task_columns": dict(zip(cols, data.target_names)),
                 "commands": [shlex.join([exe_shown, *c[1:]]) for c in cmds], "threads": threads,
                 "trainable_params_reported": n_params,
                 # the sizes its log reports it trained and validated on (None: no such line found)
                 "chemprop_split_sizes": trained_sizes,
                 "note": "fit = wall time of `chemprop train` (process start, featurisation, training, "
                         "its own test evaluation); predictions from `chemprop predict` with best.pt"},
        "warnings": [],
        "n_epochs": len(curve) or None, "best_epoch": best, "valid_curve": curve,
        "selection_metric": "chemprop val_loss (its default tracking metric: its training loss on the valid split, "
                            "regression targets scaled)",
    }


def _chemprop_split_sizes(workdir: Path) -> Optional[List[int]]:
    """The train/valid/test sizes ``chemprop train`` logs (``train/val/test split_0 sizes: [a, b, c]``,
    Chemprop 2's ``split_data_by_indices``), from its output or the log files it writes under the
    working folder; None when no log holds the line."""
    pattern = re.compile(r"train/val/test split_0 sizes: \[(\d+), (\d+), (\d+)\]")
    for log in sorted(workdir.rglob("*.log")):
        m = pattern.search(log.read_text(errors="replace"))
        if m:
            return [int(g) for g in m.groups()]
    return None


def _display_path(p: str) -> str:
    try:
        return os.path.relpath(p, C.REPO) if Path(p).resolve().is_relative_to(C.REPO) else p
    except (ValueError, OSError):
        return p


# ------------------------------------------------------------------------------------------
# One run -> one record
# ------------------------------------------------------------------------------------------
def run_peer(arm: str, data: C.EndpointData, seed: int, *, threads: int = 1, command: str,
             limit: Optional[int] = None, chemprop_bin: Optional[str] = None) -> Dict[str, object]:
    """Fit, predict and score one (peer arm, endpoint, seed); the result record."""
    if arm == "rf_ecfp":
        out = run_rf(data, seed, threads)
    elif arm == "chemprop":
        out = run_chemprop(data, seed, threads, chemprop_bin, timeout=CHEMPROP_TIMEOUT_S)
    else:
        raise ValueError(f"unknown peer arm {arm!r}; choose from {PEER_ARMS}")
    t0 = time.perf_counter()
    valid = C.score_predictions(data.endpoint, out["valid_pred"], data.y_valid, data)
    test = C.score_predictions(data.endpoint, out["test_pred"], data.y_test, data)
    score_s = time.perf_counter() - t0
    wall = {**out["wall"], "data_prep": data.prep_seconds, "score": score_s}
    wall["total"] = float(sum(v for v in wall.values()))
    return build_peer_record(arm=arm, data=data, seed=seed, out=out, valid=valid, test=test, wall=wall,
                             threads=threads, command=command, limit=limit)


def build_peer_record(*, arm, data: C.EndpointData, seed: int, out: Dict[str, object], valid, test,
                      wall: Dict[str, float], threads: int, command: str, limit: Optional[int]) -> Dict[str, object]:
    endpoint = data.endpoint
    hardware = C.hardware_info("cpu")
    hardware["torch_threads"] = threads  # the threads the peer ran with (RF n_jobs, Chemprop's OMP threads)
    hardware.pop("gmnet_path", None)
    versions = C.versions()
    peer = dict(out["peer"])
    if arm == "chemprop":
        env = peer.get("chemprop_env") or {}
        versions["chemprop"] = env.get("chemprop")
        versions["chemprop_env"] = {k: env.get(k) for k in ("python", "chemprop", "rdkit", "torch", "lightning")}
    peer["description"] = ("each peer runs with its own defaults (not tuned); "
                           + ("RF on Morgan r=2 2048-bit fingerprints" if arm == "rf_ecfp" else "Chemprop v2 CLI defaults"))
    return {
        "schema": C.RESULT_SCHEMA,
        "source": "benchmarks.run (peers)",
        "arm": arm,
        "arm_label": PEER_ARM_LABELS[arm],
        "estimator": out["estimator"],
        "endpoint": endpoint.name,
        "endpoint_label": endpoint.label,
        "dataset": endpoint.dataset,
        "task_type": endpoint.task_type,
        "tasks": data.target_names,
        "target_transform": endpoint.target_transform,
        "units": endpoint.units,
        "protocol": peer_protocol_id(limit),
        "protocol_base": PEER_PROTOCOL,
        "protocol_overrides": {"limit": limit} if limit is not None else {},
        "protocol_definition": peer_protocol_definition(),
        "hyperparameters": out["hyperparameters"],
        "seed": seed,
        "k": None,
        "L": None,
        "n_parameters": None,
        "metric": endpoint.metric,
        "higher_is_better": endpoint.higher_is_better,
        "valid_metric": valid[0],
        "test_metric": test[0],
        "valid_per_task": valid[1],
        "test_per_task": test[1],
        "best_epoch": out["best_epoch"],
        "n_epochs": out["n_epochs"],
        "selection_metric": out["selection_metric"],
        "valid_curve": out["valid_curve"],
        "sizes": {**data.sizes, "file_rows": data.n_rows_file, "rows_used": data.n_rows_used,
                  "split_before_label_drop": data.split_sizes, "dropped_missing_label": data.dropped_missing_label,
                  "whitespace_stripped": data.n_whitespace_stripped, "split_sha256": data.split_sha256,
                  **C.invalid_smiles_entry(data)},
        "data_path": data.data_path,
        "wall_time_s": {**wall, "per_epoch_mean": None, "per_epoch": []},
        "hardware": hardware,
        "versions": versions,
        "git": C._GIT_AT_START if C._GIT_AT_START is not None else C.git_info(),
        "warnings": out["warnings"],
        "command": command,
        "sweep_workers": None,
        "resumed": None,
        "peer": peer,
        "cwd": os.getcwd(),
        "timestamp_utc": C.utc_now(),
    }


def summary_line(rec: Dict[str, object]) -> str:
    w = rec["wall_time_s"]
    ep = f", {rec['n_epochs']} epochs (best {rec['best_epoch']})" if rec.get("n_epochs") else ""
    return (f"[{rec['protocol']}] {rec['arm']} {rec['endpoint']} seed{rec['seed']}: "
            f"test {rec['metric']} {C.fmt_metric(rec['test_metric'], rec['metric'])}, "
            f"valid {C.fmt_metric(rec['valid_metric'], rec['metric'])}, "
            f"n {rec['sizes']['train']}/{rec['sizes']['valid']}/{rec['sizes']['test']}{ep}, "
            f"fit {w['fit']:.1f} s, total {w['total']:.1f} s, {rec['hardware']['torch_threads']} thread(s)")
