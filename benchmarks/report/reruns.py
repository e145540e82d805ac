"""Committed records run again (``benchmarks/results/reruns/<label>/``: ``benchmarks.run``'s layout
one folder down, so no table reads them): how far one seed's figure moves with the CPU's vector
instructions and the number of threads."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from .._common import HOW_A_FIT_RUNS, cpu_label, params_differ
from ..protocols import ARM_LABELS, ENDPOINTS
from ._format import md_table, rel
from ._records import Index, read_json, stats

RERUNS_INTRO = (
    "A seed's figure repeats bit for bit on the same kind of CPU with the same number of threads "
    "(tests/test_training_snapshot.py, tests/test_estimators.py), not across them: the kernels' float sums "
    "run in another order with AVX2 and AVX-512 and on one or two threads, the runs part from the first "
    "epoch and can pick another best epoch. Committed records run again with their own command on another "
    "host (`benchmarks/results/reruns/`, the command in each record), at the record's own commit (an export "
    "of it) and at a later one: where those two agree to the bit, the code since changed nothing and the "
    "difference is the host's:")


def _commit(rec: dict) -> str:
    return (rec.get("git") or {}).get("commit", "?")[:7]


def _key(rec: dict) -> tuple:
    return rec["protocol"], rec["arm"], rec["endpoint"], rec["seed"], rec.get("k"), rec.get("L")


def reruns_section(idx: Index, results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    committed = {_key(r): r for r in idx.records}
    seeds = {}  # the committed seeds' test figures of each cell
    for r in idx.records:
        seeds.setdefault(_key(r)[:3] + _key(r)[4:], []).append(r["test_metric"])
    rows, summary, alike, other = [], {}, {}, []
    for path in sorted((Path(results_dir) / "reruns").glob("*/*/*/*/*.json")):
        rec = read_json(path)
        if rec is None:
            continue
        before = committed.get(_key(rec))
        if before is None:
            continue
        if _ran_otherwise(rec, before):  # (a re-run of a record since relabelled, whose key another holds now)
            other.append(rel(path, out_dir))
            continue
        rows.append([f"`{rec['protocol']}`", ARM_LABELS.get(rec["arm"], rec["arm"]), ENDPOINTS[rec["endpoint"]].label,
                     str(rec["seed"]), f"{before['test_metric']:.4f}", str(before["best_epoch"]),
                     cpu_label(before["hardware"]), str(before["hardware"]["torch_threads"]), _commit(before),
                     f"{rec['test_metric']:.4f}", str(rec["best_epoch"]), cpu_label(rec["hardware"]),
                     str(rec["hardware"]["torch_threads"]), _commit(rec), f"{rec['test_metric'] - before['test_metric']:+.4f}",
                     f"{stats(seeds[_key(rec)[:3] + _key(rec)[4:]])['sd']:.4f}", rel(path, out_dir)])
        summary[rel(path, out_dir)] = {"committed": before["test_metric"], "rerun": rec["test_metric"]}
        alike.setdefault(_key(rec) + (cpu_label(rec["hardware"]), rec["hardware"]["torch_threads"]), []).append(rec)
    if not rows:
        return None, {}
    if other:
        checks_intro = [f"Left out, as their committed record ran other estimator parameters: {', '.join(other)}."]
    else:
        checks_intro = []
    table = md_table(["Protocol", "Arm", "Endpoint", "seed", "committed test", "best epoch", "CPU", "threads",
                      "commit", "re-run test", "best epoch", "CPU", "threads", "commit", "difference",
                      "sd over the committed seeds", "record"], rows)
    checks = []
    for (*_, cpu, threads), recs in alike.items():  # one host and thread count, several commits
        for a, b in zip(recs, recs[1:]):
            if _commit(a) != _commit(b):
                same = a["test_metric"] == b["test_metric"] and a.get("train_loss_curve") == b.get("train_loss_curve")
                checks.append(f"{ENDPOINTS[a['endpoint']].label} seed {a['seed']} on {cpu}, {threads} thread(s): "
                              f"{_commit(a)} and {_commit(b)} "
                              + ("give the same test figure and training-loss curve, to the bit." if same else
                                 f"differ ({a['test_metric']:.6f} against {b['test_metric']:.6f})."))
    return "\n".join([RERUNS_INTRO, "", table, "", *checks_intro, *checks, "", "Compare means over seeds, and one seed's figure only "
                      "with its own kind of CPU and thread count."]), summary


def _ran_otherwise(rerun: dict, committed: dict) -> bool:
    """Whether the two records ran other estimator parameters (where they ran aside; a parameter
    one of them predates counts at its default from before it existed, on both sides)."""
    from gmnet_sklearn.estimators._base import _ADDED_PARAMETER_DEFAULTS

    a, b = ({**_ADDED_PARAMETER_DEFAULTS, **{k: v for k, v in (r.get("hyperparameters") or {}).items()
                                              if k not in HOW_A_FIT_RUNS}} for r in (rerun, committed))
    return bool(rerun.get("hyperparameters") and committed.get("hyperparameters") and params_differ(a, b))
