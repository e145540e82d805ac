"""Shared machinery of ``benchmarks.run`` and ``benchmarks.ablation``: data, estimators,
scoring, environment capture and the result-file format (one JSON per run)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from gmnet_sklearn.estimators.presets import PAPER_TRAINING

from .protocols import ARMS, ENDPOINTS, PROTOCOLS, Endpoint, Protocol

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DEFAULT_RESULTS_DIR = REPO / "benchmarks" / "results"
RESULT_SCHEMA = "gmnet-benchmark-result/1"
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
MAX_SMILES_LENGTH = 200


# ------------------------------------------------------------------------------------------
# Paths
# ------------------------------------------------------------------------------------------
def protocol_id(protocol: Protocol, max_epochs: Optional[int] = None, limit: Optional[int] = None) -> str:
    """Name of the results folder: the protocol's name, plus the command-line overrides that
    change its meaning (so a shortened run never lands among, or is resumed as, full runs)."""
    tags = []
    if max_epochs is not None and max_epochs != protocol.training.get("max_epochs"):
        tags.append(f"max_epochs={max_epochs}")
    if limit is not None:
        tags.append(f"limit={limit}")
    return protocol.name + ("@" + ",".join(tags) if tags else "")


def result_path(results_dir, protocol_name: str, arm: str, endpoint: str, seed: int,
                k: Optional[int] = None, L: Optional[int] = None) -> Path:
    """``<results>/<protocol>/<arm>/<endpoint>/seed<s>[_k<k>_L<L>].json`` (k, L for gmnet only)."""
    name = f"seed{seed}" + (f"_k{k}_L{L}" if arm == "gmnet" else "") + ".json"
    return Path(results_dir) / protocol_name / arm / endpoint / name


def add_matmul_precision_argument(parser) -> None:
    """``--matmul-precision`` of the throughput commands (``apply_matmul_precision`` uses it)."""
    parser.add_argument("--matmul-precision", choices=("highest", "high"), default="highest",
                        help="torch.set_float32_matmul_precision for the whole run, every model: 'high' lets torch's "
                             "float32 matmuls and the fused Triton kernels' dots use TF32 tensor cores (recorded)")


def apply_matmul_precision(args, record: dict) -> None:
    """Set ``args.matmul_precision`` for the process and note it in ``record`` when it is not the
    default (so earlier records, all at the default, read the same)."""
    import torch

    torch.set_float32_matmul_precision(args.matmul_precision)
    if args.matmul_precision != "highest":
        record["matmul_precision"] = args.matmul_precision


def resolve_data_home(data_home=None) -> Optional[str]:
    """``--data-home``, else ``GMNET_DATA`` (read by the loader itself), else the project's
    ``../shared/data/moleculenet`` when it exists."""
    if data_home:
        return str(data_home)
    if os.environ.get("GMNET_DATA"):
        return None
    cand = SHARED / "data" / "moleculenet"
    return str(cand) if cand.is_dir() else None


def resolve_vocab_file(vocab_file=None) -> str:
    """The DeepChem vocabulary (591 tokens): ``--vocab-file``, ``GMNET_TOKENIZER_VOCAB``,
    ``../shared/data/tokenizer/deepchem_smiles_vocab.txt`` or the package's copy (the same
    tokens). Both arms must use it."""
    from gmnet_sklearn.estimators._base import FITTED_VOCABULARY
    from gmnet_sklearn.tokenizer import DEEPCHEM_VOCAB

    if FITTED_VOCABULARY in (vocab_file, os.environ.get("GMNET_TOKENIZER_VOCAB")):
        raise ValueError(f"the harness runs both arms on DeepChem's vocabulary, not {FITTED_VOCABULARY!r} (a fitted "
                         "one): unset GMNET_TOKENIZER_VOCAB or give a vocabulary file")
    for cand in (vocab_file, os.environ.get("GMNET_TOKENIZER_VOCAB"),
                 SHARED / "data" / "tokenizer" / "deepchem_smiles_vocab.txt", DEEPCHEM_VOCAB):
        if cand and Path(cand).is_file():
            return str(Path(cand).resolve())
    raise FileNotFoundError(
        "DeepChem vocabulary file not found: pass --vocab-file, set GMNET_TOKENIZER_VOCAB, or place it at "
        f"{SHARED / 'data' / 'tokenizer' / 'deepchem_smiles_vocab.txt'}"
    )


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------
@dataclass
class EndpointData:
    """The DeepChem scaffold split of one endpoint; targets in original units."""

    endpoint: Endpoint
    X_train: np.ndarray
    y_train: np.ndarray
    X_valid: np.ndarray
    y_valid: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    target_names: List[str]
    data_path: str
    n_rows_file: int
    n_rows_used: int
    split_sizes: Dict[str, int]  # after the 200-character filter, before dropping missing labels
    dropped_missing_label: Dict[str, int] = field(default_factory=dict)
    n_whitespace_stripped: int = 0
    # Rows whose SMILES RDKit cannot parse: left out before the split, as DeepChem's loaders drop
    # the rows their featurizer fails on (file row numbers, after --limit).
    invalid_smiles_rows: List[int] = field(default_factory=list)
    prep_seconds: float = 0.0
    split_sha256: Optional[str] = None  # fingerprint of the row indices of the three splits

    @property
    def sizes(self) -> Dict[str, int]:
        return {"train": len(self.X_train), "valid": len(self.X_valid), "test": len(self.X_test)}

    def to_fit(self, y: np.ndarray) -> np.ndarray:
        """Targets as the estimator is trained on them (log(y + 1) for clearance)."""
        if self.endpoint.target_transform == "log1p":
            return np.log1p(y)
        return y

    def from_fit(self, pred: np.ndarray) -> np.ndarray:
        if self.endpoint.target_transform == "log1p":
            return np.expm1(pred)
        return pred


def load_endpoint(endpoint: Endpoint, data_home=None, limit: Optional[int] = None,
                  download: bool = False) -> EndpointData:
    """Load, scaffold-split (DeepChem-exact, 200-character filter after the split) and, for
    single-task classification, drop missing labels after the split."""
    from gmnet_sklearn.datasets import fetch_moleculenet
    from gmnet_sklearn.exceptions import InvalidSmilesWarning
    from gmnet_sklearn.model_selection import murcko_scaffold, scaffold_split

    t0 = time.perf_counter()
    # every command finds ../shared's files the same way, whether or not it resolved --data-home first
    bunch = fetch_moleculenet(endpoint.dataset, data_home=resolve_data_home(data_home), download=download)
    smiles = np.asarray(bunch.smiles, dtype=object)
    target = np.asarray(bunch.target, dtype=np.float64)
    n_file = len(smiles)
    if limit is not None:
        smiles, target = smiles[:limit], target[:limit]
    with warnings.catch_warnings():  # the rows it leaves out are counted below, into the record
        warnings.simplefilter("ignore", InvalidSmilesWarning)
        parts = scaffold_split(smiles, *SPLIT_FRACTIONS, max_smiles_length=MAX_SMILES_LENGTH)
    # The split leaves unparsable SMILES out (DeepChem's protocol); count them, never silently.
    # murcko_scaffold is None exactly for those (scaffolds are cached: no second parse).
    invalid_rows = [i for i, s in enumerate(smiles) if murcko_scaffold(s) is None]
    split_sizes = {name: int(len(idx)) for name, idx in zip(("train", "valid", "test"), parts)}
    dropped = {}
    if endpoint.drop_missing_labels:
        if target.ndim != 1:
            raise ValueError(f"{endpoint.name}: drop_missing_labels is for single-task endpoints")
        kept = []
        for name, idx in zip(("train", "valid", "test"), parts):
            keep = ~np.isnan(target[idx])
            dropped[name] = int((~keep).sum())
            kept.append(idx[keep])
        parts = tuple(kept)
    train, valid, test = parts
    # The split rests on RDKit's canonical scaffold SMILES: the fingerprint shows that runs on
    # another machine (another RDKit build) trained and scored on the same rows.
    split_sha256 = split_fingerprint(train, valid, test)
    # Some files carry SMILES with surrounding whitespace (ESOL: trailing spaces), which RDKit
    # and so the split ignore but the tokenizer rejects. The split above saw the strings as in
    # the file (DeepChem's ids, 200-character filter included); the models get them stripped.
    stripped = np.array([s.strip() if isinstance(s, str) else s for s in smiles], dtype=object)
    n_stripped = int(sum(a != b for a, b in zip(smiles[np.concatenate(parts)], stripped[np.concatenate(parts)])))
    return EndpointData(
        endpoint=endpoint,
        X_train=stripped[train], y_train=target[train],
        X_valid=stripped[valid], y_valid=target[valid],
        X_test=stripped[test], y_test=target[test],
        target_names=list(bunch.target_names),
        data_path=str(bunch.path),
        n_rows_file=n_file,
        n_rows_used=len(smiles),
        split_sizes=split_sizes,
        dropped_missing_label=dropped,
        n_whitespace_stripped=n_stripped,
        invalid_smiles_rows=invalid_rows,
        prep_seconds=time.perf_counter() - t0,
        split_sha256=split_sha256,
    )


def invalid_smiles_entry(data: EndpointData) -> Dict[str, object]:
    """The record's count (and file rows) of the SMILES RDKit cannot parse, left out before the split."""
    return {"dropped_invalid_smiles": len(data.invalid_smiles_rows), "invalid_smiles_rows": list(data.invalid_smiles_rows)}


