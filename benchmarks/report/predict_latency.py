"""How long a fitted default model takes to predict (``benchmarks/predict_latency.py``), beside
the RF-ECFP4 peer measured in the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

from .._common import cpu_label
from ..protocols import ENDPOINTS
from ._format import md_table
from ._records import read_json

ARM_LABELS = {"gmnet": "Chem-GMNet, the defaults (network, descriptors, forest blend)"}


def _arm_label(arm: str) -> str:
    if arm in ARM_LABELS:
        return ARM_LABELS[arm]
    threads = arm.rsplit("_", 2)[-2]  # rf_ecfp_<n>_thread(s)
    return f"RF-ECFP4 (fingerprints + 500 trees), {threads} thread{'s' * (threads != '1')}"


def predict_latency_section(results_dir: Path) -> Tuple[Optional[str], dict]:
    recs = []
    root = Path(results_dir) / "predict_latency"
    for path in sorted(root.rglob("*.json")):  # (a subfolder: the same run at an earlier commit)
        rec = read_json(path)
        if rec is not None and rec.get("schema") == "gmnet-predict-latency/1":
            recs.append((path, rec))
    if not recs:
        return None, {}
    parts, summary = [], {}
    for path, rec in recs:
        sizes = [str(n) for n in rec["sizes"]]
        rows = [[_arm_label(arm)] + [f"{by_size[n]['median_seconds'] * 1000:.0f}" for n in sizes]
                for arm, by_size in rec["arms"].items()]
        peer = rec["arms"].get("rf_ecfp_1_thread")
        if peer:  # (measured in one run, arm after arm: less exposed to a host's drift than two runs)
            rows.append([f"Chem-GMNet ({rec['torch_threads']} threads) / RF-ECFP4 (1 thread), ratio"] + [
                f"{rec['arms']['gmnet'][n]['median_seconds'] / peer[n]['median_seconds']:.1f}x" for n in sizes])
        git = rec.get("git") or {}
        commit = f"{str(git.get('commit'))[:7]}{' with changes' if git.get('dirty') else ''}"
        name = path.relative_to(root).as_posix()
        parts += [f"`{name}` (commit {commit}): fitted on {ENDPOINTS[rec['endpoint']].label}'s training part ({rec['n_train']} "
                  f"molecules, forest weight {rec['forest_weight']:.1f}), predicting the first N SMILES of "
                  f"{ENDPOINTS[rec['screen']].label}; median of {rec['repeats']} calls after an untimed one, ms; "
                  f"{cpu_label(rec['hardware'])}, {rec['torch_threads']} torch thread(s); `{rec['command']}`", "",
                  md_table(["Model", *[f"N = {n}" for n in sizes]], rows), ""]
        summary[name] = {arm: {n: r["median_seconds"] for n, r in by_size.items()}
                              for arm, by_size in rec["arms"].items()}
    return "\n".join(parts).rstrip(), summary
