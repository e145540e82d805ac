"""Regenerate ``benchmarks/README.md`` and ``benchmarks/results/summary.json`` from the result JSONs.

    python -m benchmarks.report [--results-dir benchmarks/results] [--output benchmarks/README.md]
                                [--protocol chemberta3]

Every figure in the README comes from the result files (ours) or from the endpoint table
(``gmnet_sklearn/datasets/endpoints.py``; the paper's, copied from ``paper/chem-gmnet.tex``);
nothing is typed in by hand. Means are over the seeds present, with the population standard
deviation (numpy ``std(ddof=0)``), as the paper.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _common as C
from .peers import PEER_ARM_LABELS, PEER_ARMS, PEER_PROTOCOL
from gmnet_sklearn.estimators.presets import PAPER_TRAINING

from .protocols import (
    ARM_LABELS,
    ARMS,
    ENDPOINTS,
    EXTRA_ENDPOINTS,
    KL_GRID_K,
    KL_GRID_L,
    PAPER_KL,
    PAPER_KL_LABELS,
    PAPER_KL_PARAMS,
    PROTOCOLS,
    PUBLISHED_DEEPCHEM_SPLIT,
    TABLE1_ENDPOINTS,
    error_ratio,
)

DASH = "—"
ALL_ARM_LABELS: Dict[str, str] = {**ARM_LABELS, **PEER_ARM_LABELS}
DEFAULT_OUTPUT = C.REPO / "benchmarks" / "README.md"


# ------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------
def load_results(results_dir) -> List[dict]:
    """Every result JSON under ``<results>/<protocol>/<arm>/<endpoint>/``, with its path."""
    results_dir = Path(results_dir)
    out = []
    for path in sorted(results_dir.glob("*/*/*/*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            C.eprint(f"report: skipping unreadable {path}: {exc}")
            continue
        if not isinstance(rec, dict) or rec.get("schema") != C.RESULT_SCHEMA:
            continue
        rec["_path"] = path
        out.append(rec)
    return out


def stats(values: Sequence[float]) -> Optional[Dict[str, float]]:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None
    arr = np.asarray(vals, dtype=np.float64)
    return {"mean": float(arr.mean()), "sd": float(arr.std(ddof=0)), "n": int(arr.size)}


def default_kl(protocol_base: str) -> Tuple[Optional[int], Optional[int]]:
    p = PROTOCOLS.get(protocol_base)
    return (p.gmnet.get("k"), p.gmnet.get("L")) if p else (None, None)


class Index:
    """Result records grouped by protocol / arm / endpoint / (k, L) / seed."""

    def __init__(self, records: Iterable[dict]):
        self.records = list(records)
        self.by: Dict[str, Dict[str, Dict[str, Dict[Tuple, Dict[int, dict]]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(dict))))
        self.base: Dict[str, str] = {}
        for r in self.records:
            kl = (r.get("k"), r.get("L")) if r["arm"] == "gmnet" else (None, None)
            self.by[r["protocol"]][r["arm"]][r["endpoint"]][kl][int(r["seed"])] = r
            self.base[r["protocol"]] = r.get("protocol_base", r["protocol"].split("@")[0])

    @property
    def protocols(self) -> List[str]:
        return sorted(self.by)

    def runs(self, protocol: str, arm: str, endpoint: str, kl=None) -> Dict[int, dict]:
        if kl is None:
            kl = default_kl(self.base.get(protocol, protocol.split("@")[0])) if arm == "gmnet" else (None, None)
        return self.by.get(protocol, {}).get(arm, {}).get(endpoint, {}).get(kl, {})

    def kl_cells(self, protocol: str, endpoint: str) -> Dict[Tuple[int, int], Dict[int, dict]]:
        return {kl: seeds for kl, seeds in self.by.get(protocol, {}).get("gmnet", {}).get(endpoint, {}).items()}


def summarise_runs(runs: Dict[int, dict]) -> Optional[dict]:
    s = stats([runs[s]["test_metric"] for s in sorted(runs)])
    if s is None:
        return None
    s["seeds"] = sorted(runs)
    s["values"] = [runs[k]["test_metric"] for k in sorted(runs)]
    s["valid"] = stats([runs[k].get("valid_metric") for k in sorted(runs)])
    return s


# ------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------
def fmt(mean: Optional[float], sd: Optional[float], dec: int, n: Optional[int] = None, bold: bool = False) -> str:
    if mean is None:
        return DASH
    # One seed has no spread: "± 0.000" would read as a measured zero.
    s = f"{mean:.{dec}f}" if n == 1 else f"{mean:.{dec}f} ± {sd:.{dec}f}"
    if bold:
        s = f"**{s}**"
    return s + (f" (n={n})" if n is not None else "")


def better(a: float, b: float, higher_is_better: bool) -> Optional[bool]:
    """True if a beats b, False if b beats a, None on a tie."""
    if a == b:
        return None
    return (a > b) if higher_is_better else (a < b)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Optional[Sequence[str]] = None) -> str:
    align = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def rel(path, start) -> str:
    return os.path.relpath(Path(path).resolve(), Path(start).resolve())


# ------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------
def table1(idx: Index, protocol: str, endpoints: Sequence[str]) -> Tuple[str, dict]:
    rows, summary = [], {}
    wins = {"ours_gmnet": 0, "ours_chemberta": 0, "ours_ties": 0, "ours_compared": 0,
            "paper_gmnet": 0, "paper_chemberta": 0, "paper_compared": 0, "same_winner_as_paper": 0,
            "vs_paper": {arm: {"better": 0, "worse": 0, "equal": 0, "compared": 0} for arm in ARMS}}
    for name in endpoints:
        ep = ENDPOINTS[name]
        dec = ep.decimals
        hib = ep.higher_is_better
        ours = {arm: summarise_runs(idx.runs(protocol, arm, name)) for arm in ARMS}
        paper = {arm: ep.paper_value(arm) for arm in ARMS}
        ours_win = paper_win = None
        if ours["gmnet"] and ours["chemberta"]:
            b = better(ours["gmnet"]["mean"], ours["chemberta"]["mean"], hib)
            ours_win = "tie" if b is None else ("gmnet" if b else "chemberta")
            if ep.table1:
                wins["ours_compared"] += 1
                wins["ours_ties" if b is None else f"ours_{ours_win}"] += 1
        if paper["gmnet"] and paper["chemberta"]:
            b = better(paper["gmnet"][0], paper["chemberta"][0], hib)
            paper_win = "tie" if b is None else ("gmnet" if b else "chemberta")
            if ep.table1:
                wins["paper_compared"] += 1
                if b is not None:
                    wins[f"paper_{paper_win}"] += 1
        if ep.table1 and ours_win and paper_win and ours_win == paper_win:
            wins["same_winner_as_paper"] += 1
        for arm in ARMS:
            if ep.table1 and ours[arm] and paper[arm]:
                vp = wins["vs_paper"][arm]
                vp["compared"] += 1
                b = better(ours[arm]["mean"], paper[arm][0], hib)
                vp["equal" if b is None else ("better" if b else "worse")] += 1
        row = [ep.label + ("" if ep.table1 else " *"), ep.metric_label]
        for arm in ARMS:
            p = paper[arm]
            row.append(fmt(*(p or (None, None)), dec, bold=paper_win == arm) if p else DASH)
        for arm in ARMS:
            o = ours[arm]
            row.append(fmt(o["mean"], o["sd"], dec, o["n"], bold=ours_win == arm) if o else DASH)
        rows.append(row)
        summary[name] = {"metric": ep.metric, "higher_is_better": hib, "table1": ep.table1,
                         "paper": {arm: ({"mean": paper[arm][0], "sd": paper[arm][1]} if paper[arm] else None) for arm in ARMS},
                         "ours": ours, "ours_winner": ours_win, "paper_winner": paper_win}
    header = ["Endpoint", "Metric", "Paper Chem-GMNet", "Paper ChemBERTa", "Ours Chem-GMNet", "Ours ChemBERTa"]
    return md_table(header, rows, ["---", "---", "---:", "---:", "---:", "---:"]), {"endpoints": summary, "wins": wins}


def wins_text(w: dict, vs_paper: bool = True) -> str:
    lines = []
    if w["paper_compared"] and vs_paper:
        lines.append(f"- Paper: Chem-GMNet wins {w['paper_gmnet']} of {w['paper_compared']} endpoints, "
                     f"ChemBERTa {w['paper_chemberta']}.")
    if w["ours_compared"]:
        lines.append(f"- Ours: Chem-GMNet wins {w['ours_gmnet']} of {w['ours_compared']} endpoints with both arms present, "
                     f"ChemBERTa {w['ours_chemberta']}" + (f", ties {w['ours_ties']}" if w["ours_ties"] else "")
                     + (f"; the winner matches the paper's on {w['same_winner_as_paper']} of {w['ours_compared']}."
                        if vs_paper else "."))
    else:
        lines.append("- Ours: no Table-1 endpoint has results for both arms yet.")
    for arm in ARMS if vs_paper else ():
        vp = w["vs_paper"][arm]
        if vp["compared"]:
            lines.append(f"- Ours vs paper, {ARM_LABELS[arm]}: ours better on {vp['better']} of {vp['compared']} endpoints, "
                         f"worse on {vp['worse']}" + (f", equal on {vp['equal']}" if vp["equal"] else "") + ".")
    return "\n".join(lines)


def kl_grid(idx: Index, protocol: str, endpoint: str) -> Tuple[str, dict]:
    ep = ENDPOINTS[endpoint]
    cells = idx.kl_cells(protocol, endpoint)
    paper = PAPER_KL.get(endpoint, {})
    ks = sorted(set(KL_GRID_K) | {k for k, _ in cells} | {k for k, _ in paper})
    Ls = sorted(set(KL_GRID_L) | {L for _, L in cells} | {L for _, L in paper})
    ours = {kl: summarise_runs(seeds) for kl, seeds in cells.items()}
    ours = {kl: s for kl, s in ours.items() if s}
    dec = ep.decimals

    def best_of(values: Dict[Tuple[int, int], float]):
        if not values:
            return None
        pick = max if ep.higher_is_better else min
        return pick(values, key=lambda kl: values[kl])

    best_ours = best_of({kl: s["mean"] for kl, s in ours.items()})
    best_paper = best_of({kl: float(v[0]) for kl, v in paper.items()})
    header, rows = _kl_rows(
        ks, Ls,
        lambda k, L: fmt(ours[k, L]["mean"], ours[k, L]["sd"], dec, ours[k, L]["n"], bold=best_ours == (k, L)) if (k, L) in ours else DASH,
        lambda k, L: fmt(float(paper[k, L][0]), float(paper[k, L][1]), dec, bold=best_paper == (k, L)) if (k, L) in paper else DASH,
    )
    summary = {f"k{k}_L{L}": {"ours": ours.get((k, L)),
                              "paper": ({"mean": float(paper[k, L][0]), "sd": float(paper[k, L][1])} if (k, L) in paper else None)}
               for k in ks for L in Ls}
    return md_table(header, rows, ["---"] + ["---:"] * (2 * len(Ls))), summary


def _kl_rows(ks, Ls, ours_cell, paper_cell):
    """Header and rows of a (k, L) grid with an "ours" and a "paper" column per L."""
    header = ["k \\ L"] + [f"L={L} {who}" for L in Ls for who in ("ours", "paper")]
    rows = [[f"k={k}"] + [cell(k, L) for L in Ls for cell in (ours_cell, paper_cell)] for k in ks]
    return header, rows


def params_grid(idx: Index, protocol: str) -> Optional[str]:
    """Our trainable parameter counts per (k, L) (from BBBP runs, 2 outputs, as the paper's
    count; ESOL's single output otherwise) next to tab:kl-params."""
    counts: Dict[Tuple[int, int], Tuple[int, str]] = {}
    for endpoint in ("esol", "bbbp"):  # bbbp last: it wins
        for kl, seeds in idx.kl_cells(protocol, endpoint).items():
            if seeds:
                counts[kl] = (next(iter(seeds.values()))["n_parameters"], endpoint)
    if not counts:
        return None
    ks = sorted(set(KL_GRID_K) | {k for k, _ in counts})
    Ls = sorted(set(KL_GRID_L) | {L for _, L in counts})
    header, rows = _kl_rows(
        ks, Ls,
        lambda k, L: f"{counts[k, L][0]:,} ({counts[k, L][1]})" if (k, L) in counts else DASH,
        lambda k, L: f"{PAPER_KL_PARAMS[k, L]:,}" if PAPER_KL_PARAMS.get((k, L)) else DASH,
    )
    return md_table(header, rows, ["---"] + ["---:"] * (2 * len(Ls)))


def run_machines(rec: dict) -> List[dict]:
    """The hardware records of a run: one per part for a run resumed from a training snapshot."""
    parts = (rec.get("resumed") or {}).get("parts") or []
    found = [((p.get("meta") or {}).get("hardware")) for p in parts]
    return [h for h in found if h] or [rec.get("hardware", {})]


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
    shared = ("; these runs were made side by side by `benchmarks.sweep`, several sharing the GPU (newer records "
              "say how many in `sweep_workers`): their times are each run's share, not a lone run's")
    text += "\n\n" + "\n".join(f"- **{i}**: {label}" + (shared if "(cuda" in label else "") for label, i in labels.items())
    resumed = [r for r in idx.records if r["protocol"] in protocols and r.get("resumed")]
    if resumed:
        text += (f"\n\n{len(resumed)} run(s) were resumed from a training snapshot after an interruption "
                 "(`benchmarks.sweep --snapshot-dir`; the same computation as one uninterrupted fit): their "
                 "hardware lists the machine of every part, and their time adds the parts' epochs.")
    return text, {"hardware": {i: label for label, i in labels.items()}, "rows": summary}


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


def _measured(runs: Dict[int, dict], machine_ids: Dict[int, List[str]]) -> Optional[dict]:
    """Wall time of the present runs of a cell: what its missing seeds are likely to cost."""
    if not runs:
        return None
    recs = list(runs.values())
    return {"n_runs": len(recs), "mean_run_s": float(np.mean([r["wall_time_s"]["total"] for r in recs])),
            "hardware": sorted({i for r in recs for i in machine_ids.get(id(r), [])})}


def missing_runs(idx: Index, protocol: str, machine_ids: Optional[Dict[int, List[str]]] = None) -> Tuple[str, list]:
    """The expected runs not yet present, by group; with ``machine_ids`` (``hardware_ids``), each
    cell that has some runs says how long they took, and where."""
    base = PROTOCOLS.get(protocol.split("@")[0])
    if base is None:
        return "Unknown protocol: cannot tell which runs are expected.", []
    seeds = list(base.seeds)
    k0, L0 = base.gmnet.get("k"), base.gmnet.get("L")
    missing = []
    for group, endpoints in (("table1", TABLE1_ENDPOINTS), ("extras", EXTRA_ENDPOINTS)):
        for arm in ARMS:
            for ep in endpoints:
                have = idx.runs(protocol, arm, ep)
                miss = [s for s in seeds if s not in have]
                if miss:
                    missing.append({"group": group, "arm": arm, "endpoint": ep, "k": k0 if arm == "gmnet" else None,
                                    "L": L0 if arm == "gmnet" else None, "seeds": miss,
                                    "measured": _measured(have, machine_ids or {})})
    for ep in PAPER_KL:
        for k in KL_GRID_K:
            for L in KL_GRID_L:
                have = idx.kl_cells(protocol, ep).get((k, L), {})
                miss = [s for s in seeds if s not in have]
                if miss:
                    missing.append({"group": "ablation", "arm": "gmnet", "endpoint": ep, "k": k, "L": L, "seeds": miss,
                                    "measured": _measured(have, machine_ids or {})})
    if not missing:
        return "None: every expected run of this protocol is present.", []
    titles = {"table1": "Table 1", "extras": "Extras (beyond the paper)", "ablation": "(k, L) ablation"}
    lines = []
    for group in ("table1", "extras", "ablation"):
        items = [m for m in missing if m["group"] == group]
        if not items:
            continue
        n_missing = sum(len(m["seeds"]) for m in items)
        lines.append(f"**{titles[group]}** ({n_missing} run{'s' if n_missing > 1 else ''}):\n")
        for m in items:
            kl = f" k={m['k']} L={m['L']}" if m["arm"] == "gmnet" else ""
            word = "seed" if len(m["seeds"]) == 1 else "seeds"
            took = ""
            if m["measured"]:
                n, where = m["measured"]["n_runs"], ", ".join(m["measured"]["hardware"])
                took = ((f" (the {n} runs made took {duration(m['measured']['mean_run_s'])} on average"
                         if n > 1 else f" (the run made took {duration(m['measured']['mean_run_s'])}")
                        + (f", on {where}" if where else "") + ")")
            lines.append(f"- {ARM_LABELS[m['arm']]}{kl} {m['endpoint']}: {word} {', '.join(map(str, m['seeds']))}{took}")
        lines.append("")
    return "\n".join(lines).rstrip(), missing


def _throughput_table(data: dict) -> str:
    """One row per (dataset, mode): molecules/s of the models, their ratio, peak memory.

    Newer files also time Chem-GMNet on its eager path ("gmnet_eager"), next to the default path
    (named in ``gmnet_path``: the fused kernel of that device when it was available).
    """
    hw = data.get("hardware", {})
    where = hw.get("gpu") or hw.get("cpu", "?")
    eager = any("gmnet_eager" in e.get("train", {}).get("molecules_per_second", {}) for e in data.get("datasets", {}).values())
    # every arm with a figure in some dataset and mode: the optional arms' tables show only these
    measured = {a for e in data.get("datasets", {}).values() for m in ("train", "inference")
                for a in e.get(m, {}).get("molecules_per_second", {})}
    path = data.get("gmnet_path", "eager zonal forms")
    load = hw.get("load_average_1_5_15min")
    device = (f"Device `{data.get('device')}` ({where}; {hw.get('cpu_count', '?')} cores, torch threads "
              f"{hw.get('torch_threads', '?')}, torch {hw.get('torch', '?')}"
              f"{'' if load is None else f'; load average {load[0]:.2f} when it started'})")
    steps = (f", batch {data.get('batch_size')} ({data.get('batching', 'bucketed')} batches: "
             f"{'shuffled, padded to their longest SMILES' if data.get('batching') == 'plain' else 'length-bucketed'}), "
             f"median of {data.get('rounds')} interleaved rounds of {data.get('steps_per_round')} batches")
    lines = [
        f"{device}{steps if data.get('datasets') else ''}, {data.get('timestamp')}. "
        f"Chem-GMNet ran its default path: {path}. Command: `{data.get('command')}`.",
        "",
    ]
    seeds = data.get("esol_seed") or {}
    if "gmnet_graphs" in measured:
        lines += ["The first table's Chem-GMNet is the model called directly (a launch per kernel); the estimators "
                  "run it on CUDA graphs (`cuda_graphs=True`, their default on CUDA): that is the second table's "
                  "\"Chem-GMNet graphs\".", ""]
    if not data.get("datasets"):
        pass  # the ESOL seed timing alone
    elif eager:
        lines += [
            "| data | mean tokens | mode | Chem-GMNet mol/s | Chem-GMNet eager mol/s | ChemBERTa mol/s | ratio (GMNet / ChemBERTa) | ratio, eager | peak memory GMNet / ChemBERTa |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
    else:
        lines += [
            "| data | mean tokens | mode | Chem-GMNet mol/s | ChemBERTa mol/s | ratio (GMNet / ChemBERTa) | peak memory GMNet / ChemBERTa |",
            "| --- | ---: | --- | ---: | ---: | ---: | --- |",
        ]
    for name, entry in data.get("datasets", {}).items():
        mem = entry.get("peak_memory", {})

        def mib(arm):
            m = mem.get(arm, {})
            v = m.get("peak_gpu_bytes", m.get("rss_growth_during_training_bytes"))
            return "—" if v is None else f"{v / 2**20:.0f} MiB"

        for mode in ("train", "inference"):
            e = entry.get(mode)
            if not e:
                continue
            mps = e["molecules_per_second"]
            tokens = f"{entry.get('batches', {}).get('mean_tokens', float('nan')):.1f}"
            if eager:
                lines.append(
                    f"| {name} | {tokens} | {mode} | {mps['gmnet']:.1f} | {mps['gmnet_eager']:.1f} | {mps['chemberta']:.1f} | "
                    f"{e['ratio_gmnet_over_chemberta']:.2f} | {e['ratio_gmnet_eager_over_chemberta']:.2f} | "
                    f"{mib('gmnet')} / {mib('chemberta')} |"
                )
            else:
                lines.append(
                    f"| {name} | {tokens} | {mode} | {mps['gmnet']:.1f} | "
                    f"{mps['chemberta']:.1f} | {e['ratio_gmnet_over_chemberta']:.2f} | {mib('gmnet')} / {mib('chemberta')} |"
                )
    graph_labels = {"gmnet_graphs": "Chem-GMNet graphs", "gmnet_graphs_bf16": "Chem-GMNet graphs bf16",
                    "gmnet_graphs_triton_readout": "Chem-GMNet graphs, Triton read-outs",
                    "chemberta_graphs": "ChemBERTa graphs"}
    graph_arms = [a for a in graph_labels if a in measured]
    if graph_arms:
        lines += ["", "The CUDA-graph arms (`gm/cuda_graphs.py`: each batch shape's forward and backward replayed "
                  "from graphs; `_bf16`: under bf16 autocast), in the same interleaved rounds, against the baseline "
                  "as it ships (eager) and against the baseline on CUDA graphs too:", "",
                  "| data | mode | " + " | ".join(f"{graph_labels[a]} mol/s" for a in graph_arms)
                  + " | " + " | ".join(f"{graph_labels[a]} / ChemBERTa eager | {graph_labels[a]} / ChemBERTa graphs"
                                       for a in graph_arms if a.startswith("gmnet")) + " |",
                  "| --- | --- |" + " ---: |" * (len(graph_arms) + 2 * sum(a.startswith("gmnet") for a in graph_arms))]
        for name, entry in data.get("datasets", {}).items():
            for mode in ("train", "inference"):
                e = entry.get(mode)
                if not e:
                    continue
                mps = e["molecules_per_second"]
                vs_eager, vs_graphs = e.get("ratio_over_chemberta", {}), e.get("ratio_over_chemberta_graphs", {})
                cells = [f"{mps[a]:.0f}" if a in mps else "failed" for a in graph_arms]
                for a in graph_arms:
                    if a.startswith("gmnet"):
                        cells += [f"{vs_eager[a]:.2f}" if a in vs_eager else "—", f"{vs_graphs[a]:.2f}" if a in vs_graphs else "—"]
                lines.append(f"| {name} | {mode} | " + " | ".join(cells) + " |")
    compiled = [a for a in ("gmnet_compiled", "chemberta_compiled") if a in measured]
    if compiled:
        lines += ["", "Under `torch.compile` (`--arms gmnet_compiled chemberta_compiled`: inductor, dynamic shapes, "
                  "compilation in the untimed warm-up), in the same interleaved rounds: does compiling pay, and the "
                  "ratio when both models are compiled:", "",
                  "| data | mode | Chem-GMNet compiled mol/s | ChemBERTa compiled mol/s | Chem-GMNet compiled / as it ships "
                  "| ChemBERTa compiled / as it ships | Chem-GMNet compiled / ChemBERTa compiled |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for name, entry in data.get("datasets", {}).items():
            for mode in ("train", "inference"):
                mps = entry.get(mode, {}).get("molecules_per_second")
                if not mps:
                    continue
                g, c = mps.get("gmnet_compiled"), mps.get("chemberta_compiled")
                cell = lambda v: "failed" if v is None else f"{v:.0f}"  # noqa: E731
                ratio = lambda a, b: "—" if a is None or b is None else f"{a / b:.2f}"  # noqa: E731
                lines.append(f"| {name} | {mode} | {cell(g)} | {cell(c)} | {ratio(g, mps['gmnet'])} | "
                             f"{ratio(c, mps['chemberta'])} | {ratio(g, c)} |")
    if (graph_arms or compiled) and data.get("failed_arms"):
        lines += ["", "Failed arms: " + "; ".join(f"`{a}`: {err}" for a, err in data["failed_arms"].items())]
    if data.get("complete") is False:
        lines += ["", "**Incomplete**: the run was stopped before its end; the rows above are what it had measured."]
    if data.get("datasets"):
        lines.append("")
        lines.append("Train = forward + backward + Adam step. CPU memory is the growth of peak RSS while training "
                     "(measured in a fresh process per model); GPU memory is `torch.cuda.max_memory_allocated`.")
    if seeds:
        lines += ([""] if lines[-1] else []) + ["One ESOL seed under the chemberta3 protocol (100 epochs, plain shuffled batches, best "
                  "validation epoch restored, test scored), the arms one after the other with the same threads:", "",
                  "| arm | seed | wall time | s / epoch | best epoch | test RMSE |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for arm, r in seeds.items():
            label = ARM_LABELS.get(arm.removesuffix("_bf16"), arm) + (", bf16" if arm.endswith("_bf16") else "")
            lines.append(f"| {label} | {r['seed']} | {r['seconds'] / 60:.1f} min ({r['seconds']:.0f} s) | "
                         f"{r['seconds_per_epoch']:.2f} | {r['best_epoch']}/{r['epochs']} | {r['test_rmse']:.3f} |")
        if {"gmnet", "chemberta"} <= seeds.keys():
            lines += ["", f"Wall-time ratio ChemBERTa / Chem-GMNet: "
                          f"{seeds['chemberta']['seconds'] / seeds['gmnet']['seconds']:.2f}."]
    if "packed tokens" in path:
        lines.append("")
        lines.append("On CPU Chem-GMNet runs its position-wise work on the real tokens only (`gm/packing.py`); the "
                     "baseline pads every row to the batch's longest, as Hugging Face's RoBERTa does. On plain "
                     "shuffled batches, where about half the positions are padding, much of the gap is that.")
    return "\n".join(lines)


def fast_vs_reference_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    """Validation curves of the same seeded run on the fast and the reference attention forms."""
    parts = []
    for f in sorted(results_dir.glob("fast_vs_reference*.json")):
        d = json.loads(f.read_text())
        impl = d.get("fast_impl", "parallel")
        fast, ref = d["runs"][impl], d["runs"]["reference"]
        label = {"parallel": "eager zonal forms"}.get(impl, d.get("gmnet_path", impl))
        hw = d.get("hardware", {})
        parts += [
            f"[{f.name}]({rel(f, out_dir)}): {d['dataset']} seed {d['seed']}, Chem-GMNet k=8 L=3, Adam lr 3e-5, "
            f"batch 32, {d['epochs']} epochs, {d.get('dtype', 'float32')}, on `{d['device']}` ({hw.get('gpu') or hw.get('cpu', '?')}); same batches, "
            f"batch layout ({d.get('layout', 'padded')}) and dropout masks for both. Command: `{d['command']}`.",
            "",
            f"| epoch | valid RMSE, fast (`{impl}`: {label}) | valid RMSE, reference (scan + explicit Phi) |",
            "| ---: | ---: | ---: |",
            *[f"| {e} | {a:.6f} | {b:.6f} |" for e, (a, b) in enumerate(zip(fast["valid_rmse"], ref["valid_rmse"]), 1)],
            "",
            f"Largest difference {d['max_abs_diff_valid_rmse']:.1e}; wall time fast {fast['seconds']:.0f} s, "
            f"reference {ref['seconds']:.0f} s.",
            "",
        ]
        steps = d.get("abs_diff_train_loss_per_step")
        if steps:
            picks = sorted({0, 1, 3, 7, 15, len(steps) - 1} & set(range(len(steps))))
            parts += [
                "|training-loss difference| by step: " + ", ".join(f"step {i + 1}: {steps[i]:.1e}" for i in picks)
                + ". Each step's forward and backward agree to rounding (see `tests/test_model.py::"
                "test_training_trajectory_fast_equals_reference_float64`), but the gap between the two runs grows "
                "geometrically with the steps, in float64 too: the training trajectory itself amplifies rounding "
                "(likely through Adam's lr / (sqrt(v) + eps) rescaling of near-zero gradients; not isolated further).",
                "",
            ]
    return "\n".join(parts) if parts else None


def throughput_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    files = sorted(results_dir.glob("throughput*.json"))
    if not files:
        return None
    parts = []
    for f in files:
        parts.append(f"[{f.name}]({rel(f, out_dir)})")
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("benchmark") == "throughput":
            parts += ["", _throughput_table(data), ""]
            git = data.get("git") or {}
            if git.get("commit"):
                parts += [f"Code: commit {git['commit'][:12]}{' (with uncommitted changes)' if git.get('dirty') else ''}"
                          + (f"; {git['from']}" if git.get("from") else "") + ".", ""]
            if data.get("note"):
                parts += [f"Note: {data['note']}", ""]
    return "\n".join(parts)


def op_count_section(results_dir: Path, out_dir: Path) -> Optional[str]:
    f = results_dir / "op_count.json"
    if not f.is_file():
        return None
    d = json.loads(f.read_text())
    lines = [f"[{f.name}]({rel(f, out_dir)}): ATen ops one training step dispatches (forward + backward, batch "
             f"{d['batch']['B']} x {d['batch']['T']} tokens, padded as on CUDA; Chem-GMNet's fused DualSKA kernel "
             f"counted as one op per output). On a GPU at batch 32 each kernel op is a launch of a few "
             f"microseconds and their number, not arithmetic, sets the step time. Command: `{d['command']}`.", "",
             "| model | kernel ops | all ops (views included) |", "| --- | ---: | ---: |"]
    for label, c in d["counts"].items():
        lines.append(f"| {label} | {c['non_view_ops']:,} | {c['ops']:,} |")
    return "\n".join(lines)


def _cell(v) -> str:
    if v is None:
        return DASH
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|")


# ------------------------------------------------------------------------------------------
# Peers
# ------------------------------------------------------------------------------------------
#: Our protocols shown beside the peers: the library's tuned recipe (when its records exist) and
#: the paper's protocol for reference. A protocol without records shows dashes.
PEER_REFERENCE_PROTOCOLS: Tuple[str, ...] = ("tuned", "chemberta3")


def arm_runs(idx: Index, protocol: str, arm: str, endpoint: str) -> Dict[int, dict]:
    """The seeds of one arm; for Chem-GMNet the protocol's default (k, L), or the only (k, L)
    present when the protocol is not (yet) defined in protocols.py."""
    runs = idx.runs(protocol, arm, endpoint)
    if not runs and arm == "gmnet":
        cells = idx.kl_cells(protocol, endpoint)
        if len(cells) == 1:
            runs = next(iter(cells.values()))
    return runs


def network_alone(runs: Dict[int, dict]) -> Dict[int, dict]:
    """The same runs scored by their network alone: a ``forest=True`` record's metrics without the
    forest (its ``forest.network_*_metric``); records without a forest as they are."""
    return {s: ({**r, "test_metric": r["forest"]["network_test_metric"], "valid_metric": r["forest"]["network_valid_metric"]}
                if r.get("forest") else r) for s, r in runs.items()}


#: The column of Chem-GMNet `tuned`'s network alone (shown where its records blend in a forest).
NETWORK_ALONE_KEY = "gmnet@tuned:network"


def peers_section(idx: Index, machine_ids: Dict[int, List[str]]) -> Tuple[str, dict]:
    """Peers beside our arms, per endpoint: test metric (mean ± sd over seeds; best of the row in
    bold) and mean fit time with the machines (ids of the hardware section). Where Chem-GMNet
    `tuned` blends in a forest, a column beside it shows its network alone (never counted as best:
    it is part of that arm, not another tool)."""
    columns = [(arm, PEER_ARM_LABELS[arm], PEER_PROTOCOL, arm) for arm in PEER_ARMS]
    columns += [(f"{arm}@{p}", f"{ARM_LABELS[arm]} `{p}`", p, arm) for p in PEER_REFERENCE_PROTOCOLS for arm in ARMS]
    runs = {(key, ep): arm_runs(idx, p, arm, ep) for key, _, p, arm in columns for ep in ENDPOINTS}
    if any(r.get("forest") for ep in ENDPOINTS for r in runs["gmnet@tuned", ep].values()):
        at = [key for key, *_ in columns].index("gmnet@tuned") + 1
        columns.insert(at, (NETWORK_ALONE_KEY, "Chem-GMNet `tuned`, network alone", "tuned", "gmnet"))
        for ep in ENDPOINTS:
            runs[NETWORK_ALONE_KEY, ep] = network_alone(runs["gmnet@tuned", ep])
    endpoints = list(TABLE1_ENDPOINTS) + [e for e in EXTRA_ENDPOINTS
                                          if any(runs[key, e] for key, _, p, _ in columns if p != "chemberta3")]
    rows, time_rows, summary, best_count, split_issues, n_checked = [], [], {}, defaultdict(int), [], 0
    for name in endpoints:
        ep = ENDPOINTS[name]
        stats_ = {key: summarise_runs(runs[key, name]) for key, *_ in columns}
        present = {k: v["mean"] for k, v in stats_.items() if v and k != NETWORK_ALONE_KEY}
        best = set()
        if present:
            target = (max if ep.higher_is_better else min)(present.values())
            best = {k for k, v in present.items() if v == target}
            for k in best:
                best_count[k] += 1
        row = [ep.label + ("" if ep.table1 else " *"), ep.metric_label]
        trow = [ep.label + ("" if ep.table1 else " *")]
        esum = {"metric": ep.metric, "higher_is_better": ep.higher_is_better, "best": sorted(best), "columns": {}}
        for key, _, protocol, arm in columns:
            st = stats_[key]
            row.append(fmt(st["mean"], st["sd"], ep.decimals, st["n"], bold=key in best) if st else DASH)
            recs = list(runs[key, name].values())
            fits = [(r.get("wall_time_s") or {}).get("fit", (r.get("wall_time_s") or {}).get("total")) for r in recs]
            fits = [f for f in fits if f is not None]
            hw = sorted({i for r in recs for i in machine_ids.get(id(r), [])})
            trow.append(f"{duration(float(np.mean(fits)))} ({', '.join(hw)})" if fits and hw
                        else (duration(float(np.mean(fits))) if fits else DASH))
            esum["columns"][key] = {"protocol": protocol, "arm": arm, "test": st,
                                    "mean_fit_s": float(np.mean(fits)) if fits else None, "hardware": hw}
        shas = {r["sizes"].get("split_sha256") for key, *_ in columns for r in runs[key, name].values()
                if (r.get("sizes") or {}).get("split_sha256")}
        if len(shas) > 1:
            split_issues.append(ep.label)
        n_checked += bool(shas)
        esum["split_sha256"] = sorted(shas)
        rows.append(row)
        time_rows.append(trow)
        summary[name] = esum
    labels = [label for _, label, _, _ in columns]
    text = md_table(["Endpoint", "Metric", *labels], rows, ["---", "---"] + ["---:"] * len(columns))
    n_rows = sum(1 for name in endpoints if summary[name]["best"])
    if n_rows:
        text += "\n\n" + "Best of the row: " + ", ".join(
            f"{label} {best_count[key]}" for key, label, _, _ in columns if best_count[key]) + f" (of {n_rows} rows)."
    text += ("\n\nMean fit time per seed (the machines are those of the hardware section below; a "
             "transformer arm's fit is its whole training, Chemprop's the whole `chemprop train` process, RF's the "
             "forests' fit):\n\n"
             + md_table(["Endpoint", *labels], time_rows, ["---"] + ["---:"] * len(columns)))
    text += "\n\n" + peer_targets_text(summary)
    if split_issues:
        text += ("\n\n**Warning:** the records of " + ", ".join(split_issues) + " do not all carry the same "
                 "`split_sha256`: some ran on another split.")
    elif n_checked:
        text += ("\n\nEvery record above that carries a split fingerprint (`sizes.split_sha256`) has the same one "
                 "per endpoint: the arms trained and were scored on the same rows.")
    return text, {"columns": {key: {"label": label, "protocol": p, "arm": arm} for key, label, p, arm in columns},
                  "endpoints": summary, "best_count": dict(best_count), "split_mismatch": split_issues}


def fit_time_section(results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    """The default fit's wall time per endpoint (``benchmarks/fit_time.py``) against its target."""
    recs = []
    for path in sorted((Path(results_dir) / "fit_time").glob("*/*/*.json")):
        rec = json.loads(path.read_text())
        if rec.get("schema") == "gmnet-fit-time/1":
            recs.append(rec)
    if not recs:
        return None, {}
    groups: Dict[Tuple[str, str, str], List[dict]] = defaultdict(list)
    for rec in recs:
        groups[rec["arm"], rec["endpoint"], rec.get("variant") or ""].append(rec)
    rows, summary = [], {}
    for (arm, name, variant), group in sorted(groups.items(),
                                              key=lambda kv: (kv[0][0], ENDPOINT_ORDER.get(kv[0][1], 99), kv[0][2])):
        secs = [r["fit_seconds"] for r in group]
        # a variant (e.g. the network alone, timed beside the defaults) is for comparison: no target
        target = None if variant else group[0].get("target_seconds")
        worst = max(secs)
        within = DASH if target is None else ("yes" if worst <= target else f"**no** (+{worst - target:.0f} s)")
        load = max(r["load_average_before"][0] for r in group)
        hw = group[0]["hardware"]
        rows.append([ARM_LABELS.get(arm, arm) + (f", {variant}" if variant else ""), ENDPOINTS[name].label,
                     str(group[0]["n_train"]),
                     ", ".join(f"{s:.0f}" for s in secs), DASH if target is None else str(target), within,
                     str(group[0]["n_estimators"]), str(group[0]["torch_threads"]), f"{load:.2f}",
                     f"{hw.get('cpu_model') or hw.get('cpu') or '?'}"])
        summary[f"{arm}:{name}" + (f":{variant}" if variant else "")] = {
            "fit_seconds": secs, "target_seconds": target, "within": worst <= target if target else None}
    text = md_table(["Arm", "Endpoint", "train molecules", "fit s (per seed)", "target s", "within target",
                     "members", "threads", "load avg (1 min) before", "CPU"], rows)
    return text, summary


ENDPOINT_ORDER = {name: i for i, name in enumerate(ENDPOINTS)}

#: The defaults issue's targets: Chem-GMNet under `tuned` beats the best peer on these endpoints.
PEER_TARGET_ENDPOINTS = ("esol", "freesolv", "lipophilicity", "bace_regression", "clearance", "bace_classification",
                         "bbbp")


def peer_targets_text(summary: dict, ours: str = "gmnet@tuned", what: str = "Chem-GMNet `tuned`") -> str:
    """Per target endpoint: Chem-GMNet `tuned` against the best peer (RF-ECFP4, Chemprop), the gap
    where it does not beat it; the same for its network alone where the runs blend in a forest."""
    beaten, missed, absent = [], [], []
    for name in PEER_TARGET_ENDPOINTS:
        cols = summary[name]["columns"]
        ep = ENDPOINTS[name]
        mine = (cols.get(ours) or {}).get("test")
        peers = {key: cols[key]["test"] for key in PEER_ARMS if (cols.get(key) or {}).get("test")}
        if not mine or not peers:
            absent.append(ep.label)
            continue
        best_key = (max if ep.higher_is_better else min)(peers, key=lambda k: peers[k]["mean"])
        best = peers[best_key]["mean"]
        gap = mine["mean"] - best
        label = (f"{ep.label} ({mine['mean']:.{ep.decimals}f} vs {PEER_ARM_LABELS[best_key]} "
                 f"{best:.{ep.decimals}f}, n={mine['n']})")
        if gap != 0 and (gap > 0) == ep.higher_is_better:
            beaten.append(label)
        else:
            missed.append(label[:-1] + f"; gap {abs(gap):.{ep.decimals}f})")
    lead = (f"**Targets** ({what} beats the best peer): met on" if ours == "gmnet@tuned"
            else f"For comparison, not a target: {what} beats the best peer on")
    parts = [f"{lead} {len(beaten)} of {len(PEER_TARGET_ENDPOINTS)}" + (": " + "; ".join(beaten) if beaten else "") + "."]
    if missed:
        parts.append("Not met: " + "; ".join(missed) + ".")
    if absent:
        parts.append("No records yet: " + ", ".join(absent) + ".")
    text = " ".join(parts)
    if ours == "gmnet@tuned" and any(NETWORK_ALONE_KEY in summary[n]["columns"] for n in PEER_TARGET_ENDPOINTS):
        text += "\n\n" + peer_targets_text(summary, NETWORK_ALONE_KEY, "the network of Chem-GMNet `tuned` alone")
    return text

FIT_TIME_INTRO = """\
Wall time of `fit` for the estimators with their defaults, called as a user would
(`GMNetRegressor(random_state=s).fit(X_train, y_train)`: the internal scaffold split picks the
best epoch), on the training part of the DeepChem scaffold split, written by
`python -m benchmarks.fit_time --threads 2` run alone on the machine (the load average before
each fit shows whether anything else ran: the previous fit's two threads account for about 2).
The C++ kernels are built before the clock starts. Rows "network alone" are the same fit with
`forest=False` (`--without-forest`), timed on the same machine to show the forest's share."""


PEERS_INTRO = """\
The arms a chemist would try first, on the same DeepChem scaffold splits (`benchmarks/peers.py`,
written by `python -m benchmarks.run --arm rf_ecfp chemprop ...`), each with its own defaults and
no tuning: **RF-ECFP4**, scikit-learn random forests (500 trees) on RDKit Morgan fingerprints
(radius 2, 2048 bits), one forest per task on its labelled rows; **Chemprop**, Chemprop v2
(2.3.1, in its own venv) through its command line with its defaults (50 epochs, the
best-validation epoch by its `val_loss`). Clearance is trained on log(y + 1) and every metric is
in original units, as for our arms. Beside them: our arms under protocol `tuned` (the library's
tuned recipe; dashes until its records exist) and under `chemberta3` (Table 1) for reference.
Population sd over the seeds present, `n` seeds; **bold**: the best of the row. `*`: beyond the
paper's Table 1."""


# ------------------------------------------------------------------------------------------
# Model features (benchmarks/embedder_features.py)
# ------------------------------------------------------------------------------------------
EMBEDDER_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("gmnet", "Chem-GMNet itself"), ("rf_pooled", "RF, pooled"), ("ridge_pooled", "ridge, pooled"),
    ("rf_head", "RF, head input"), ("ridge_head", "ridge, head input"),
    ("rf_moments", "RF, moments"), ("ridge_moments", "ridge, moments"), ("rf_ecfp4", "RF-ECFP4"))


def embedder_section(results_dir: Path, out_dir: Path) -> Tuple[Optional[str], dict]:
    """RF and ridge on GMNetEmbedder features vs RF on ECFP4, test metric per endpoint (mean ± sd
    over seeds, best of the row in bold), one table per protocol; None without full-run records
    (``@limit`` runs and the like are left out)."""
    from .embedder_features import load_records

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
defaults is fitted on the scaffold train split (valid split for its best epoch), then
`GMNetEmbedder` turns the molecules into its pooled encoder state (`pooled`), the head's input
(`head input`: pooled state plus the fused descriptors) or its flattened terminal Gated-SFA moment
matrices (`moments`, Theorem 1), and random forests (500 trees; on `moments` sqrt(n_features) per
split) and ridge (`RidgeCV`; L2 logistic regression for classification, standardised features)
are fitted on them beside RF on ECFP4. Test metric, population sd over the seeds present, `n`
seeds; **bold**: the best of the row."""


# ------------------------------------------------------------------------------------------
# MoleculeNet classification beyond Table 1 (Tox21's 12 tasks, HIV)
# ------------------------------------------------------------------------------------------
def extras_section(idx: Index) -> Tuple[str, dict]:
    """The endpoints beyond the paper's Table 1: our arms under every protocol that has runs of
    them (``tuned``, the library's defaults, always shown), the SMILES left out because RDKit
    cannot parse them, and the best published DeepChem-split figure with its source."""
    shown = ["tuned"] + [p for p in idx.protocols
                         if any(arm_runs(idx, p, arm, e) for arm in ARMS for e in EXTRA_ENDPOINTS)]
    columns = [(p, arm) for p in dict.fromkeys(shown) for arm in ARMS]
    rows, summary = [], {}
    for name in EXTRA_ENDPOINTS:
        ep = ENDPOINTS[name]
        runs = {(p, arm): arm_runs(idx, p, arm, name) for p, arm in columns}
        stats_ = {key: summarise_runs(r) for key, r in runs.items()}
        dropped = sorted({(r.get("sizes") or {}).get("dropped_invalid_smiles") for rs in runs.values()
                          for r in rs.values()} - {None})
        pub = PUBLISHED_DEEPCHEM_SPLIT.get(name)
        row = [ep.label, ep.metric_label]
        row += [fmt(st["mean"], st["sd"], ep.decimals, st["n"]) if st else DASH for st in stats_.values()]
        row += [", ".join(map(str, dropped)) if dropped else DASH,
                published_cell(pub), pub.source if pub else "not cited"]
        rows.append(row)
        summary[name] = {"metric": ep.metric, "units": ep.units,
                         "ours": {f"{arm}@{p}": st for (p, arm), st in stats_.items()},
                         "dropped_invalid_smiles": dropped,
                         "published": ({"figure": pub.figure, "model": pub.model, "source": pub.source}
                                       if pub else None)}
    header = ["Endpoint", "Metric", *[f"{ARM_LABELS[arm]} `{p}`" for p, arm in columns],
              "SMILES left out (RDKit cannot parse)", "Best published, DeepChem scaffold split", "Source"]
    text = md_table(header, rows, ["---", "---"] + ["---:"] * len(columns) + ["---:", "---:", "---"])
    return text, {"columns": [f"{arm}@{p}" for p, arm in columns], "endpoints": summary}


def published_cell(pub) -> str:
    if not (pub and pub.figure):
        return "not cited"
    return f"{pub.figure} ({pub.model})" if pub.model else pub.figure


EXTRAS_INTRO = """\
MoleculeNet's classification suite beyond the paper's Table 1, on the same DeepChem scaffold split:
Tox21 with all 12 tasks as one multi-task model (missing labels masked in loss and metric; mean
ROC-AUC over the tasks) and HIV (41,127 molecules). SMILES RDKit cannot parse are left out before
the split, as DeepChem's loaders do (each record counts them: `sizes.dropped_invalid_smiles`,
`sizes.invalid_smiles_rows`). `python -m benchmarks.run --arm gmnet chemberta --protocol tuned
--endpoints tox21 hiv` fills the `tuned` columns; protocols with `@` overrides (`--limit`,
`--max-epochs`) are plumbing checks, not results."""


# ------------------------------------------------------------------------------------------
# Table 2: pretrained encoders
# ------------------------------------------------------------------------------------------
#: Fine-tuning protocols from a pretrained encoder, each beside its scratch protocol.
PRETRAINED_PROTOCOLS: Tuple[Tuple[str, str], ...] = (("tuned_moses", "tuned"), ("tuned_moses_ft", "tuned"),
                                                    ("chemberta3_moses", "chemberta3"))


def pretraining_rows() -> List[List[str]]:
    """What each shipped encoder's pretraining did, from its config.json (the package's folder)."""
    from gmnet_sklearn.estimators.warm_start import NAMED, PACKAGE_DIR

    rows = []
    for name, families in NAMED.items():
        for arm, folder in families.items():
            path = PACKAGE_DIR / folder / "config.json"
            if not path.is_file():
                rows.append([f"`{name}` {ARM_LABELS[arm]}", "not shipped"] + [DASH] * 5)
                continue
            cfg = json.loads(path.read_text())
            t = cfg.get("training", {})
            d = t.get("definition", {})
            last = (t.get("history") or [{}])[-1]
            hw = t.get("hardware", {})
            rows.append([f"`{name}` {ARM_LABELS[arm]}",
                         f"{t.get('steps')} steps × {d.get('batch_size')} SMILES ({t.get('epochs', 0):.2f} epoch), "
                         f"{t.get('smiles_seen', 0):,} SMILES, {t.get('tokens_seen', 0):,} tokens",
                         f"AdamW lr {d.get('lr')}, wd {d.get('weight_decay')}, {d.get('lr_schedule')} decay, "
                         f"warm-up {d.get('warmup')}, clip {d.get('max_grad_norm')}",
                         f"{last.get('eval_loss', float('nan')):.3f} / {last.get('eval_accuracy', float('nan')):.3f}",
                         duration(float(t.get("seconds", 0.0))),
                         f"{t.get('smiles_per_second', 0):.0f}",
                         f"{hw.get('cpu', hw.get('gpu', '?'))}, {hw.get('torch_threads')} thread(s), torch {hw.get('torch')}"])
    return rows


def table2_section(idx: Index, results_dir: Path) -> Tuple[Optional[str], dict]:
    """The paper's Table 2 beside ours: both arms fine-tuned from the pretrained encoders, their
    scratch runs under the same recipe, and the best peer; with the two counts the issue asks for
    (pretrained vs scratch for Chem-GMNet, pretrained Chem-GMNet vs pretrained ChemBERTa)."""
    from gmnet_sklearn.datasets.endpoints import PAPER_TABLE2

    if not any(idx.runs(p, arm, e) for p, _ in PRETRAINED_PROTOCOLS for arm in ARMS for e in PAPER_TABLE2):
        return None, {}
    parts, summary = [], {}
    for pre, scratch in PRETRAINED_PROTOCOLS:
        if not any(idx.runs(pre, arm, e) for arm in ARMS for e in PAPER_TABLE2):
            continue  # a fine-tuning recipe with no runs yet
        rows, counts = [], {"pretrained_beats_scratch": [0, 0], "gmnet_beats_chemberta_pretrained": [0, 0]}
        esum = {}
        for name, paper in PAPER_TABLE2.items():
            ep = ENDPOINTS[name]
            dec, hib = ep.decimals, ep.higher_is_better
            st = {(p, arm): summarise_runs(block_runs(idx, pre, p, arm, name)) for p in (pre, scratch) for arm in ARMS}
            peers = {arm: summarise_runs(idx.runs(PEER_PROTOCOL, arm, name)) for arm in PEER_ARMS}
            peers = {a: v for a, v in peers.items() if v}
            best_peer = None
            if peers:
                best_peer = (max if hib else min)(peers.items(), key=lambda kv: kv[1]["mean"])
            g, c, gs = st[pre, "gmnet"], st[pre, "chemberta"], st[scratch, "gmnet"]
            if g and gs:
                counts["pretrained_beats_scratch"][1] += 1
                counts["pretrained_beats_scratch"][0] += bool(better(g["mean"], gs["mean"], hib))
            if g and c:
                counts["gmnet_beats_chemberta_pretrained"][1] += 1
                counts["gmnet_beats_chemberta_pretrained"][0] += bool(better(g["mean"], c["mean"], hib))
            win = None
            if g and c:
                b = better(g["mean"], c["mean"], hib)
                win = None if b is None else ("gmnet" if b else "chemberta")
            pg, pc = paper["gmnet"], paper["chemberta"]
            rows.append([ep.label, ep.metric_label, f"{pg[0]} ± {pg[1]}", pc[0],
                         *(fmt(st[pre, arm]["mean"], st[pre, arm]["sd"], dec, st[pre, arm]["n"], bold=win == arm)
                           if st[pre, arm] else DASH for arm in ARMS),
                         *(fmt(st[scratch, arm]["mean"], st[scratch, arm]["sd"], dec, st[scratch, arm]["n"])
                           if st[scratch, arm] else DASH for arm in ARMS),
                         (f"{fmt(best_peer[1]['mean'], best_peer[1]['sd'], dec, best_peer[1]['n'])} "
                          f"({PEER_ARM_LABELS[best_peer[0]]})") if best_peer else DASH])
            esum[name] = {"paper": {arm: paper[arm] for arm in ARMS},
                          "ours": {f"{arm}@{p}": st[p, arm] for p in (pre, scratch) for arm in ARMS},
                          "best_peer": {"arm": best_peer[0], **best_peer[1]} if best_peer else None}
        header = ["Endpoint", "Metric", "Paper Chem-GMNet (10M ZINC)", "Paper ChemBERTa-2 MLM-10M",
                  f"Chem-GMNet `{pre}`", f"ChemBERTa `{pre}`", f"Chem-GMNet `{scratch}` (scratch)",
                  f"ChemBERTa `{scratch}` (scratch)", "Best peer"]
        n1, d1 = counts["pretrained_beats_scratch"]
        n2, d2 = counts["gmnet_beats_chemberta_pretrained"]
        parts += [f"Fine-tuned under `{pre}` (warm start) and `{scratch}` (random initialisation), test metric, "
                  "mean ± sd over seeds (n = seeds present). The paper's columns are `tab:pretrain` "
                  "(chemberta3 protocol, 10M ZINC SMILES; ChemBERTa-2's own release figures).", "",
                  md_table(header, rows, ["---", "---"] + ["---:"] * 7), "",
                  f"Targets: pretrained Chem-GMNet beats its scratch runs on **{n1} of {d1}** endpoints measured "
                  f"(target: 6 of 8); pretrained Chem-GMNet beats the equally pretrained ChemBERTa on **{n2} of {d2}** "
                  "(target: 6 of 8).", ""]
        encoders = block_encoders(idx, pre)
        if encoders:
            parts += [encoders_line(encoders), ""]
        valid = warm_start_validation(idx, pre, scratch)
        if valid:
            parts += [f"Validation (the split the defaults are chosen on), Chem-GMNet over the peer-target endpoints with "
                      f"runs of both: `{scratch}` has **{valid['ratio']:.3f}x** the validation error of `{pre}` (mean of "
                      "the per-endpoint ratios of the seed-mean RMSE or 1 - ROC-AUC; above 1: the warm start is "
                      f"better); better on {', '.join(valid['better']) or 'none'}, worse on "
                      f"{', '.join(valid['worse']) or 'none'}.", ""]
        summary[pre] = {"scratch": scratch, "endpoints": esum, "counts": counts, "validation": valid,
                        "encoders": encoders}
    parts += ["The encoders these runs start from (`gmnet_sklearn/pretrained/`, their `config.json`; held-out "
              "masked-LM loss and masked-token accuracy on the first 10,000 SMILES of MOSES's test file at "
              "the end of pretraining):", "",
              md_table(["Encoder", "Budget", "Optimiser", "Held-out loss / accuracy", "Wall time", "SMILES/s",
                        "Hardware"], pretraining_rows()), ""]
    rows = pretraining_record_rows(results_dir)
    if rows:
        parts += ["Pretraining runs that were measured and not shipped (`benchmarks/results/pretrain/`; the last "
                  "held-out evaluation):", "", md_table(["Record", "Run", "Steps (epoch)", "Held-out loss / accuracy",
                                                           "Wall time"], rows), ""]
    records = pretrain_throughput_records(results_dir)
    rows = pretrain_throughput_rows(records)
    if rows:
        parts += ["Pretraining throughput (`python -m benchmarks.pretrain_throughput`: a masked-LM training step on the "
                  "same batches of MOSES SMILES and the same masks, both models interleaved in one process; "
                  "targets: one MOSES epoch within 60 minutes on 2 CPU cores, and 50,000 SMILES/s on a GPU):", "",
                  md_table(["File", "Shape", "Device, batch", "Threads", "Chem-GMNet SMILES/s", "ChemBERTa SMILES/s",
                            "Ratio", "MOSES epoch, Chem-GMNet / ChemBERTa", "Note"], rows), ""]
        commands = [(name, r["command"]) for name, r in records if r.get("command")]
        if commands:
            parts += ["Commands (recorded in each file): " + "; ".join(f"`{name}`: `{cmd}`" for name, cmd in commands), ""]
    return "\n".join(parts), summary


def block_runs(idx: Index, pre: str, protocol: str, arm: str, endpoint: str) -> Dict[int, dict]:
    """The runs of one column of ``pre``'s Table 2 block. The fine-tuning protocols fine-tune the
    network alone (``forest=False``: the block is about the encoder), so a scratch protocol whose
    runs blend in a forest enters by its network alone."""
    runs = arm_runs(idx, protocol, arm, endpoint)
    pre_def = PROTOCOLS.get(pre)
    return network_alone(runs) if protocol != pre and pre_def is not None and not pre_def.training.get("forest") else runs


def block_encoders(idx: Index, protocol: str) -> Dict[str, Dict[str, dict]]:
    """Per arm, the encoders (weights' SHA-256) the protocol's Table-2 runs started from, with the
    pretraining epochs each recorded and how many runs used it."""
    from gmnet_sklearn.datasets.endpoints import PAPER_TABLE2

    out: Dict[str, Dict[str, dict]] = {}
    for arm in ARMS:
        for name in PAPER_TABLE2:
            for r in arm_runs(idx, protocol, arm, name).values():
                pre = r.get("pretrained") or {}
                if pre.get("sha256"):
                    e = out.setdefault(arm, {}).setdefault(pre["sha256"], {"epochs": pre.get("epochs") or 0.0, "runs": 0})
                    e["runs"] += 1
    return out


def encoders_line(encoders: Dict[str, Dict[str, dict]]) -> str:
    """The sentence naming a block's encoders, with a warning when one arm's runs used several."""
    per_arm = "; ".join(f"{ARM_LABELS[arm]}: " + ", ".join(f"`{sha[:12]}` ({e['epochs']:.2f} epoch, {e['runs']} run{'s' if e['runs'] != 1 else ''})"
                                                           for sha, e in shas.items())
                        for arm, shas in encoders.items())
    mixed = any(len(shas) > 1 for shas in encoders.values())
    return (f"Encoders these runs started from (the records' `pretrained`): {per_arm}"
            + (". **Mixed:** some of these runs started from another encoder than the rest; the block compares "
               "unlike budgets until they are all rerun." if mixed else "."))


def warm_start_validation(idx: Index, pre: str, scratch: str) -> Optional[dict]:
    """Chem-GMNet's validation error from scratch over that from the warm start, per peer-target
    endpoint (seed means) and their mean; None without an endpoint that has both."""
    ratios, better_, worse = {}, [], []
    for name in PEER_TARGET_ENDPOINTS:
        ep = ENDPOINTS[name]
        a, b = (summarise_runs(block_runs(idx, pre, p, "gmnet", name)) for p in (scratch, pre))
        if not (a and b and a["valid"] and b["valid"]):
            continue
        ratios[name] = error_ratio(name, a["valid"]["mean"], b["valid"]["mean"])
        (better_ if ratios[name] > 1 else worse if ratios[name] < 1 else []).append(ep.label)
    if not ratios:
        return None
    return {"ratio": float(np.mean(list(ratios.values()))), "per_endpoint": ratios, "better": better_, "worse": worse}


def pretraining_record_rows(results_dir: Path) -> List[List[str]]:
    """One row per saved pretraining record: a finished run's config.json (``config``) or a stopped
    run's checkpoint fields (``history`` at the top level)."""
    rows = []
    for path in sorted((Path(results_dir) / "pretrain").glob("*.json")):
        r = json.loads(path.read_text())
        t = r["config"]["training"] if "config" in r else r
        last = (t.get("history") or [{}])[-1]
        seconds = t.get("seconds", (t.get("counters") or {}).get("seconds", 0.0))
        rows.append([f"`{path.name}`", _cell(r.get("run", "")), f"{last.get('step')} ({last.get('epoch', 0):.2f})",
                     f"{last.get('eval_loss', float('nan')):.3f} / {last.get('eval_accuracy', float('nan')):.3f}",
                     duration(float(seconds))])
    return rows


def pretrain_throughput_records(results_dir: Path) -> List[Tuple[str, dict]]:
    """(file name, record) of each ``pretrain_throughput_*.json``."""
    return [(path.name, json.loads(path.read_text()))
            for path in sorted(Path(results_dir).glob("pretrain_throughput_*.json"))]


def pretrain_throughput_rows(records: List[Tuple[str, dict]]) -> List[List[str]]:
    rows = []
    for name, r in records:
        g, c = r["models"]["gmnet"], r["models"]["chemberta"]
        d = r["shape"]["gmnet"]
        hw = r.get("hardware", {})
        minutes = lambda m: f"{m:.1f}" if m < 10 else f"{m:.0f}"  # noqa: E731
        rows.append([f"`{name}`", f"{r.get('shape_preset', 'paper')} (d {d['d_model']}, {d['n_heads']} heads)",
                     f"{hw.get('gpu') or hw.get('cpu', '?')}, batch {r['batch_size']}",
                     str(r["threads"]), f"{g['smiles_per_second']:.0f}", f"{c['smiles_per_second']:.0f}",
                     f"{r['gmnet_over_chemberta_speed']:.2f}x",
                     f"{minutes(g['moses_epoch_minutes'])} / {minutes(c['moses_epoch_minutes'])} min",
                     _cell(r.get("note") or None)])
    return rows


TABLE2_INTRO = """\
The paper's second result (`tab:pretrain`): both arms pretrained as masked LMs on the same corpus
with the same budget, then fine-tuned. Here the corpus is MOSES (1.58M training SMILES, not the
paper's 10M ZINC), the budget is what a CPU session affords (below), the shape is the library's
default (d 256, 3 layers, 8 heads) rather than the paper's, and fine-tuning uses the library's
defaults (`tuned`) with `pretrained="moses"` (`tuned_moses`) and with the warm-start preset
`MOSES_FINE_TUNING` (`tuned_moses_ft`: the same, at the fine-tuning learning rate chosen on the
valid splits, benchmarks/RECIPE_SEARCH.md). Pretraining: `gmnet-pretrain --shape library`
(DEVELOPERS.md "Pretraining"); fine-tuning: `python -m benchmarks.sweep --what table1 --protocol
tuned_moses_ft --endpoints <the eight>`. The paper's own protocol from the paper-shape encoder
(`pretrained="moses-paper"`) is `chemberta3_moses`, beside the `chemberta3` runs from scratch."""


# ------------------------------------------------------------------------------------------
# README
# ------------------------------------------------------------------------------------------
NOTES = """\
- The paper's text says it used "per-task batch sizes from the chemberta3 paper Table 10";
  docs/protocol.md, which the `chemberta3` protocol follows, fixes one batch size for every
  endpoint (see the protocol table above).
- Data: DeepChem 2.8.0 files and DeepChem-exact scaffold split (80/10/10; SMILES longer than
  200 characters dropped *after* the split). FreeSolv is DeepChem's `freesolv.csv` `y`
  (already z-scored): RMSE in σ units (× 3.845 for kcal/mol). Clearance is trained on
  log(y + 1) and scored on expm1(prediction) in the file's units; its `clearance.csv` is a
  reconstruction (data MANIFEST note 3). Tox21 SR-p53 is split on all molecules first, then
  its unlabelled molecules are dropped; multi-task sets (SIDER, ClinTox, Tox21) keep missing
  labels, masked in loss and metric. Regression targets are z-scored on train inside the
  estimators; every metric is in original units.
- In the (k, L) grids the cell at the protocol's default (k, L) and Table 1's Chem-GMNet row
  are the same result files: `benchmarks.run` and `benchmarks.ablation` write one file per
  (protocol, endpoint, k, L, seed) and produce identical numbers for it. Ablation cells take
  their test and valid figures from `GridSearchCV.cv_results_` (the valid figure through a
  custom scorer on the DeepChem valid split).
- Population standard deviation over the seeds present; `n` is the number of seeds. **Bold**:
  the better arm of a pair (Table 1), or the best cell of a grid. `*`: endpoint beyond the
  paper's Table 1 (no published figures).
"""


def protocol_section(idx: Index, protocol: str) -> str:
    """The protocol's hyperparameters (from protocols.py) and a check that the result files
    were produced under that same definition."""
    base = PROTOCOLS.get(protocol.split("@")[0])
    if base is None:
        return f"Protocol `{protocol}` is not defined in `benchmarks/protocols.py`."
    d = base.to_dict()
    rows = [["seeds", ", ".join(map(str, d["seeds"]))]]
    rows += [[f"training: {k}", f"`{v}`"] for k, v in d["training"].items()]
    rows += [[f"Chem-GMNet: {k}", f"`{v}`"] for k, v in d["gmnet"].items()]
    rows += [[f"ChemBERTa: {k}", f"`{v}`"] for k, v in d["chemberta"].items()]
    for ep, over in d["endpoint_overrides"].items():
        rows.append([f"override for {ep}", f"`{over}`"])
    text = d["description"] + "\n\n" + md_table(["parameter", "value"], rows)
    recs = [r for r in idx.records if r["protocol"] == protocol]
    def essentials(defn):
        defn = {k: v for k, v in (defn or {}).items() if k != "description"}
        if "training" in defn:
            # Records written before the recipe parameters existed list only lr, batch size, epochs
            # and bucketing: their estimators ran with what is now PAPER_TRAINING for the rest
            # (Adam, no weight decay, no schedule, one member, no augmentation or descriptors).
            defn["training"] = {**{k: v for k, v in PAPER_TRAINING.items() if k not in defn["training"]},
                                **defn["training"]}
        return defn

    differ = [r for r in recs if r.get("protocol_definition") and essentials(r["protocol_definition"]) != essentials(d)]
    if differ:
        text += (f"\n\n**Warning:** {len(differ)} of {len(recs)} result files of this protocol were written under a "
                 "different definition of it (their `protocol_definition` differs from `benchmarks/protocols.py`).")
    return text


def render(idx: Index, results_dir: Path, out_path: Path, primary: str) -> Tuple[str, dict]:
    out_dir = out_path.parent
    protocols = [primary] + [p for p in idx.protocols if p != primary]
    summary: Dict[str, object] = {
        "generated_by": "python -m benchmarks.report",
        "n_result_files": len(idx.records),
        "latest_result_timestamp_utc": max((r.get("timestamp_utc", "") for r in idx.records), default=None),
        "primary_protocol": primary,
        "protocols": {},
    }
    parts = [
        "# Benchmarks: Chem-GMNet vs. same-shape ChemBERTa",
        "",
        "<!-- Generated by `python -m benchmarks.report` from the JSON files under "
        f"`{rel(results_dir, out_dir)}/`. Do not edit by hand: re-run the report. -->",
        "",
        f"Generated from {len(idx.records)} result file(s) in [`{rel(results_dir, out_dir)}/`]({rel(results_dir, out_dir)}/)"
        + (f"; the latest was written {summary['latest_result_timestamp_utc']}." if idx.records else "."),
        "Aggregates are also in "
        f"[`{rel(results_dir / 'summary.json', out_dir)}`]({rel(results_dir / 'summary.json', out_dir)}).",
        "",
    ]
    machines = hardware_ids(idx, protocols)
    peer_only = {p for p in idx.protocols if p != primary
                 and all(arm in PEER_ARMS for arm in idx.by[p])}
    for n, protocol in enumerate([p for p in protocols if p not in peer_only]):
        psum: Dict[str, object] = {}
        level = "##" if n == 0 else "###"
        if n == 1:
            parts += ["## Other protocols", "",
                      "Runs under other protocols or with overrides (`@max_epochs=…`, `@limit=…`): "
                      "not comparable with the paper's figures.", ""]
        endpoints = list(TABLE1_ENDPOINTS) + [e for e in EXTRA_ENDPOINTS
                                              if n == 0 or any(idx.runs(protocol, a, e) for a in ARMS)]
        if n > 0:
            endpoints = [e for e in endpoints if any(idx.runs(protocol, a, e) for a in ARMS)]
        k0, L0 = default_kl(idx.base.get(protocol, protocol.split("@")[0]))
        if endpoints:
            title = "Table 1: test metric, paper vs. ours" if n == 0 else f"Protocol `{protocol}`: test metric"
            text, t1 = table1(idx, protocol, endpoints)
            parts += [f"{level} {title}" + (f" (protocol `{protocol}`)" if n == 0 else ""), "",
                      f"Chem-GMNet at k={k0}, L={L0}. Paper: `tab:main` of `paper/chem-gmnet.tex`.", "",
                      text, "", wins_text(t1["wins"], vs_paper=n == 0), ""]
            psum["table1"] = t1
        if n == 0:
            peers_text, peers_summary = peers_section(idx, machines[1])
            summary["peers"] = peers_summary
            parts += ["## Peers: what a chemist would pick instead", "", PEERS_INTRO, "", peers_text, ""]
            ft_text, ft_summary = fit_time_section(results_dir, out_dir)
            if ft_text:
                summary["fit_time"] = ft_summary
                parts += ["## How long a default fit takes", "", FIT_TIME_INTRO, "", ft_text, ""]
            extras_text, extras_summary = extras_section(idx)
            summary["extras"] = extras_summary
            parts += ["## Tox21 (12 tasks) and HIV", "", EXTRAS_INTRO, "", extras_text, ""]
            t2_text, t2_summary = table2_section(idx, results_dir)
            if t2_text:
                summary["table2"] = t2_summary
                parts += ["## Table 2: pretrained encoders", "", TABLE2_INTRO, "", t2_text, ""]
        grids = {}
        for ep in PAPER_KL:
            cells = idx.kl_cells(protocol, ep)
            if n == 0 or len(cells) > 1 or (cells and set(cells) != {(k0, L0)}):
                text, g = kl_grid(idx, protocol, ep)
                grids[ep] = g
                e = ENDPOINTS[ep]
                parts += [f"{level} (k, L) grid: {e.label} test {e.metric_label}"
                          + (f" (protocol `{protocol}`)" if n == 0 else f", protocol `{protocol}`"), "",
                          f"Paper: `{PAPER_KL_LABELS[ep]}`.", "", text, ""]
        if grids:
            psum["kl_grids"] = grids
            pg = params_grid(idx, protocol)
            if pg and n == 0:
                parts += [f"{level} Chem-GMNet trainable parameters over (k, L)", "",
                          "Ours from the result files (BBBP: 2 outputs, as the paper's count; ESOL: 1 output "
                          "where BBBP is missing); paper: `tab:kl-params`.", "", pg, ""]
        if n == 0:
            parts += [f"## Protocol `{protocol}`", "", protocol_section(idx, protocol), ""]
            text, missing = missing_runs(idx, protocol, machines[1])
            psum["missing"] = missing
            parts += [f"## Runs still missing (protocol `{protocol}`)", "", text, "",
                      "Fill them with (`--resume` skips what exists):", "",
                      "```bash",
                      f"python -m benchmarks.run --arm gmnet chemberta --endpoints table1 --protocol {protocol} --resume",
                      f"python -m benchmarks.ablation --endpoints esol bbbp --protocol {protocol} --resume",
                      f"python -m benchmarks.run --arm gmnet chemberta --endpoints extras --protocol {protocol} --resume",
                      "python -m benchmarks.report",
                      "```", ""]
        summary["protocols"][protocol] = psum
    emb_text, emb_summary = embedder_section(results_dir, out_dir)
    if emb_text:
        parts += ["## Model features: RF and ridge on Chem-GMNet's embeddings", "", emb_text, ""]
        summary["embedder_features"] = emb_summary
    flagged = [r for r in idx.records if r.get("warnings")]
    summary["runs_with_warnings"] = [{"file": rel(r["_path"], out_dir), "warnings": r["warnings"]} for r in flagged]
    if flagged:
        parts += ["## Runs with warnings", "", "Kept in the tables above; check them before quoting the figures.", ""]
        parts += [f"- [`{rel(r['_path'], out_dir)}`]({rel(r['_path'], out_dir)}): " + "; ".join(r["warnings"])
                  for r in flagged]
        parts.append("")
    hw_text, hw = hardware_section(idx, protocols, out_dir, machines)
    summary["hardware_and_wall_time"] = hw
    parts += ["## Hardware and wall time", "", "Per group of runs: the machine(s) they ran on and the time they took "
              "(data preparation + fit + scoring). The last column is the machine's 5-minute load "
              "average when a run ended; a run accounts for about its own torch threads, so a load well "
              "above that means other jobs competed for the CPU and the times are inflated.", "", hw_text, ""]
    cmd_text, cmds = commands_section(idx)
    summary["commands"] = cmds
    parts += ["## Commands that produced these results", "", cmd_text, ""]
    tp = throughput_section(results_dir, out_dir)
    oc = op_count_section(results_dir, out_dir)
    if tp:
        parts += ["## Throughput", "", "Written by `benchmarks/throughput.py`:", "", tp, ""]
        summary["throughput_files"] = [p.name for p in sorted(results_dir.glob("throughput*.json"))]
    if oc:
        parts += ["## Kernel ops per training step", "", "Written by `benchmarks/op_count.py`:", "", oc, ""]
    fvr = fast_vs_reference_section(results_dir, out_dir)
    if fvr:
        parts += ["## Fast path vs reference (accuracy)", "", fvr, ""]
    parts += ["## Notes", "", NOTES]
    return "\n".join(parts).rstrip() + "\n", summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--output", default=None, help="README to write (default: benchmarks/README.md, or "
                   "<results-dir>/../README.md when --results-dir is given)")
    p.add_argument("--protocol", default="chemberta3", help="the protocol of the main tables (default chemberta3)")
    p.add_argument("--stdout", action="store_true", help="print the README instead of writing files")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    results_dir = Path(args.results_dir).resolve()
    if args.output:
        out = Path(args.output)
    elif results_dir == C.DEFAULT_RESULTS_DIR.resolve():
        out = DEFAULT_OUTPUT
    else:
        out = results_dir.parent / "README.md"
    idx = Index(load_results(results_dir))
    text, summary = render(idx, results_dir, out.resolve(), args.protocol)
    if args.stdout:
        print(text)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    C.write_json_atomic(results_dir / "summary.json", summary)
    print(f"wrote {out} and {results_dir / 'summary.json'} ({len(idx.records)} result files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
