"""Does averaging the weights of several epochs beat restoring the best one? Validation only.

    python -m benchmarks.epoch_average --endpoints esol ... --seeds 0 1 2 --threads 1
    python -m benchmarks.epoch_average --summary

Recipe-search round twenty-one. The defaults then restored the epoch with the best
internal-validation metric (``average_epochs=1``; since this round they average the three best).
A uniform average of the weights of several epochs (a "soup": Wortsman et al. 2022, stochastic
weight averaging: Izmailov et al. 2018) often generalises better than any one of them, and costs
no extra training. One fit per (endpoint, seed) with the defaults of the round, exactly as a
user's ``fit(X_train, y_train)`` (its internal split picks the epochs and the forest's weight),
keeps every epoch's weights; each variant then loads its weights, chooses the forest's blend
weight on the same internal split as the fit does, and is scored on the DeepChem valid split.
Every variant of a cell comes from one training run, so the comparison is paired. The test split
is dropped as soon as the endpoint is read.

Variants: ``best`` (what the defaults did before this round; it must reproduce the fitted
estimator's own score), ``top<k>`` (the k epochs with the best internal-validation metric), ``last<k>`` (the last k).
The rule, set before any cell: ``top3`` is a lever for the defaults if its mean paired validation
error against ``best`` (RMSE or 1 - ROC-AUC ratio, per seed then averaged) is below 0.99 over the
seven endpoints and below 1 without BBBP. The other variants are shown, not chosen from.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from skorch.callbacks import Callback, EarlyStopping

from gmnet_sklearn.estimators.epoch_average import average_states

from . import _common as C
from .protocols import ENDPOINTS, error_ratio, resolve_endpoints

SCHEMA = "gmnet-epoch-average/1"
RESULTS_DIR = C.DEFAULT_RESULTS_DIR / "epoch_average"
VARIANTS = ("best", "top2", "top3", "top5", "last3", "last5")
RULE_VARIANT, RULE_THRESHOLD = "top3", 0.99
PEER_TARGET_ENDPOINTS = ("freesolv", "clearance", "esol", "bace_classification", "bace_regression", "bbbp",
                         "lipophilicity")


class EpochWeights(Callback):
    """Keeps every epoch's weights (a CPU copy) and its internal-validation metric."""

    def __init__(self, monitor: str):
        self.monitor = monitor
        self.epochs: List[dict] = []

    def on_epoch_end(self, net, **kwargs):
        state = {k: v.detach().to("cpu", copy=True) for k, v in net.module_.state_dict().items()}
        self.epochs.append({"epoch": len(net.history), "metric": net.history[-1].get(self.monitor), "state": state})


class RecordingEpochs:
    """Mixed into an estimator class: the fit's selection callbacks also keep every epoch's weights,
    and the internal split the forest's weight was chosen on is kept (the library's own steps,
    overridden the skorch way)."""

    def _selection_callbacks(self, valid_set):
        callbacks = super()._selection_callbacks(valid_set)
        name, lower, _ = self._validation_metric(valid_set.y.cpu().numpy())
        self.epoch_weights_ = EpochWeights(name)
        self.selection_lower_is_better_ = lower
        # before EarlyStopping, whose stop (a KeyboardInterrupt in its on_epoch_end) would skip the
        # last epoch, as AverageBestEpochs sits before it
        at = next((i for i, cb in enumerate(callbacks) if isinstance(cb, EarlyStopping)), len(callbacks))
        return callbacks[:at] + [self.epoch_weights_] + callbacks[at:]

    def _fit_forest(self, train_set, valid_set, seed: int):
        super()._fit_forest(train_set, valid_set, seed)
        self.internal_valid_ = valid_set


def recording(cls):
    return type(f"Recording{cls.__name__}", (RecordingEpochs, cls), {})


