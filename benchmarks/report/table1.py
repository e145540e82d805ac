"""Table 1 (test metric, ours beside the paper's), the (k, L) grids, the protocol table and the
runs still missing."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from gmnet_sklearn.estimators.presets import PAPER_TRAINING

from ..protocols import (
    ARM_LABELS,
    ARMS,
    ENDPOINTS,
    EXTRA_ENDPOINTS,
    KL_GRID_K,
    KL_GRID_L,
    PAPER_KL,
    PAPER_KL_PARAMS,
    PROTOCOLS,
    TABLE1_ENDPOINTS,
)
from .._common import stale_parameters
from ._format import DASH, better, duration, fmt, md_table
from ._records import Index, by_device, machines_text, paired, stats, summarise_runs


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
        pair = paired(ours["gmnet"], ours["chemberta"])  # the two arms on the seeds both have
        if pair is not None:
            b = better(pair[0], pair[1], hib)
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
        lines.append(f"- Ours: Chem-GMNet wins {w['ours_gmnet']} of {w['ours_compared']} endpoints with both arms present "
                     "(each on the seeds both arms have), "
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
    # seeds from an ablation grid that stopped before it finished (`grid_search.cv_results_verified`
    # false): their metrics are the scorer's, not yet checked against cv_results_; marked, as the
    # cell they decide may be the bold one
    unverified = {kl: sorted(s for s, r in cells[kl].items()
                             if (r.get("grid_search") or {}).get("cv_results_verified") is False) for kl in ours}
    for kl, s in ours.items():
        s["unverified_seeds"] = unverified[kl]

    def ours_cell(k, L):
        s = ours[k, L]
        return fmt(s["mean"], s["sd"], dec, s["n"], bold=best_ours == (k, L)) + (" †" if unverified[k, L] else "")

    header, rows = _kl_rows(
        ks, Ls,
        lambda k, L: ours_cell(k, L) if (k, L) in ours else DASH,
        lambda k, L: fmt(float(paper[k, L][0]), float(paper[k, L][1]), dec, bold=best_paper == (k, L)) if (k, L) in paper else DASH,
    )
    summary = {f"k{k}_L{L}": {"ours": ours.get((k, L)),
                              "paper": ({"mean": float(paper[k, L][0]), "sd": float(paper[k, L][1])} if (k, L) in paper else None)}
               for k in ks for L in Ls}
    text = md_table(header, rows, ["---"] + ["---:"] * (2 * len(Ls)))
    marked = {kl: seeds for kl, seeds in unverified.items() if seeds}
    if marked:
        text += ("\n\n† A seed of the cell comes from an ablation grid that stopped before it finished "
                 "(`grid_search.cv_results_verified` false: its metric is the scorer's, not yet checked "
                 "against `cv_results_`): " + ", ".join(f"k={k} L={L} seed {', '.join(map(str, s))}"
                                                        for (k, L), s in sorted(marked.items())) + ".")
        if best_ours in marked:
            verified = {kl: stats([r["test_metric"] for sd, r in cells[kl].items() if sd not in unverified[kl]])
                        for kl in ours}
            best_verified = best_of({kl: v["mean"] for kl, v in verified.items() if v})
            if best_verified is not None and best_verified != best_ours:
                text += (f" On the verified seeds alone the best cell is k={best_verified[0]} L={best_verified[1]} "
                         f"({verified[best_verified]['mean']:.{dec}f}, n={verified[best_verified]['n']}) rather than "
                         f"k={best_ours[0]} L={best_ours[1]} ({verified[best_ours]['mean']:.{dec}f}, "
                         f"n={verified[best_ours]['n']})." if verified.get(best_ours) else "")
    return text, summary


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


def _measured(runs: Dict[int, dict], machine_ids: Dict[int, List[str]]) -> Optional[List[dict]]:
    """Wall time of the present runs of a cell, one entry per device (a GPU's and a CPU's are never
    averaged): what its missing seeds are likely to cost."""
    if not runs:
        return None
    return [{"device": device, "n_runs": len(recs), "mean_run_s": float(np.mean([r["wall_time_s"]["total"] for r in recs])),
             "hardware": sorted({i for r in recs for i in machine_ids.get(id(r), [])})}
            for device, recs in by_device(runs.values()).items()]


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
            took = []
            for g in m["measured"] or []:
                n, where = g["n_runs"], machines_text(g["hardware"], g["device"])
                took.append((f"the {n} runs made took {duration(g['mean_run_s'])} on average"
                             if n > 1 else f"the run made took {duration(g['mean_run_s'])}")
                            + (f", on {where}" if where else ""))
            took = f" ({'; '.join(took)})" if took else ""
            lines.append(f"- {ARM_LABELS[m['arm']]}{kl} {m['endpoint']}: {word} {', '.join(map(str, m['seeds']))}{took}")
        lines.append("")
    return "\n".join(lines).rstrip(), missing


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
    n_differ, n = definition_check(idx, [protocol]).get(protocol, (0, 0))
    if n_differ:
        text += (f"\n\n**Warning:** {n_differ} of {n} result files of this protocol were written under a "
                 "different definition of it (their `protocol_definition` differs from `benchmarks/protocols.py`).")
    return text


def _essentials(defn, arm: str, endpoint: str):
    """What a record's run was given under ``defn``: its arm's parameters, its endpoint's
    overrides included (another endpoint's override changes nothing of this record's), and the
    protocol's name (a relabelled record must carry its new protocol's definition). Not the seeds:
    a protocol's list of seeds says which runs to make, not what a run computed."""
    defn = defn or {}
    # Records written before the recipe parameters existed list only lr, batch size, epochs
    # and bucketing: their estimators ran with what is now PAPER_TRAINING for the rest
    # (Adam, no weight decay, no schedule, one member, no augmentation or descriptors).
    training = {**{k: v for k, v in PAPER_TRAINING.items() if k not in defn.get("training", {})},
                **defn.get("training", {})}
    return {"name": defn.get("name"), **training, **defn.get(arm, {}),
            **defn.get("endpoint_overrides", {}).get(endpoint, {})}




