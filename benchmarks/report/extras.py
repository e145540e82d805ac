"""MoleculeNet's classification suite beyond Table 1 (Tox21's 12 tasks, HIV) beside the best
published DeepChem-split figures."""

from __future__ import annotations

from typing import Tuple

from ..protocols import ARM_LABELS, ARMS, ENDPOINTS, EXTRA_ENDPOINTS, PUBLISHED_DEEPCHEM_SPLIT
from ._format import DASH, fmt, md_table
from ._records import Index, summarise_runs
from .peers import arm_runs


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