def split_fingerprint(train, valid, test) -> str:
    """sha256 of the three index arrays, in order (row numbers of the data file)."""
    h = hashlib.sha256()
    for part in (train, valid, test):
        h.update(np.asarray(part, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


# ------------------------------------------------------------------------------------------
# Estimators and scoring
# ------------------------------------------------------------------------------------------
def estimator_class(arm: str, endpoint: Endpoint):
    from gmnet_sklearn import ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor

    table = {
        ("gmnet", "regression"): GMNetRegressor,
        ("gmnet", "classification"): GMNetClassifier,
        ("chemberta", "regression"): ChemBERTaRegressor,
        ("chemberta", "classification"): ChemBERTaClassifier,
    }
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose from {ARMS}")
    return table[arm, endpoint.task_type]


def snapshot_dir(root, protocol_name: str, arm: str, endpoint: str) -> Path:
    """Where an endpoint's training snapshots go under ``--snapshot-dir``: one file per fit,
    named by the fit's fingerprint (gmnet_sklearn.estimators.snapshot)."""
    return Path(root) / protocol_name / arm / endpoint


def make_estimator(protocol: Protocol, arm: str, endpoint: Endpoint, seed: int, *, vocab_file: str,
                   device: str = "auto", max_epochs: Optional[int] = None, k: Optional[int] = None,
                   L: Optional[int] = None, verbose: int = 0, snapshots: Optional[Path] = None,
                   data_prep_seconds: Optional[float] = None):
    """The protocol's estimator for one run; with ``snapshots`` (a folder) the fit saves a
    snapshot after every epoch and resumes from one left by an interrupted run (each part
    records its code, machine and ``data_prep_seconds``, the harness's loading before the fit)."""
    overrides = {"max_epochs": max_epochs, "random_state": seed, "vocab_file": vocab_file,
                 "device": device, "verbose": verbose}
    if snapshots is not None:
        from gmnet_sklearn.estimators._base import resolve_device
        from gmnet_sklearn.estimators.snapshot import TrainingSnapshot

        # each part of a resumed fit records the code and machine it ran on
        meta = {"git": _GIT_AT_START if _GIT_AT_START is not None else git_info(),
                "hardware": hardware_info(resolve_device(device)), "started_utc": utc_now(),
                "data_prep_s": data_prep_seconds}
        overrides["callbacks"] = [TrainingSnapshot(str(snapshots), meta=meta)]
    if arm == "gmnet":
        overrides.update(k=k, L=L)
    elif k is not None or L is not None:
        raise ValueError("k and L apply to the gmnet arm only")
    params = protocol.estimator_params(arm, endpoint.name, **overrides)
    return estimator_class(arm, endpoint)(**params)


def resumed_entry(est) -> Optional[Dict[str, object]]:
    """The record's ``resumed`` entry: None for one uninterrupted fit, else the epoch a fit
    resumed from a training snapshot went on from, each part's first epoch, code and machine, the
    epoch time of the earlier parts (``fit_seconds_before``) and their whole time: their fit calls
    to the last saved epoch (``fit_wall_seconds_before``: the fit's own data preparation, e.g.
    descriptors, included) and the harness's loading (``data_prep_seconds_before``). The epoch a
    kill cut short is lost, not counted. The two whole times are None where a part predates them."""
    info = getattr(est, "resume_info_", None)
    if not info or info.get("resumed_from_epoch") is None:
        return None
    return {"from_epoch": info["resumed_from_epoch"], "parts": info["parts"],
            "fit_seconds_before": info["fit_seconds_before"],
            "fit_wall_seconds_before": info.get("fit_wall_seconds_before"),
            "data_prep_seconds_before": _earlier_data_prep_seconds(info["parts"], getattr(est, "_fit_started", None))}


def _earlier_data_prep_seconds(parts, fit_started) -> Optional[float]:
    """The harness's loading time of each earlier fit call (one per call, whatever its members)."""
    from gmnet_sklearn.estimators.snapshot import parts_of_earlier_calls

    calls = parts_of_earlier_calls(parts, fit_started)
    if calls is None or any((p.get("meta") or {}).get("data_prep_s") is None for ps in calls.values() for p in ps):
        return None
    return float(sum(ps[-1]["meta"]["data_prep_s"] for ps in calls.values()))


def pretrained_entry(est, arm: str) -> Optional[Dict[str, object]]:
    """Which pretrained encoder a warm-started fit began from (None: random initialisation): its
    folder, the weights' SHA-256 and the pretraining's budget as its config.json records it."""
    if getattr(est, "pretrained", None) is None:
        return None
    from gmnet_sklearn.estimators.warm_start import resolve_path

    path = resolve_path(est.pretrained, arm)
    config = json.loads((path / "config.json").read_text())
    pre = config.get("training", {})
    return {"name": est.pretrained if isinstance(est.pretrained, str) else None, "path": str(path),
            "sha256": hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest(),
            **{k: pre.get(k) for k in ("steps", "epochs", "smiles_seen", "tokens_seen", "seconds")}}


def forest_entry(est, data, splits=("valid", "test"), weights: Sequence[float] = ()) -> Optional[Dict[str, object]]:
    """A ``forest=True`` fit's blend (None without a forest): the forest's weight and the metric of
    the network alone on ``splits``, so a record shows what the blend added; with ``weights``, also
    the blend's metric at each of them (``<split>_metric_by_weight``, keyed "0.0" ... "1.0"). The
    blend is linear in what is scored (values as trained on, probabilities), so the network and the
    forest predict once and each weight's blend is made from their predictions."""
    from gmnet_sklearn.forest import blend, blend_weight

    if getattr(est, "forest_", None) is None:
        return None
    entry: Dict[str, object] = {"weight": float(est.forest_weight_)}
    for split in splits:
        X, y = getattr(data, f"X_{split}"), getattr(data, f"y_{split}")
        with blend_weight(est, 0.0):
            network = predictions(data.endpoint, est, X, y)
        entry[f"network_{split}_metric"] = score_predictions(data.endpoint, network, y, data)[0]
        if weights:
            with blend_weight(est, 1.0):
                forest = predictions(data.endpoint, est, X, y)
            entry[f"{split}_metric_by_weight"] = {
                f"{w:.1f}": score_predictions(data.endpoint, blend(network, forest, w), y, data)[0] for w in weights}
    return entry


def whole_fit_seconds(last_part_seconds: float, resumed: Optional[Dict[str, object]]) -> float:
    """Fit time of the whole fit: the timed (last) part plus the earlier parts of a resumed one
    (their whole fit calls where recorded, else their epochs only)."""
    if not resumed:
        return last_part_seconds
    before = resumed.get("fit_wall_seconds_before")
    return last_part_seconds + float(resumed["fit_seconds_before"] if before is None else before)


def whole_wall(data_prep: float, last_part_fit_s: float, score_s: float,
               resumed: Optional[Dict[str, object]]) -> Dict[str, object]:
    """A record's ``wall_time_s`` (less the epochs) from the timed (last) part of a fit: ``fit`` is
    the whole fit (:func:`whole_fit_seconds`), ``data_prep`` this part's loading; ``total`` adds the
    earlier parts' loading where recorded (``data_prep_before``; None where a part predates it, and
    then ``total`` leaves it out)."""
    fit_s = whole_fit_seconds(last_part_fit_s, resumed)
    prep_before = resumed.get("data_prep_seconds_before") if resumed else None
    return {"total": data_prep + (prep_before or 0.0) + fit_s + score_s, "data_prep": data_prep,
            "data_prep_before": prep_before, "fit": fit_s, "score": score_s}


def discard_snapshot(est) -> None:
    """Delete the training snapshot of a fit whose result file is written."""
    from gmnet_sklearn.estimators.snapshot import remove_snapshot

    info = getattr(est, "resume_info_", None)
    if info:
        paths = info["snapshot"]  # one per ensemble member with n_estimators > 1
        for path in paths if isinstance(paths, list) else [paths]:
            remove_snapshot(path)


def score(endpoint: Endpoint, est, X, y_true, data: EndpointData):
    """(metric value, per-task values or None) of ``est`` on ``X`` against ``y_true`` in
    original units: RMSE (regression; clearance predictions mapped back by expm1) or ROC-AUC
    (mean over tasks, missing labels masked)."""
    return score_predictions(endpoint, predictions(endpoint, est, X, y_true), y_true, data)


def predictions(endpoint: Endpoint, est, X, y_true):
    """What :func:`score_predictions` scores: ``est``'s regression values as trained on, or its
    positive-class probabilities (``(n,)`` for a 1-D ``y_true``, else one column per task)."""
    if endpoint.task_type == "regression":
        return est.predict(X)
    proba = np.asarray(est.predict_proba(X), dtype=np.float64)
    _check_finite(proba)
    if np.asarray(y_true).ndim == 1:
        positive = list(np.asarray(est.classes_).tolist()).index(1)
        return proba[:, positive]
    return proba


def score_predictions(endpoint: Endpoint, pred, y_true, data: EndpointData):
    """``score`` on given predictions: regression values as the model was trained on them
    (mapped back by ``data.from_fit``), or positive-class probabilities, ``(n,)`` for one task
    and ``(n, tasks)`` for several. Also used by the peer arms (benchmarks/peers.py)."""
    from gmnet_sklearn.estimators.metrics import masked_rmse, mean_roc_auc

    y_true = np.asarray(y_true, dtype=np.float64)
    pred = np.asarray(pred, dtype=np.float64)
    if endpoint.task_type == "regression":
        pred = data.from_fit(pred)
        _check_finite(pred)
        value = masked_rmse(y_true, pred)
        per_task = None
        if y_true.ndim == 2:
            per_task = {t: masked_rmse(y_true[:, j], pred[:, j]) for j, t in enumerate(data.target_names)}
        return value, per_task
    _check_finite(pred)
    if y_true.ndim == 1:
        return mean_roc_auc(y_true, pred), None
    per_task = {t: mean_roc_auc(y_true[:, j], pred[:, j]) for j, t in enumerate(data.target_names)}
    return mean_roc_auc(y_true, pred), per_task


class NonFiniteError(RuntimeError):
    """The restored model predicts NaN / inf: no result is written for such a run."""


def _check_finite(values: np.ndarray) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        rows = int(bad.reshape(len(values), -1).any(1).sum())
        raise NonFiniteError(f"the restored model gives non-finite predictions for {rows} of {len(values)} molecules")


def run_warnings(est) -> List[str]:
    """Problems worth a flag in the result and the report (the run itself is kept)."""
    out = []
    losses = [r.get("train_loss") for r in est.history_]
    bad = [i + 1 for i, v in enumerate(losses) if v is None or not np.isfinite(v)]
    if bad:
        out.append(f"non-finite training loss in {len(bad)} epoch(s), first at epoch {bad[0]}")
    if "valid_loss" in est.history_[-1] and not any(k in est.history_[-1] for k in ("valid_rmse", "valid_roc_auc")):
        out.append("validation metric undefined: best epoch selected by validation loss")
    return out


def n_parameters(est) -> Dict[str, int]:
    params = list(est.net_.module_.parameters())
    return {"total": int(sum(p.numel() for p in params)),
            "trainable": int(sum(p.numel() for p in params if p.requires_grad))}


def training_curves(est) -> Dict[str, object]:
    """Per-epoch validation metric (the one used for best-epoch selection), losses, durations."""
    hist = est.history_
    row = hist[-1]
    metric = next((k for k in ("valid_rmse", "valid_roc_auc") if k in row), "valid_loss" if "valid_loss" in row else None)

    def col(key):
        return [_num(r.get(key)) for r in hist]

    return {
        "selection_metric": metric,
        "valid_curve": col(metric) if metric else [],
        "train_loss": col("train_loss"),
        "valid_loss": col("valid_loss"),
        "epoch_seconds": col("dur"),
    }


# ------------------------------------------------------------------------------------------
# Environment
# ------------------------------------------------------------------------------------------
def cpu_info() -> Dict[str, object]:
    """The CPU as records name it: ``model`` (its model name), ``isa`` (the widest x86 vector
    extension it offers: hosts that report the same model name, e.g. "AMD EPYC", can differ in it,
    and so in speed, since the C++ kernels build with -march=native) and ``flags``. One reading of
    /proc/cpuinfo for every benchmark; the library keys its kernel builds on the flags itself
    (`gm/cpu._cpu_tag`: it cannot import the harness)."""
    model, flags = None, []
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":", 1)[0].strip().lower()
                if key == "model name" and model is None:
                    model = line.split(":", 1)[1].strip()
                elif key == "flags" and not flags:
                    flags = line.split(":", 1)[1].split()
                if model is not None and flags:
                    break
    except OSError:
        pass
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"))
                if flag in flags), None)
    return {"model": model or platform.processor() or platform.machine(), "isa": isa, "flags": flags}


