"""Committed records run again (``benchmarks/results/reruns/<label>/``: ``benchmarks.run``'s layout
one folder down, so no table reads them): how far one seed's figure moves with the CPU's vector
instructions and the number of threads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Tuple

from .._common import cpu_label
from ..protocols import ARM_LABELS, ENDPOINTS
from ._format import md_table, rel
from ._records import Index, stats

RERUNS_INTRO = (
    "A seed's figure repeats bit for bit on the same kind of CPU with the same number of threads "
    "(tests/test_training_snapshot.py, tests/test_estimators.py), not across them: the kernels' float sums "
    "run in another order with AVX2 and AVX-512 and on one or two threads, the runs part from the first "
    "epoch and can pick another best epoch. Committed records run again with their own command on another "
    "host (`benchmarks/results/reruns/`, the command in each record):")


def _key(rec: dict) -> tuple:
    return rec["protocol"], rec["arm"], rec["endpoint"], rec["seed"], rec.get("k"), rec.get("L")


def reruns_section(idx: Index, results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    committed = {_key(r): r for r in idx.records}
    seeds = {}  # the committed seeds' test figures of each cell
    for r in idx.records:
        seeds.setdefault(_key(r)[:3] + _key(r)[4:], []).append(r["test_metric"])
    rows, summary = [], {}
    for path in sorted((Path(results_dir) / "reruns").glob("*/*/*/*/*.json")):
        rec = json.loads(path.read_text())
        before = committed.get(_key(rec))
        if before is None:
            continue
        rows.append([f"`{rec['protocol']}`", ARM_LABELS.get(rec["arm"], rec["arm"]), ENDPOINTS[rec["endpoint"]].label,
                     str(rec["seed"]), f"{before['test_metric']:.4f}", str(before["best_epoch"]),
                     cpu_label(before["hardware"]), str(before["hardware"]["torch_threads"]),
                     f"{rec['test_metric']:.4f}", str(rec["best_epoch"]), cpu_label(rec["hardware"]),
                     str(rec["hardware"]["torch_threads"]), f"{rec['test_metric'] - before['test_metric']:+.4f}",
                     f"{stats(seeds[_key(rec)[:3] + _key(rec)[4:]])['sd']:.4f}", rel(path, out_dir)])
        summary[rel(path, out_dir)] = {"committed": before["test_metric"], "rerun": rec["test_metric"]}
    if not rows:
        return None, {}
    table = md_table(["Protocol", "Arm", "Endpoint", "seed", "committed test", "best epoch", "CPU", "threads",
                      "re-run test", "best epoch", "CPU", "threads", "difference", "sd over the committed seeds",
                      "record"], rows)
    return "\n".join([RERUNS_INTRO, "", table, "", "Compare means over seeds, and one seed's figure only with its "
                      "own kind of CPU and thread count."]), summary
