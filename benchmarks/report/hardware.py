"""The machines each group of runs ran on, their wall time, and the commands that wrote them."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _common as C
from ..protocols import ENDPOINTS
from ._format import DASH, duration, md_table
from ._records import ALL_ARM_LABELS, Index, device_note, run_device, run_machines


def hardware_ids(idx: Index, protocols: Sequence[str]) -> Tuple[Dict[str, str], Dict[int, List[str]]]:
    """Machine labels numbered H1, H2, ... by their first run in time, not by where they first
    show in a table, so that a new machine takes the next free number and older labels never
    move: (label -> id, id(record) -> the ids of the machines it ran on)."""
    labels: Dict[str, str] = {}
    per_record: Dict[int, List[str]] = {}
    for r in sorted(idx.records, key=lambda r: r.get("timestamp_utc") or ""):
        if r["protocol"] in protocols:
            ids = []
            for h in run_machines(r):
                ids.append(labels.setdefault(C.hardware_label(h), f"H{len(labels) + 1}"))
            per_record[id(r)] = ids
    return labels, per_record


def hardware_section(idx: Index, protocols: Sequence[str], out_dir: Path,
                     machines: Optional[Tuple[Dict[str, str], Dict[int, List[str]]]] = None) -> Tuple[str, dict]:
    labels, per_record = machines or hardware_ids(idx, protocols)

    def hw_ids(rec) -> List[str]:
        return per_record[id(rec)]

    rows, summary = [], []
    for protocol in protocols:
        groups: Dict[Tuple, List[dict]] = defaultdict(list)
        for r in idx.records:
            if r["protocol"] == protocol:
                kl = f"k{r['k']} L{r['L']}" if r["arm"] == "gmnet" else ""
                if r["arm"] == "gmnet":  # runs before the fused kernels did not record a path: eager
                    kl += ", " + (r.get("hardware") or {}).get("gmnet_path", "eager zonal forms")
                note = device_note(run_device(r))  # a GPU's times are never averaged with a CPU's
                kl = f"{kl}, {note}" if kl and note else (kl or note)
                groups[(r["arm"], r["endpoint"], kl)].append(r)
        order = list(ENDPOINTS)
        for (arm, endpoint, kl), recs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]) if kv[0][1] in order else 99, kv[0][2])):
            hw = sorted({i for r in recs for i in hw_ids(r)})
            total = [r["wall_time_s"]["total"] for r in recs]
            per_epoch = [r["wall_time_s"].get("per_epoch_mean") for r in recs if r["wall_time_s"].get("per_epoch_mean")]
            epochs = sorted({r["n_epochs"] for r in recs if r.get("n_epochs") is not None})
            loads = [r["hardware"]["load_average_1_5_15min"][1] for r in recs
                     if (r.get("hardware") or {}).get("load_average_1_5_15min")]
            rows.append([protocol, ALL_ARM_LABELS.get(arm, arm) + (f" ({kl})" if kl else ""), endpoint, len(recs),
                         ", ".join(hw), ", ".join(map(str, epochs)) or DASH, f"{np.mean(per_epoch):.2f}" if per_epoch else DASH,
                         duration(float(np.mean(total))), duration(float(np.sum(total))),
                         f"{max(loads):.1f}" if loads else DASH])
            summary.append({"protocol": protocol, "arm": arm, "endpoint": endpoint, "kl": kl, "n_runs": len(recs),
                            "hardware": hw, "epochs": epochs, "mean_s_per_epoch": float(np.mean(per_epoch)) if per_epoch else None,
                            "mean_run_s": float(np.mean(total)), "total_s": float(np.sum(total)),
                            "max_load_5min_at_end": max(loads) if loads else None})
    if not rows:
        return "No results yet.", {"hardware": {}, "rows": []}
    text = md_table(["Protocol", "Arm (Chem-GMNet: k, L, attention path)", "Endpoint", "Runs", "Hardware", "Epochs", "s / epoch (mean)",
                     "per run (mean)", "total", "load at end (5 min, max)"], rows,
                    ["---", "---", "---", "---:", "---", "---:", "---:", "---:", "---:", "---:"])
    text += "\n\n" + protocol_times(idx, protocols)
    shared = ("; these runs were made side by side by `benchmarks.sweep`, several sharing the GPU (newer records "
              "say how many in `sweep_workers`): their times are each run's share, not a lone run's")
    text += "\n\n" + "\n".join(f"- **{i}**: {label}" + (shared if "(cuda" in label else "") for label, i in labels.items())
    resumed = [r for r in idx.records if r["protocol"] in protocols and r.get("resumed")]
    if resumed:
        whole = sum(1 for r in resumed if r["resumed"].get("fit_wall_seconds_before") is not None)
        text += (f"\n\n{len(resumed)} run(s) were resumed from a training snapshot after an interruption "
                 "(`benchmarks.sweep --snapshot-dir`; the same computation as one uninterrupted fit): their "
                 "hardware lists the machine of every part, and their time adds the earlier parts' "
                 + ("whole time (data preparation included)" if whole == len(resumed)
                    else "epochs only" + (f", for {len(resumed) - whole} of them" if whole else "")
                    + " (parts written before the snapshots timed a part's data preparation)"
                    + (f", and whole time for the other {whole}" if whole else ""))
                 + "; an epoch a kill cut short is not counted.")
    provisional = [r for r in idx.records if r["protocol"] in protocols
                   and (r.get("grid_search") or {}).get("cv_results_verified") is False]
    if provisional:
        text += (f"\n\n{len(provisional)} run(s) are cells of an ablation grid that stopped before it finished "
                 "(`grid_search.cv_results_verified` false: their metrics are the scorer's, their time the "
                 "epochs' and the scoring's only, without data preparation and the rest of the fit): "
                 + ", ".join(sorted(f"{r['protocol']} {r['endpoint']} seed {r['seed']} k={r.get('k')} L={r.get('L')}"
                                    for r in provisional)) + ".")
    return text, {"hardware": {i: label for label, i in labels.items()}, "rows": summary}


def protocol_times(idx: Index, protocols: Sequence[str]) -> str:
    """Per protocol: its runs' wall time summed (each run's threads counted once) and the span from
    the first run's start (``timestamp_utc`` less its wall time) to the last one's end, which is the
    wall clock of a sweep that made them all at once, and more where they were made over sessions."""
    from datetime import datetime, timedelta

    rows = []
    for protocol in protocols:
        recs = [r for r in idx.records if r["protocol"] == protocol and r.get("timestamp_utc")]
        if not recs:
            continue
        ends = [datetime.strptime(r["timestamp_utc"], "%Y-%m-%dT%H:%M:%SZ") for r in recs]
        starts = [end - timedelta(seconds=r["wall_time_s"]["total"]) for end, r in zip(ends, recs)]
        total = sum(r["wall_time_s"]["total"] for r in recs)
        rows.append([protocol, len(recs), duration(total), duration((max(ends) - min(starts)).total_seconds())])
    return ("Per protocol, every run: wall time summed, and the span from the first run's start to the last "
            "one's end (`timestamp_utc` less the run's wall time):\n\n"
            + md_table(["Protocol", "Runs", "wall time summed", "first start to last end"], rows,
                       ["---", "---:", "---:", "---:"]))


def commands_section(idx: Index) -> Tuple[str, list]:
    cmds: Dict[str, dict] = {}
    for r in sorted(idx.records, key=lambda r: r.get("timestamp_utc", "")):
        c = cmds.setdefault(r.get("command", "?"), {"runs": 0, "protocols": set(), "first": r.get("timestamp_utc"),
                                                    "last": r.get("timestamp_utc"), "commits": set()})
        c["runs"] += 1
        c["protocols"].add(r["protocol"])
        c["last"] = r.get("timestamp_utc")
        g = r.get("git", {}) or {}
        if g.get("commit"):
            c["commits"].add(g["commit"][:12] + (" (dirty)" if g.get("dirty") else ""))
    lines, summary = [], []
    for cmd, c in cmds.items():
        lines.append(f"- `{cmd}`  \n  {c['runs']} run(s), protocol {', '.join(sorted(c['protocols']))}, "
                     f"{c['first']} – {c['last']}" + (f", commit {', '.join(sorted(c['commits']))}" if c["commits"] else ""))
        summary.append({"command": cmd, "runs": c["runs"], "protocols": sorted(c["protocols"]), "first": c["first"],
                        "last": c["last"], "commits": sorted(c["commits"])})
    return ("\n".join(lines) if lines else "No results yet."), summary