def hardware_info(device: str) -> Dict[str, object]:
    import torch

    cpu = cpu_info()
    info: Dict[str, object] = {
        "cpu_model": cpu["model"],
        "cpu_isa": cpu["isa"],
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "gpu_name": None,
        "platform": platform.platform(),
    }
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(line for line in fh if line.startswith("MemTotal")).split()[1])
        info["memory_gib"] = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        info["memory_gib"] = None
    try:  # other jobs on the machine slow a run down: the load at its end helps read its times
        info["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        info["load_average_1_5_15min"] = None
    if str(device).startswith("cuda") and torch.cuda.is_available():
        info["gpu_name"] = torch.cuda.get_device_name(torch.device(device))
    info["gmnet_path"] = gmnet_path(str(device))
    return info


def gmnet_path(device: str) -> str:
    """What Chem-GMNet's DualSKA runs with impl="auto" on this device (speed depends on it)."""
    if device.startswith("cuda"):
        from gmnet_sklearn.gm.triton import triton_available

        return "triton fused kernel" if triton_available() else "eager zonal forms"
    from gmnet_sklearn.gm.cpu import cpu_kernels_available

    # Runs recorded before token packing (gm/packing.py) say "fused C++ CPU kernel".
    return ("fused C++ CPU kernels, packed tokens" if cpu_kernels_available()
            else "eager zonal forms, packed tokens")


def cpu_label(hw: Dict[str, object]) -> str:
    """The CPU of a ``hardware`` record: its model and, where recorded, its vector extension."""
    isa = f" ({hw['cpu_isa']})" if hw.get("cpu_isa") else ""  # recorded since 2026-11-26
    return f"{hw.get('cpu_model') or hw.get('cpu') or '?'}{isa}"


def hardware_label(hw: Dict[str, object]) -> str:
    """One-line description of a ``hardware`` record (used by the report). Its platform too: hosts
    that share a CPU name (several "AMD EPYC") are told apart by it, as the fit-time table does."""
    cores = hw.get("cpu_affinity") or hw.get("cpu_count")
    s = f"{cpu_label(hw)}, {cores} cores, torch threads {hw.get('torch_threads')}"
    if hw.get("platform"):
        s += f", {str(hw['platform']).replace('-x86_64-with-', ', ').replace('Linux-', '')}"
    if hw.get("gpu_name"):
        s = f"{hw['gpu_name']} ({hw.get('device')}); host " + s
    else:
        s = f"CPU only: {s}"
    return s


def versions() -> Dict[str, Optional[str]]:
    import sklearn
    import skorch
    import torch

    import gmnet_sklearn

    out = {
        "python": platform.python_version(),
        "gmnet_sklearn": gmnet_sklearn.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "skorch": skorch.__version__,
    }
    try:
        import rdkit

        out["rdkit"] = rdkit.__version__
    except ImportError:  # pragma: no cover
        out["rdkit"] = None
    return out


# The commit a run's code came from, taken as the run command starts (`git_at_start`): a record is
# written when its run ends, hours later on CPU, and results are committed while other runs go,
# so HEAD at write time may name a later commit than the code that ran.
_GIT_AT_START: Optional[Dict[str, object]] = None


@contextlib.contextmanager
def git_at_start():
    """Within this block, records name the commit as it was on entering it (see `build_record`)."""
    global _GIT_AT_START
    previous, _GIT_AT_START = _GIT_AT_START, git_info()
    try:
        yield _GIT_AT_START
    finally:
        _GIT_AT_START = previous


def git_info() -> Dict[str, object]:
    """The checkout's commit and whether tracked files (those under ``benchmarks/results`` aside:
    records, not code) differ from it. A copy of the working
    tree on another machine (e.g. a remote GPU, whose copy may carry no ``.git`` or another base
    commit) is described by ``GMNET_GIT_COMMIT`` (and ``GMNET_GIT_DIRTY=1`` when the copy had
    uncommitted changes), which then take precedence over git."""
    def git(*args):
        return subprocess.run(["git", "--no-optional-locks", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=20)

    def from_env():
        commit = os.environ.get("GMNET_GIT_COMMIT") or None
        if commit is None:
            return {"commit": None, "dirty": None}
        dirty = os.environ.get("GMNET_GIT_DIRTY")
        return {"commit": commit, "dirty": None if dirty is None else dirty.strip() not in ("", "0", "false"),
                "from": "GMNET_GIT_COMMIT (set for a copy of the tree)"}

    if os.environ.get("GMNET_GIT_COMMIT"):  # set by whoever copied the tree: git there may not know
        return from_env()
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return from_env()
        # the code's state: results written by earlier runs (tracked JSON) are no change to the code
        status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
        return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return from_env()


def command_line(module: str, argv: Sequence[str]) -> str:
    return f"python -m {module} " + shlex.join(list(argv))


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------
# Result records
# ------------------------------------------------------------------------------------------
def _num(v):
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return v
    return None if math.isnan(f) or math.isinf(f) else f


def jsonable(obj):
    """Plain JSON types; NaN / inf become null."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (str, bytes, np.str_, np.bytes_)):
        return str(obj) if isinstance(obj, np.str_) else obj
    if isinstance(obj, (float, int, np.generic)):
        return _num(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json_atomic(path, obj) -> Path:
    """Write ``obj`` as JSON (no NaN: a record's missing figure is null) whole or not at all, its
    folder made first (the library's ``write_atomic``)."""
    from gmnet_sklearn.utils.files import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(jsonable(obj), indent=1, allow_nan=False) + "\n").encode())
    return path


#: Estimator parameters that say where a run ran, not what it computed (a path differs between
#: machines): left out when a resumed run compares a record's parameters with its own.
PLACE_PARAMS = ("vocab_file", "device", "n_jobs", "memory", "verbose")

#: The ``hardware`` fields that tell one host from another (the platform names its kernel build).
HOST_KEYS = ("cpu_model", "cpu_isa", "platform")


def estimator_params_record(est) -> Dict[str, object]:
    return {k: v for k, v in est.get_params(deep=False).items() if k != "callbacks"}


#: Estimator parameters added after the first benchmark records, as those records ran (the
#: harness records every parameter since): the recipe's parameters at what is now PAPER_TRAINING
#: (Adam, no schedule, one member, no augmentation, descriptors, fingerprint or forest), as the
#: report's ``_essentials`` reads their definitions.
RECORD_ADDED_PARAMETERS = dict(PAPER_TRAINING)
#: How a fit runs, not what it computes (as a training snapshot's fingerprint leaves them out).
HOW_A_FIT_RUNS = ("cuda_graphs",)


#: What every result record holds (a file without one of them is no finished run: redone on --resume).
RECORD_REQUIRED = ("schema", "arm", "endpoint", "protocol", "seed", "valid_metric", "test_metric", "hardware", "git",
                   "command")


def redo_reason(path) -> Optional[str]:
    """Why ``--resume`` makes the result file at ``path`` again, or None (it is kept): a file that
    does not parse or is no complete result record (a crash, an edit, a foreign file: kept, it
    would hold a hole in the results that the report drops), or a record made under parameters
    its protocol no longer builds (:func:`stale_parameters`)."""
    record, defect = read_record(path)
    if defect is not None:
        return defect
    stale = stale_parameters(record)
    return None if stale is None else f"made with other parameters: {stale}"


def read_record(path, schema: Optional[str] = RESULT_SCHEMA) -> Tuple[Optional[dict], Optional[str]]:
    """The file's JSON, read once, and :func:`record_problem`'s verdict on it ("unreadable: ..."
    where it does not parse: no JSON then)."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable: {type(exc).__name__}"
    return record, record_problem(record, schema)


def record_defect(path, schema: Optional[str] = RESULT_SCHEMA) -> Optional[str]:
    """What makes the file at ``path`` no complete result record, or None (:func:`read_record`)."""
    return read_record(path, schema)[1]


def record_problem(record, schema: Optional[str] = RESULT_SCHEMA) -> Optional[str]:
    """What makes parsed JSON no complete result record, or None: no JSON object, no ``schema``
    (``schema``: the one it must have; None: any schema is fine, the report's check of folders
    other records share) or one of :data:`RECORD_REQUIRED` missing."""
    if not isinstance(record, dict) or "schema" not in record:
        return "no result record (no schema)"
    if schema is not None and record["schema"] != schema:
        return f"another schema: {record['schema']!r}"
    if record["schema"] == RESULT_SCHEMA and (missing := [k for k in RECORD_REQUIRED if k not in record]):
        return f"incomplete: no {', '.join(missing)}"
    return None


def stale_parameters(record: dict) -> Optional[str]:
    """How a transformer-arm record's estimator parameters differ from what its protocol builds
    today (its ``estimator_params`` on the estimators' current defaults), or None: the report's
    check, and ``run --resume``'s (a record made under other parameters is redone, not kept)."""
    protocol = PROTOCOLS.get(record.get("protocol"))
    if protocol is None or record.get("arm") not in ARMS or not record.get("hyperparameters"):
        return None  # (no protocol of today's, a peer arm, or a record without its parameters)
    over = {"random_state": record["seed"], **({"k": record["k"], "L": record["L"]} if record["arm"] == "gmnet" else {})}
    est = estimator_class(record["arm"], ENDPOINTS[record["endpoint"]])(
        **protocol.estimator_params(record["arm"], record["endpoint"], **over))
    expected = {k: v for k, v in est.get_params(deep=False).items() if k != "callbacks" and k not in HOW_A_FIT_RUNS}
    recorded = {**{k: v for k, v in RECORD_ADDED_PARAMETERS.items() if k in expected},
                **{k: v for k, v in record["hyperparameters"].items() if k not in HOW_A_FIT_RUNS}}
    return params_differ(recorded, expected)


def params_differ(recorded: Dict[str, object], expected: Dict[str, object], recorded_only: bool = False) -> Optional[str]:
    """How a record's estimator parameters differ from a run's (``expected``), or None: what a
    resumed run may keep. Where they ran is left out (``PLACE_PARAMS``); a parameter added to the
    estimators since the record was written counts as at its old behaviour, its default
    (``_ADDED_PARAMETER_DEFAULTS``). ``recorded_only``: compare only what the record holds (records
    made before every parameter was recorded)."""
    from gmnet_sklearn.estimators._base import _ADDED_PARAMETER_DEFAULTS

    expected = json.loads(json.dumps(jsonable(expected)))
    recorded = {**{k: v for k, v in _ADDED_PARAMETER_DEFAULTS.items() if k in expected and not recorded_only},
                **recorded}
    keys = [k for k in recorded if k in expected] if recorded_only else set(expected) | set(recorded)
    differ = sorted(k for k in keys if k not in PLACE_PARAMS and expected.get(k) != recorded.get(k))
    return (", ".join(f"{k}={recorded.get(k)!r} (now {expected.get(k)!r})" for k in differ[:5])
            if differ else None)


def build_record(*, source: str, protocol: Protocol, protocol_name: str, overrides: Dict[str, object],
                 arm: str, data: EndpointData, est, seed: int, valid, test, wall: Dict[str, object],
                 command: str, vocab_file: str, extra: Optional[Dict[str, object]] = None) -> Dict[str, object]:
    endpoint = data.endpoint
    curves = training_curves(est)
    epochs = [s for s in curves["epoch_seconds"] if s is not None]
    best_epoch = int(est.best_epoch_)
    curve = curves["valid_curve"]
    record: Dict[str, object] = {
        "schema": RESULT_SCHEMA,
        "source": source,
        "arm": arm,
        "estimator": type(est).__name__,
        "endpoint": endpoint.name,
        "endpoint_label": endpoint.label,
        "dataset": endpoint.dataset,
        "task_type": endpoint.task_type,
        "tasks": data.target_names,
        "target_transform": endpoint.target_transform,
        "units": endpoint.units,
        "protocol": protocol_name,
        "protocol_base": protocol.name,
        "protocol_overrides": {k: v for k, v in overrides.items() if v is not None},
        "protocol_definition": protocol.to_dict(),
        "hyperparameters": estimator_params_record(est),
        "seed": seed,
        "k": est.get_params().get("k") if arm == "gmnet" else None,
        "L": est.get_params().get("L") if arm == "gmnet" else None,
        "n_parameters": n_parameters(est)["trainable"],
        "n_parameters_total": n_parameters(est)["total"],
        "vocab_file": vocab_file,
        "vocab_size": int(est.tokenizer_.vocab_size),
        "metric": endpoint.metric,
        "higher_is_better": endpoint.higher_is_better,
        "valid_metric": valid[0] if valid is not None else None,
        "test_metric": test[0],
        "valid_per_task": valid[1] if valid is not None else None,
        "test_per_task": test[1],
        "best_epoch": best_epoch,
        # the epochs whose weights were averaged and scored (average_epochs > 1), the best first
        "averaged_epochs": est.history_[-1].get("averaged_epochs"),
        "n_epochs": len(est.history_),
        "selection_metric": curves["selection_metric"],
        "selection_metric_units": ("log1p(y)" if endpoint.target_transform == "log1p" and endpoint.task_type == "regression"
                                   else "original"),
        "selection_metric_at_best_epoch": curve[best_epoch - 1] if curve and best_epoch <= len(curve) else None,
        "valid_curve": curve,
        "train_loss_curve": curves["train_loss"],
        "valid_loss_curve": curves["valid_loss"],
        "sizes": {**data.sizes, "file_rows": data.n_rows_file, "rows_used": data.n_rows_used,
                  "split_before_label_drop": data.split_sizes, "dropped_missing_label": data.dropped_missing_label,
                  "whitespace_stripped": data.n_whitespace_stripped, "split_sha256": data.split_sha256,
                  **invalid_smiles_entry(data)},
        "data_path": data.data_path,
        "wall_time_s": {**wall, "per_epoch_mean": float(np.mean(epochs)) if epochs else None, "per_epoch": epochs},
        "hardware": hardware_info(getattr(est, "device_", "cpu")),
        "versions": versions(),
        "git": _GIT_AT_START if _GIT_AT_START is not None else git_info(),
        "warnings": run_warnings(est),
        "command": command,
        # Set by benchmarks.sweep: how many runs it lets share the machine (wall times are then not
        # single-run timings).
        "sweep_workers": int(os.environ["GMNET_SWEEP_WORKERS"]) if os.environ.get("GMNET_SWEEP_WORKERS") else None,
        # A fit resumed from a training snapshot (None: one uninterrupted fit): from which epoch,
        # and each part's commit and hardware ("git" and "hardware" above are those of the last part).
        "resumed": resumed_entry(est),
        "pretrained": pretrained_entry(est, arm),
        "forest": forest_entry(est, data),
        "cwd": os.getcwd(),
        "timestamp_utc": utc_now(),
    }
    if extra:
        record.update(extra)
    return record


def fmt_metric(v, metric: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    return f"{v:.4f}" if metric == "roc_auc" else f"{v:.4g}"


def set_threads(threads: Optional[int]) -> None:
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def eprint(*args) -> None:
    print(*args, file=sys.stderr, flush=True)