def chosen_epochs(epochs: List[dict], variant: str, lower: bool) -> List[int]:
    """The indices into ``epochs`` a variant averages: ``best`` and ``top<k>`` among the epochs
    with a finite metric, as ``average_epochs`` does (ties: the earlier epoch, as skorch's best
    flag); ``last<k>`` the last k, whatever their metric."""
    finite = [i for i in range(len(epochs)) if epochs[i]["metric"] is not None and np.isfinite(epochs[i]["metric"])]
    ranked = sorted(finite, key=lambda i: (epochs[i]["metric"] if lower else -epochs[i]["metric"], i))
    if variant == "best":
        return ranked[:1]
    if variant.startswith("top"):
        return ranked[:int(variant[3:])]
    if variant.startswith("last"):
        return list(range(len(epochs)))[-int(variant[4:]):]
    raise ValueError(f"unknown variant {variant!r}")


def apply_weights(est, state: dict) -> float:
    """Loads ``state`` into the fitted network and chooses the forest's blend weight again on the
    fit's internal split, as ``_fit_forest`` does; returns that weight."""
    est.nets_[0].module_.load_state_dict(state)
    if est.forest_ is None:
        return 0.0
    est.forest_weight_ = est._choose_forest_weight(est.forest_, est.internal_valid_)
    return est.forest_weight_


def run_cell(endpoint, data, seed: int, vocab_file: str, command: str, root: Path,
             descriptor_cache: Optional[str]) -> dict:
    cls = recording(C.estimator_class("gmnet", endpoint))
    # the defaults as the round measured them: the best epoch restored (average_epochs=1, the
    # default until the round's outcome became it), every variant then loaded over it
    est = cls(random_state=seed, vocab_file=vocab_file, memory=descriptor_cache, average_epochs=1)
    t0 = time.perf_counter()
    est.fit(data.X_train, data.to_fit(data.y_train))
    fit_seconds = time.perf_counter() - t0
    as_fitted = C.score(endpoint, est, data.X_valid, data.y_valid, data)[0]
    epochs, lower = est.epoch_weights_.epochs, est.selection_lower_is_better_
    variants: Dict[str, dict] = {}
    for variant in VARIANTS:
        chosen = chosen_epochs(epochs, variant, lower)
        # (the cells at 0c4f9c0 took a float32 mean, 1 ulp from average_states' float64 sum in places)
        weight = apply_weights(est, average_states([epochs[i]["state"] for i in chosen]))
        variants[variant] = {"epochs": [epochs[i]["epoch"] for i in chosen], "forest_weight": weight,
                             "valid_metric": C.score(endpoint, est, data.X_valid, data.y_valid, data)[0],
                             "network_valid_metric": C.forest_entry(est, data, splits=("valid",))[
                                 "network_valid_metric"] if est.forest_ is not None else None}
    record = {
        "schema": SCHEMA, "endpoint": endpoint.name, "seed": seed, "metric": endpoint.metric,
        "params": {k: v for k, v in est.get_params(deep=False).items() if k != "callbacks"},
        "as_fitted_valid_metric": as_fitted, "best_epoch": int(est.best_epoch_),
        "internal_valid_metric_by_epoch": [e["metric"] for e in epochs],
        "variants": variants, "fit_seconds": fit_seconds,
        "sizes": {"train": len(data.X_train), "valid": len(data.X_valid), "split_sha256": data.split_sha256},
        "hardware": C.hardware_info("cpu"), "versions": C.versions(),
        "git": C._GIT_AT_START if C._GIT_AT_START is not None else C.git_info(),
        "command": command, "timestamp_utc": C.utc_now(),
    }
    C.write_json_atomic(root / f"{endpoint.name}_seed{seed}.json", record)
    shown = ", ".join(f"{v} {C.fmt_metric(variants[v]['valid_metric'], endpoint.metric)}" for v in VARIANTS)
    print(f"{endpoint.name} seed{seed}: {shown} ({fit_seconds:.0f} s fit)", flush=True)
    return record


