"""The peer targets on the valid split: does a gap on test show on the split the defaults are
chosen on? If it does not, no recipe chosen on validation can be expected to close it.

Comparable pairs only. The defaults' cells (:func:`defaults_on_valid`) are fitted as a user would (their
own internal split picks the epochs and the forest's weight), so the DeepChem valid split is
untouched by the fit, as it is for RF-ECFP4. Chemprop and our `tuned` runs pick their best epoch
(ours also the forest's weight) on that split, so their figures on it are optimistic, the two
alike."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

from ..peers import PEER_ARM_LABELS
from ..protocols import ENDPOINTS
from ..recipe_search import defaults_candidate, load_cells
from ._format import DASH, better, fmt, md_table
from ._records import paired, paired_by_seed, stats, valid_by_seed
from .peers import PEER_TARGET_ENDPOINTS

#: Which of our figures on the valid split each peer's is compared with: fitted the same way on it.
COMPARABLE = {"rf_ecfp": "defaults", "chemprop": "gmnet@tuned"}


def _valid(cols: dict, key: str) -> Optional[dict]:
    return ((cols.get(key) or {}).get("test") or {}).get("valid")


def _valid_by_seed(cols: dict, key: str) -> Dict[int, float]:
    return valid_by_seed((cols.get(key) or {}).get("test"))


def defaults_on_valid(results_dir: Path, k: Optional[int] = None) -> Tuple[Optional[str], Dict[str, Dict[int, float]]]:
    """The defaults fitted as a user would, scored on the valid split: what the cells are, and their
    figures per endpoint and seed. With ``average_epochs=1`` the recipe search's cells of the
    defaults' candidate. With k > 1 the epoch-average round's cells (``benchmarks/epoch_average.py``:
    one default fit, the best epoch restored, then the k best epochs' average loaded and the forest's
    weight chosen again on the fit's own split, which is what the defaults' fit does), their
    ``top<k>`` variant; a cell whose other parameters are not today's defaults is left out."""
    from ..epoch_average import SCHEMA as EPOCH_AVERAGE_SCHEMA
    from .. import _common as C
    from gmnet_sklearn.estimators import GMNetRegressor

    k = GMNetRegressor().average_epochs if k is None else k  # (the defaults', or the one asked for)
    by_seed: Dict[str, Dict[int, float]] = {}
    if k == 1:
        name = defaults_candidate()
        for rec in load_cells(Path(results_dir) / "recipe_search"):
            if rec["candidate"] == name:
                by_seed.setdefault(rec["endpoint"], {})[rec["seed"]] = rec["valid_metric"]
        return (f"the defaults' search cells (`{name}`)" if name else None), by_seed
    defaults: Dict[str, dict] = {}
    for path in sorted((Path(results_dir) / "epoch_average").glob("*.json")):
        rec, defect = C.read_record(path, schema=EPOCH_AVERAGE_SCHEMA)
        variant = (rec or {}).get("variants", {}).get(f"top{k}")
        if defect or variant is None or rec["endpoint"] not in ENDPOINTS:
            continue
        if rec["endpoint"] not in defaults:  # (one estimator per endpoint's task, not per cell)
            params = C.estimator_class("gmnet", ENDPOINTS[rec["endpoint"]])().get_params(deep=False)
            defaults[rec["endpoint"]] = {key: v for key, v in params.items() if key != "callbacks"}
        expected = {**defaults[rec["endpoint"]], "random_state": rec["seed"]}
        if C.params_differ({**rec["params"], "average_epochs": k}, expected, recorded_only=True) is None:
            by_seed.setdefault(rec["endpoint"], {})[rec["seed"]] = variant["valid_metric"]
    return f"the defaults' cells (`epoch_average` top{k})", by_seed