def hyperparameter_check(idx: Index) -> Dict[str, Tuple[int, int, List[str]]]:
    """Per protocol defined in protocols.py (runs without ``@`` overrides): how many of its
    transformer-arm records ran with other estimator parameters than the protocol builds today
    (its ``estimator_params`` on the estimator's current defaults: a changed default the
    protocol's definition does not spell out shows here), of how many, and a few examples."""
    out: Dict[str, Tuple[int, int, List[str]]] = {}
    for r in idx.records:
        if PROTOCOLS.get(r["protocol"]) is None or "@" in r["protocol"] or r["arm"] not in ARMS or not r.get("hyperparameters"):
            continue
        differ = stale_parameters(r)
        n_differ, n, examples = out.get(r["protocol"], (0, 0, []))
        if differ:
            examples = examples + [f"{r['arm']} {r['endpoint']} seed {r['seed']}: {differ}"][: max(0, 3 - len(examples))]
        out[r["protocol"]] = (n_differ + bool(differ), n + 1, examples)
    return out


def definition_check(idx: Index, protocols: Optional[Sequence[str]] = None) -> Dict[str, Tuple[int, int]]:
    """Per protocol defined in protocols.py (runs without ``@`` overrides; all of the index's, or
    ``protocols``): how many of its records were written under another definition of it, of how
    many carrying one."""
    out = {}
    for protocol in idx.protocols if protocols is None else protocols:
        base = PROTOCOLS.get(protocol)
        if base is None or "@" in protocol:
            continue
        d = base.to_dict()
        recs = [r for r in idx.records if r["protocol"] == protocol and r.get("protocol_definition")]
        out[protocol] = (sum(_essentials(r["protocol_definition"], r["arm"], r["endpoint"])
                             != _essentials(d, r["arm"], r["endpoint"]) for r in recs), len(recs))
    return out