def cells(root: Path = RESULTS_DIR) -> List[dict]:
    """The round's records under ``root``."""
    import json

    recs = [json.loads(p.read_text()) for p in sorted(Path(root).glob("*.json"))]
    return [r for r in recs if r.get("schema") == SCHEMA]


def summary(root: Path = RESULTS_DIR, recs: Optional[List[dict]] = None) -> str:
    """Mean paired validation-error ratio of each variant against ``best`` per endpoint (of
    ``recs``, else of the cells under ``root``)."""
    recs = cells(root) if recs is None else recs
    endpoints = [e for e in PEER_TARGET_ENDPOINTS if any(r["endpoint"] == e for r in recs)]
    lines = ["| variant vs best | " + " | ".join(ENDPOINTS[e].label for e in endpoints)
             + " | mean | without BBBP | better |", "|---" * (len(endpoints) + 4) + "|"]
    verdict = ""
    for variant in VARIANTS[1:]:
        if not all(variant in r["variants"] for r in recs):  # (cells made without it: not shown)
            continue
        ratios = {}
        for e in endpoints:
            per_seed = [error_ratio(e, r["variants"][variant]["valid_metric"], r["variants"]["best"]["valid_metric"])
                        for r in recs if r["endpoint"] == e]
            ratios[e] = float(np.mean(per_seed))
        mean = float(np.mean(list(ratios.values())))
        without = float(np.mean([v for e, v in ratios.items() if e != "bbbp"]))
        better = sum(v < 1 for v in ratios.values())
        lines.append(f"| {variant} | " + " | ".join(f"{ratios[e]:.3f}" for e in endpoints)
                     + f" | {mean:.3f} | {without:.3f} | {better} of {len(endpoints)} |")
        if variant == RULE_VARIANT and len(endpoints) == len(PEER_TARGET_ENDPOINTS):
            passed = mean < RULE_THRESHOLD and without < 1
            verdict = (f"\n\nRule ({RULE_VARIANT}: mean below {RULE_THRESHOLD} and below 1 without BBBP): "
                       f"{'met' if passed else 'not met'} (mean {mean:.3f}, without BBBP {without:.3f}).")
    seeds = sorted({r["seed"] for r in recs})
    reproduced = max((abs(r["variants"]["best"]["valid_metric"] - r["as_fitted_valid_metric"]) for r in recs
                      if "as_fitted_valid_metric" in r), default=float("nan"))
    return ("\n".join(lines) + verdict + f"\n\nSeeds {seeds}; {len(recs)} cells. Largest difference between the "
            f"`best` variant and the fitted estimator's own valid score: {reproduced:.2g}.")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.epoch_average", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoints", nargs="+", default=list(PEER_TARGET_ENDPOINTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--results-dir", default=str(RESULTS_DIR))
    p.add_argument("--resume", action="store_true", help="skip cells whose JSON exists")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--data-home", default=None)
    p.add_argument("--descriptor-cache", default=None, metavar="DIR")
    p.add_argument("--summary", action="store_true", help="print the table of every variant and exit")
    args = p.parse_args(argv)
    root = Path(args.results_dir)
    if args.summary:
        print(summary(root))
        return 0
    C.set_threads(args.threads)
    vocab_file = C.resolve_vocab_file(None)
    data_home = C.resolve_data_home(args.data_home)
    command = C.command_line("benchmarks.epoch_average", list(sys.argv[1:] if argv is None else argv))
    with C.git_at_start():
        for ep in resolve_endpoints(args.endpoints):
            data = C.load_endpoint(ENDPOINTS[ep], data_home=data_home)
            data.X_test = data.y_test = None  # choose on validation data only
            for seed in args.seeds:
                if args.resume and (root / f"{ep}_seed{seed}.json").exists():
                    continue
                run_cell(ENDPOINTS[ep], data, seed, vocab_file, command, root, args.descriptor_cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