def validation_section(peers_summary: dict, results_dir: Path) -> Tuple[str, dict]:
    name, by_seed = defaults_on_valid(results_dir)
    values = {ep: list(seeds.values()) for ep, seeds in by_seed.items()}
    if not values:
        return "", {}
    rows, summary, notes = [], {}, []
    for ep_name in PEER_TARGET_ENDPOINTS:
        ep = ENDPOINTS[ep_name]
        cols = peers_summary["endpoints"][ep_name]["columns"]
        valid = {"defaults": stats(values.get(ep_name, [])), "rf_ecfp": _valid(cols, "rf_ecfp"),
                 "chemprop": _valid(cols, "chemprop"), "gmnet@tuned": _valid(cols, "gmnet@tuned")}
        tests = {k: ((cols.get(k) or {}).get("test") or {}).get("mean") for k in ("gmnet@tuned", *COMPARABLE)}
        test_stats = {k: (cols.get(k) or {}).get("test") for k in ("gmnet@tuned", *COMPARABLE)}
        summary[ep_name] = {"valid": valid, "test": tests}
        rows.append([ep.label, ep.metric_label, *[fmt(v["mean"], v["sd"], ep.decimals, v["n"]) if v else DASH
                                                  for v in valid.values()]])
        # Each peer our `tuned` runs do not beat on test: are we behind it on the valid split too?
        for peer, ours in COMPARABLE.items():
            pair = paired(test_stats["gmnet@tuned"], test_stats[peer])  # on the seeds both have
            if pair is None or better(pair[0], pair[1], ep.higher_is_better):
                continue
            mine_test, peer_test = pair[0], pair[1]
            # on the seeds both have, as on test (the search cells have more seeds than the peers)
            mine_by_seed = by_seed.get(ep_name, {}) if ours == "defaults" else _valid_by_seed(cols, ours)
            on_valid = paired_by_seed(mine_by_seed, _valid_by_seed(cols, peer))
            if on_valid is None:
                continue
            mine_valid, peer_valid, seeds = on_valid
            ahead = better(mine_valid, peer_valid, ep.higher_is_better)
            what = name.split(" (")[0] if ours == "defaults" else "Chem-GMNet `tuned`"
            notes.append(
                f"{ep.label}: behind {PEER_ARM_LABELS[peer]} on test ({mine_test:.{ep.decimals}f} vs "
                f"{peer_test:.{ep.decimals}f}, seeds {', '.join(map(str, pair[2]))}), "
                + ("ahead of it" if ahead else "behind it" if ahead is False else "level")
                + f" on the valid split ({what} {mine_valid:.{ep.decimals}f} vs {peer_valid:.{ep.decimals}f}, "
                f"seeds {', '.join(map(str, seeds))})")
            summary[ep_name].setdefault("test_gap_on_valid", {})[peer] = {
                "ahead_on_valid": ahead, "valid": [mine_valid, peer_valid], "seeds": seeds}
    text = md_table(["Endpoint", "Metric", name, "RF-ECFP4",
                     "Chemprop (picks its epoch on it)", "Chem-GMNet `tuned` (picks epoch and forest weight on it)"],
                    rows, ["---", "---"] + ["---:"] * 4)
    if notes:
        text += ("\n\nWhere a peer is not beaten on test, the same pair on the valid split (the defaults' cells "
                 "against RF-ECFP4, `tuned` against Chemprop): " + "; ".join(notes) + ". A gap that the valid split "
                 "does not show is one no recipe chosen on validation is expected to close.")
    return text, {"candidate": name, "endpoints": summary}


VALIDATION_INTRO = """\
The targets' endpoints on the DeepChem valid split, the split the defaults were chosen on (mean ±
sd over seeds, `n` seeds). The defaults' cells (the recipe search's, `python -m
benchmarks.recipe_search`, or, once the defaults average the best epochs' weights, the
epoch-average round's, `python -m benchmarks.epoch_average`; every seed they have) are fitted as a
user would, their own internal split picking the epochs and the forest's weight, so the valid split
is untouched by the fit, as it is for RF-ECFP4: those two compare fairly. Chemprop and our `tuned`
runs pick their best epoch (ours also the forest's weight) on the valid split, so their figures
there are optimistic, the two alike."""
