"""What early stopping would have done to finished runs, replayed from their validation curves.

    python -m benchmarks.patience_replay --protocol tuned_avg1 --patience 3 5 8 10

Early stopping (``patience``) leaves a run's training untouched up to the epoch it stops at: the
learning-rate schedule is a function of the batches done and ``max_epochs`` (`estimators.schedule`),
not of when training ends. So a run recorded without it, whose record holds the selection metric of
every epoch on the validation split (``valid_curve``), shows exactly which epoch each patience
would have restored, that epoch's validation metric and how many epochs would have run. The replay
follows skorch's ``EarlyStopping`` with ``threshold=0`` (as the estimators configure it) and
``Checkpoint``'s best flags: an epoch improves only when strictly better than the best so far, and
training stops after the ``patience``-th epoch in a row without improvement.

Validation data only (the records' DeepChem valid split, the network alone: a forest blend is
weighted after training). Writes ``benchmarks/results/patience_replay_<protocol>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import _common as C
from .protocols import error_ratio

SCHEMA = "gmnet-patience-replay/1"


def replay(curve: Sequence[float], patience: Optional[int], higher_is_better: bool) -> tuple[int, int]:
    """``(restored epoch, epochs run)``, 1-based, of a run with this validation curve under
    early stopping with ``patience`` (None: never stops)."""
    best, best_epoch, misses = None, 0, 0
    for epoch, value in enumerate(curve, start=1):
        # a NaN metric (None in a record) is never an improvement, as for skorch's best flags
        if value is not None and (best is None or (value > best if higher_is_better else value < best)):
            best, best_epoch, misses = value, epoch, 0
            continue
        misses += 1
        if patience is not None and misses >= patience:
            return best_epoch, epoch
    return best_epoch, len(curve)


def replay_records(records: list, patiences: Sequence[int]) -> dict:
    """Per patience: the runs whose restored epoch changes, the mean validation error ratio
    (replayed / as run, `protocols.error_ratio`) and the fraction of epochs that would have run."""
    summary = {}
    for p in patiences:
        changed, ratios, run, total = [], [], 0, 0
        for rec in records:
            curve, higher, best = rec["valid_curve"], rec["higher_is_better"], rec["best_epoch"]  # (checked on load)
            restored, stop = replay(curve, p, higher)
            ratio = error_ratio(rec["endpoint"], curve[restored - 1], curve[best - 1])
            ratios.append(ratio)
            run, total = run + stop, total + len(curve)
            if restored != best:
                changed.append({"arm": rec["arm"], "endpoint": rec["endpoint"], "seed": rec["seed"],
                                "best_epoch": best, "restored_epoch": restored, "stop_epoch": stop,
                                "valid_metric": curve[best - 1], "replayed_valid_metric": curve[restored - 1],
                                "error_ratio": ratio})
        summary[str(p)] = {"n_runs": len(records), "n_changed": len(changed),
                           "mean_error_ratio": sum(ratios) / len(ratios), "epoch_fraction": run / total,
                           "changed": changed}
    return summary


#: The selection metrics whose values `protocols.error_ratio` compares (the endpoint's metric); a
#: run that selected on ``valid_loss`` (a validation part that could not rank) is left out.
ENDPOINT_METRICS = ("valid_rmse", "valid_roc_auc")


def load_records(protocol_dir: Path) -> list:
    records = []
    for path in sorted(protocol_dir.glob("*/*/*.json")):
        rec = json.loads(path.read_text())
        if rec.get("selection_metric") not in (None, *ENDPOINT_METRICS):  # (older records: the endpoint's)
            print(f"left out (selected on {rec['selection_metric']}, not the endpoint's metric): {path}")
            continue
        if (rec.get("hyperparameters") or {}).get("average_epochs", 1) > 1:  # (its weights are no one epoch's)
            print(f"left out (average_epochs={rec['hyperparameters']['average_epochs']}: the weights scored are an "
                  f"average of epochs, which a replayed stop cannot reproduce): {path}")
            continue
        if rec.get("valid_curve") and rec.get("best_epoch") is not None:
            if replay(rec["valid_curve"], None, rec["higher_is_better"])[0] != rec["best_epoch"]:
                raise ValueError(f"{path}: its curve's best epoch is not the recorded best_epoch {rec['best_epoch']}")
            records.append(rec)
    return records


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.patience_replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocol", default="tuned_avg1",
                   help="whose records (default tuned_avg1: the defaults of the best epoch; records that average "
                        "epochs are left out)")
    p.add_argument("--patience", nargs="+", type=int, default=[3, 5, 8, 10])
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    records = load_records(Path(args.results_dir) / args.protocol)
    if not records:
        raise SystemExit(f"no records with validation curves under {args.results_dir}/{args.protocol}")
    out = {"schema": SCHEMA, "protocol": args.protocol, "patience": replay_records(records, args.patience),
           "git": C.git_info(), "command": C.command_line("benchmarks.patience_replay", list(sys.argv[1:] if argv is None else argv)),
           "timestamp_utc": C.utc_now()}
    path = Path(args.output or Path(args.results_dir) / f"patience_replay_{args.protocol}.json")
    C.write_json_atomic(path, out)
    for patience, s in out["patience"].items():
        print(f"patience {patience}: {s['n_changed']} of {s['n_runs']} runs restore another epoch, "
              f"validation error x{s['mean_error_ratio']:.3f} on average, {s['epoch_fraction']:.0%} of the epochs")
        for c in s["changed"]:
            print(f"    {c['arm']} {c['endpoint']} seed {c['seed']}: epoch {c['best_epoch']} -> {c['restored_epoch']} "
                  f"(stops after {c['stop_epoch']}), error x{c['error_ratio']:.3f}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
