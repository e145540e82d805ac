"""Clearance's target under the paper's protocols: log(y + 1) as docs/protocol.md has it (the
estimators' ``normalize_y=False``) beside the z-scored log(y + 1) every Clearance run had until
2026-11-30 (their records relabelled ``<protocol>_zscored_y``), same splits and seeds."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..protocols import ARM_LABELS, ARMS
from ._format import fmt, md_table
from ._records import Index, paired, seeds_text, summarise_runs

#: (the protocol as docs/protocol.md has it, its relabelled z-scored runs)
PAIRS: Tuple[Tuple[str, str], ...] = (("chemberta3", "chemberta3_zscored_y"),
                                      ("chemberta3_moses", "chemberta3_moses_zscored_y"))

TARGET_SCALING_INTRO = """\
docs/protocol.md trains Clearance on log(y + 1) as it is; until 2026-11-30 the estimators z-scored
it on the training part as well (every regression target; `normalize_y=True`, now a parameter).
The paper's protocols now pass `normalize_y=False` for Clearance, and the runs made before are
kept as `<protocol>_zscored_y`. Both on the same split and seeds; test and valid RMSE in the
file's units (lower is better). The ratio pairs the seeds both columns have."""


def target_scaling_section(idx: Index, endpoint: str = "clearance") -> Tuple[str, Dict[str, object]]:
    rows: List[List[str]] = []
    summary: Dict[str, object] = {}
    for protocol, zscored in PAIRS:
        for arm in ARMS:
            as_is, z = summarise_runs(idx.runs(protocol, arm, endpoint)), summarise_runs(idx.runs(zscored, arm, endpoint))
            if not as_is and not z:
                continue
            pair = paired(as_is, z)
            ratio = f"{pair[0] / pair[1]:.3f}x ({seeds_text(pair[2])})" if pair else "—"
            rows.append([f"`{protocol}`", ARM_LABELS[arm],
                         fmt(as_is and as_is["mean"], as_is and as_is["sd"], 2, as_is and as_is["n"]),
                         fmt(z and z["mean"], z and z["sd"], 2, z and z["n"]), ratio,
                         _valid(as_is), _valid(z)])
            summary[f"{protocol}/{arm}"] = {"log1p_as_is": as_is, "log1p_zscored": z,
                                            "paired": {"as_is": pair[0], "zscored": pair[1], "seeds": pair[2]}
                                            if pair else None}
    if not rows:
        return "", summary
    table = md_table(["protocol", "arm", "test RMSE, log(y + 1) as is", "z-scored", "as is / z-scored",
                      "valid RMSE, as is", "valid, z-scored"], rows)
    return table, summary


def _valid(s) -> str:
    v = s and s.get("valid")
    return fmt(v["mean"], v["sd"], 2, v["n"]) if v else "—"
