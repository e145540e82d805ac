"""The peers a chemist would pick instead (RF on ECFP4, Chemprop) beside our arms, and the defaults
issue's targets against them."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Tuple

import numpy as np

from ..peers import PEER_ARM_LABELS, PEER_ARMS, PEER_PROTOCOL
from ..protocols import ARM_LABELS, ARMS, ENDPOINTS, EXTRA_ENDPOINTS, PROTOCOLS, TABLE1_ENDPOINTS
from ._format import DASH, duration, fmt, md_table
from ._records import Index, by_device, machines_text, paired, summarise_runs


#: Our protocols shown beside the peers: the library's tuned recipe (when its records exist) and
#: the paper's protocol for reference. A protocol without records shows dashes.
PEER_REFERENCE_PROTOCOLS: Tuple[str, ...] = ("tuned", "chemberta3")


def arm_runs(idx: Index, protocol: str, arm: str, endpoint: str) -> Dict[int, dict]:
    """The seeds of one arm; for Chem-GMNet the protocol's default (k, L), or the only (k, L)
    present when the protocol is not (yet) defined in protocols.py (a defined protocol's runs at
    another (k, L) are not its runs)."""
    runs = idx.runs(protocol, arm, endpoint)
    if not runs and arm == "gmnet" and PROTOCOLS.get(idx.base.get(protocol, protocol.split("@")[0])) is None:
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

#: Recipes chosen on the valid splits and scored on test before the defaults take them: a column
#: each (Chem-GMNet, where its records exist), after `tuned`'s, never counted as the row's best (it
#: is that arm's next recipe, not another tool), with its own line against the targets.
#: (None now: round twenty-one's tuned_avg3 became the defaults, its records tuned's.)
CANDIDATE_PROTOCOLS: Tuple[str, ...] = ()


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
    unranked = {NETWORK_ALONE_KEY}
    keys = [key for key, *_ in columns]
    at = keys.index(NETWORK_ALONE_KEY if NETWORK_ALONE_KEY in keys else "gmnet@tuned") + 1
    for p in reversed(CANDIDATE_PROTOCOLS):
        if any(arm_runs(idx, p, "gmnet", ep) for ep in ENDPOINTS):
            columns.insert(at, (f"gmnet@{p}", f"{ARM_LABELS['gmnet']} `{p}` (candidate)", p, "gmnet"))
            unranked.add(f"gmnet@{p}")
            for ep in ENDPOINTS:
                runs[f"gmnet@{p}", ep] = arm_runs(idx, p, "gmnet", ep)
    endpoints = list(TABLE1_ENDPOINTS) + [e for e in EXTRA_ENDPOINTS
                                          if any(runs[key, e] for key, _, p, _ in columns if p != "chemberta3")]
    rows, time_rows, summary, best_count, split_issues, n_checked, n_unmarked = [], [], {}, defaultdict(int), [], 0, 0
    for name in endpoints:
        ep = ENDPOINTS[name]
        stats_ = {key: summarise_runs(runs[key, name]) for key, *_ in columns}
        present = common_seed_means({k: v for k, v in stats_.items() if v and k not in unranked})
        best = set()
        if present:
            # at the printed precision: a lead too small to show is a tie (both bold, both counted)
            shown = {k: round(v, ep.decimals) for k, v in present.items()}
            target = (max if ep.higher_is_better else min)(shown.values())
            best = {k for k, v in shown.items() if v == target}
            for k in best:
                best_count[k] += 1
        row = [ep.label + ("" if ep.table1 else " *"), ep.metric_label]
        trow = [ep.label + ("" if ep.table1 else " *")]
        esum = {"metric": ep.metric, "higher_is_better": ep.higher_is_better, "best": sorted(best), "columns": {}}
        for key, _, protocol, arm in columns:
            st = stats_[key]
            row.append(fmt(st["mean"], st["sd"], ep.decimals, st["n"], bold=key in best) if st else DASH)
            recs = list(runs[key, name].values())
            if key == NETWORK_ALONE_KEY:  # its fit is the blend's (the column before): no time of its own
                trow.append(DASH)
                esum["columns"][key] = {"protocol": protocol, "arm": arm, "test": st, "mean_fit_s": None,
                                        "hardware": [], "fit_s_by_device": {}}
                continue
            hw = sorted({i for r in recs for i in machine_ids.get(id(r), [])})
            times, by_dev = [], {}
            for device, group in by_device(recs).items():  # one mean per device, never across them
                fits = [(r.get("wall_time_s") or {}).get("fit", (r.get("wall_time_s") or {}).get("total")) for r in group]
                fits = [f for f in fits if f is not None]
                if not fits:
                    continue
                ids = sorted({i for r in group for i in machine_ids.get(id(r), [])})
                where = machines_text(ids, device)
                times.append(f"{duration(float(np.mean(fits)))}" + (f" ({where})" if where else ""))
                by_dev[device] = {"mean_fit_s": float(np.mean(fits)), "n": len(fits), "hardware": ids}
            trow.append("; ".join(times) or DASH)
            # mean_fit_s: the CPU's only (this project's machines), so that no ratio of two columns
            # mixes a GPU's seconds with a CPU's; other devices' are in fit_s_by_device
            main = by_dev.get("cpu")
            esum["columns"][key] = {"protocol": protocol, "arm": arm, "test": st,
                                    "mean_fit_s": main["mean_fit_s"] if main else None, "hardware": hw,
                                    "fit_s_by_device": by_dev}
        shas = {r["sizes"].get("split_sha256") for key, *_ in columns for r in runs[key, name].values()
                if (r.get("sizes") or {}).get("split_sha256")}
        n_unmarked += sum(not (r.get("sizes") or {}).get("split_sha256") for key, *_ in columns
                          if key != NETWORK_ALONE_KEY for r in runs[key, name].values())
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
            f"{label} {best_count[key]}" for key, label, _, _ in columns if best_count[key]) + (
            f" (of {n_rows} rows; ranked on the seeds the row's columns share, at the printed precision: "
            "a tie counts for each)")
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
                 "per endpoint: those arms trained and were scored on the same rows"
                 + (f" ({n_unmarked} record(s) above, made before the fingerprint was recorded, carry none: their "
                    "split is DeepChem's by the same code, not checked here)." if n_unmarked else "."))
    return text, {"columns": {key: {"label": label, "protocol": p, "arm": arm} for key, label, p, arm in columns},
                  "endpoints": summary, "best_count": dict(best_count), "split_mismatch": split_issues,
                  "records_without_split_fingerprint": n_unmarked}


def common_seed_means(columns: Dict[str, dict]) -> Dict[str, float]:
    """Each column's mean over the seeds every column has (``_records.paired`` for many columns):
    a mean over seeds 0-2 is never ranked against one over seed 0 alone. Empty when they share no
    seed; a column without a value on one of those seeds (a NaN metric) is left out."""
    if not columns:
        return {}
    common = sorted(set.intersection(*(set(c["seeds"]) for c in columns.values())))
    out = {}
    for key, c in columns.items():
        values = dict(zip(c["seeds"], c["values"]))
        picked = [values[s] for s in common]
        if picked and all(v is not None and np.isfinite(v) for v in picked):
            out[key] = float(np.mean(picked))
    return out


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
        # met only against every peer, on the same seeds: not against whichever happen to be there
        lacking = [PEER_ARM_LABELS[key] for key in PEER_ARMS if key not in peers]
        # (a seed without a figure on either side, null in its record, is no shared seed either:
        # the means would be over different draws)
        uneven = [PEER_ARM_LABELS[key] for key in peers if peers[key]["seeds"] != mine["seeds"]
                  or (p := paired(mine, peers[key])) is None or p[2] != list(mine["seeds"])]
        if lacking or uneven:
            absent.append(f"{ep.label} (" + "; ".join(
                ([f"no {', '.join(lacking)} records"] if lacking else [])
                + ([f"{', '.join(uneven)} on other seeds than ours"] if uneven else [])) + ")")
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
        parts.append("Not comparable yet: " + ", ".join(absent) + ".")
    text = " ".join(parts)
    if ours == "gmnet@tuned" and any(NETWORK_ALONE_KEY in summary[n]["columns"] for n in PEER_TARGET_ENDPOINTS):
        text += "\n\n" + peer_targets_text(summary, NETWORK_ALONE_KEY, "the network of Chem-GMNet `tuned` alone")
    for p in CANDIDATE_PROTOCOLS if ours == "gmnet@tuned" else ():
        if any(f"gmnet@{p}" in summary[n]["columns"] for n in PEER_TARGET_ENDPOINTS):
            text += "\n\n" + peer_targets_text(summary, f"gmnet@{p}", f"Chem-GMNet `{p}`, the candidate recipe,")
    return text


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
