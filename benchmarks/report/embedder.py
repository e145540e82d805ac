"""Scikit-learn models on Chem-GMNet's embeddings against RF on ECFP4
(``benchmarks/embedder_features.py``)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Dict, Optional, Tuple

from .. import _common as C
from ..protocols import ENDPOINTS
from ._format import DASH, fmt, md_table, rel
from ._records import stats


EMBEDDER_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("gmnet", "Chem-GMNet itself"), ("rf_pooled", "RF, pooled"), ("ridge_pooled", "ridge, pooled"),
    ("rf_head", "RF, head input"), ("ridge_head", "ridge, head input"),
    ("rf_moments", "RF, moments"), ("ridge_moments", "ridge, moments"), ("rf_ecfp4", "RF-ECFP4"))


def embedder_section(results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    """RF and ridge on GMNetEmbedder features vs RF on ECFP4, test metric per endpoint (mean ± sd
    over seeds, best of the row in bold), one table per protocol; None without full-run records
    (``@limit`` runs and the like are left out)."""
    from ..embedder_features import load_records

    records = [r for r in load_records(results_dir) if "@" not in r.get("run", "@")]
    if not records:
        return None, {}
    by_run: Dict[str, Dict[str, Dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        by_run[r["run"]][r["endpoint"]][int(r["seed"])] = r
    parts, summary = [EMBEDDER_INTRO], {}
    for run in sorted(by_run, key=lambda name: (name != "tuned", name)):
        by_ep = by_run[run]
        runs_all = [r for seeds in by_ep.values() for r in seeds.values()]
        columns = [(key, label) for key, label in EMBEDDER_COLUMNS if any(key in r["models"] for r in runs_all)]
        rows, rsum = [], {}
        for name in [e for e in ENDPOINTS if e in by_ep]:
            ep, runs = ENDPOINTS[name], by_ep[name]
            st = {key: stats([r["models"][key]["test_metric"] for r in runs.values() if key in r["models"]])
                  for key, _ in columns}
            present = [v["mean"] for v in st.values() if v]
            target = (max if ep.higher_is_better else min)(present) if present else None
            rows.append([ep.label, ep.metric_label] + [
                fmt(v["mean"], v["sd"], ep.decimals, v["n"], bold=v["mean"] == target) if v else DASH
                for v in st.values()])
            rsum[name] = {"metric": ep.metric, "test": st, "seeds": sorted(runs),
                          "files": [rel(runs[s]["_path"], out_dir) for s in sorted(runs)]}
        machines = sorted({C.hardware_label(r["hardware"]) for r in runs_all if r.get("hardware")})
        parts += [f"Estimator protocol `{run}`:",
                  md_table(["Endpoint", "Metric", *[label for _, label in columns]], rows,
                           ["---", "---"] + ["---:"] * len(columns)),
                  "Machines: " + "; ".join(machines) + ". Commands: "
                  + ", ".join(f"`{c}`" for c in sorted({r.get("command", "") for r in runs_all})) + "."]
        summary[run] = {"endpoints": rsum, "n_files": len(runs_all)}
    return "\n\n".join(parts), summary


EMBEDDER_INTRO = """\
Chem-GMNet's own features for other models (`benchmarks/embedder_features.py`, written by
`python -m benchmarks.embedder_features`): per endpoint and seed the estimator with the library's
defaults is fitted on the scaffold train split (valid split for the epochs it keeps), then
`GMNetEmbedder` turns the molecules into its pooled encoder state (`pooled`), the head's input
(`head input`: pooled state plus the fused descriptors) or its flattened terminal Gated-SFA moment
matrices (`moments`, Theorem 1), and random forests (500 trees; on `moments` sqrt(n_features) per
split) and ridge (`RidgeCV`; L2 logistic regression for classification, standardised features)
are fitted on them beside RF on ECFP4. Test metric, population sd over the seeds present, `n`
seeds; **bold**: the best of the row."""
