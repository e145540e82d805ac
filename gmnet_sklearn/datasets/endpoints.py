"""The benchmark endpoints: one table the CLI and ``benchmarks/`` both read.

Each :class:`Endpoint` names a dataset of :func:`~gmnet_sklearn.datasets.fetch_moleculenet`
(which holds its columns, task type, row count and target transform, so they are not repeated
here), the metric, whether it is one of the ten endpoints of the paper's Table 1
(``tab:main``), and the paper's figures for both arms (mean, sd as the strings printed in
``paper/chem-gmnet.tex``). ``PAPER_KL`` holds the appendix (k, L) grids (``tab:kl-esol``,
``tab:kl-bbbp``) and ``PAPER_KL_PARAMS`` the parameter counts (``tab:kl-params``).
``tests/test_benchmarks.py`` checks every figure against the .tex file when it is present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

from ..utils.frozen import FrozenDict
from .moleculenet import _resolve_name

__all__ = [
    "Endpoint",
    "ENDPOINTS",
    "TABLE1_ENDPOINTS",
    "EXTRA_ENDPOINTS",
    "by_size",
    "resolve_endpoints",
    "PAPER_KL",
    "PAPER_KL_LABELS",
    "PAPER_KL_PARAMS",
    "PAPER_TABLE2",
    "TABLE2_ENDPOINTS",
]

Figure = Tuple[str, str]  # (mean, sd) exactly as printed in the .tex file


@dataclass(frozen=True)
class Endpoint:
    name: str  # key used on the command line and in result paths
    label: str  # row label of the paper's Table 1
    dataset: str  # name for fetch_moleculenet
    metric: str  # "rmse" (lower is better) or "roc_auc" (higher is better)
    table1: bool  # one of the ten endpoints of the paper's Table 1
    # {"gmnet": (mean, sd), "chemberta": (mean, sd)}; a read-only mapping, which cannot be hashed:
    # left out of the hash (the name is the endpoint's identity), so an Endpoint can key a dict
    paper: Optional[Mapping[str, Figure]] = field(default=None, hash=False)
    # Single-task classification: rows with a missing label are dropped after the split (DeepChem
    # 2.8.0 keeps them as y = 0 with weight 0, which its metrics leave out: the same scores).
    # Multi-task sets keep them (NaN, masked).
    drop_missing_labels: bool = False
    units: str = ""

    # ---- from the dataset's entry in fetch_moleculenet's table ------------------------------
    @property
    def task_type(self) -> str:
        """ "regression" or "classification"."""
        return _resolve_name(self.dataset).task_type

    @property
    def n_rows(self) -> int:
        """Rows in the data file (orders the runs: smallest first)."""
        return _resolve_name(self.dataset).n_rows

    @property
    def target_transform(self) -> Optional[str]:
        """ "log1p": train on log(y + 1), score in original units; None: the target as it is."""
        return _resolve_name(self.dataset).target_transform

    @property
    def smiles_column(self) -> str:
        return _resolve_name(self.dataset).smiles_column

    @property
    def tasks(self) -> Tuple[str, ...]:
        """The target columns the endpoint uses (fetch_moleculenet's default tasks)."""
        spec = _resolve_name(self.dataset)
        return tuple(spec.default_tasks or spec.tasks)

    # ---- figures ------------------------------------------------------------------------------
    @property
    def higher_is_better(self) -> bool:
        return self.metric == "roc_auc"

    @property
    def metric_label(self) -> str:
        return "ROC-AUC ↑" if self.metric == "roc_auc" else "RMSE ↓"

    def paper_value(self, arm: str) -> Optional[Tuple[float, float]]:
        if not self.paper or arm not in self.paper:
            return None
        mean, sd = self.paper[arm]
        return float(mean), float(sd)

    @property
    def decimals(self) -> int:
        """Decimals the paper prints for this endpoint (3 when it has no figure)."""
        if self.paper:
            mean = next(iter(self.paper.values()))[0]
            return len(mean.split(".")[1]) if "." in mean else 0
        return 3


def _ep(*args, **kwargs) -> Endpoint:
    paper = kwargs.pop("paper", None)
    return Endpoint(*args, paper=FrozenDict(paper) if paper else None, **kwargs)


# Table 1 (tab:main) of paper/chem-gmnet.tex, in the paper's row order, then the extras.
# read-only, as the Endpoints in it: the tuples below are made from it once
ENDPOINTS: Mapping[str, Endpoint] = FrozenDict({
    e.name: e
    for e in [
        _ep("bace_classification", "BACE-cls", "bace_classification", "roc_auc", True,
            paper={"gmnet": ("0.745", "0.025"), "chemberta": ("0.738", "0.007")}, drop_missing_labels=True),
        _ep("bbbp", "BBBP", "bbbp", "roc_auc", True,
            paper={"gmnet": ("0.722", "0.011"), "chemberta": ("0.632", "0.009")}, drop_missing_labels=True),
        _ep("sider", "SIDER", "sider", "roc_auc", True,
            paper={"gmnet": ("0.613", "0.008"), "chemberta": ("0.556", "0.013")}, units="mean over 27 tasks"),
        _ep("clintox", "ClinTox", "clintox", "roc_auc", True,
            paper={"gmnet": ("0.995", "0.001"), "chemberta": ("0.990", "0.002")}, units="mean over 2 tasks"),
        _ep("tox21_sr_p53", "SR-p53 (Tox21)", "tox21_sr_p53", "roc_auc", True,
            paper={"gmnet": ("0.636", "0.025"), "chemberta": ("0.593", "0.038")}, drop_missing_labels=True),
        _ep("esol", "ESOL", "esol", "rmse", True,
            paper={"gmnet": ("1.010", "0.055"), "chemberta": ("1.040", "0.028")}, units="log(mol/L)"),
        _ep("freesolv", "FreeSolv", "freesolv", "rmse", True,
            paper={"gmnet": ("0.702", "0.026"), "chemberta": ("0.583", "0.006")},
            units="sigma (z-scored freesolv.csv y; x 3.845 for kcal/mol)"),
        _ep("lipophilicity", "Lipophilicity", "lipophilicity", "rmse", True,
            paper={"gmnet": ("0.968", "0.014"), "chemberta": ("1.026", "0.009")}, units="logD"),
        _ep("bace_regression", "BACE-reg", "bace_regression", "rmse", True,
            paper={"gmnet": ("1.350", "0.102"), "chemberta": ("1.141", "0.029")}, units="pIC50"),
        _ep("clearance", "Clearance", "clearance", "rmse", True,
            paper={"gmnet": ("49.36", "1.21"), "chemberta": ("49.13", "0.53")},
            units="original units of clearance.csv target (trained on log(y+1))"),
        # Beyond the paper (docs/protocol.md): no published figures.
        _ep("tox21", "Tox21 (12 tasks)", "tox21", "roc_auc", False, units="mean over 12 tasks"),
        _ep("hiv", "HIV", "hiv", "roc_auc", False, drop_missing_labels=True),
    ]
})

TABLE1_ENDPOINTS: Tuple[str, ...] = tuple(e.name for e in ENDPOINTS.values() if e.table1)
EXTRA_ENDPOINTS: Tuple[str, ...] = tuple(e.name for e in ENDPOINTS.values() if not e.table1)


def by_size(names) -> list:
    """Endpoint names (as :func:`resolve_endpoints` takes them: aliases and keywords too),
    smallest data file first (ties keep the table's order)."""
    order = list(ENDPOINTS)
    return sorted(resolve_endpoints(names), key=lambda n: (ENDPOINTS[n].n_rows, order.index(n)))


def _alias_of(name: str) -> Optional[str]:
    """The dataset ``fetch_moleculenet`` takes ``name`` for, or None."""
    try:
        return _resolve_name(name).name
    except ValueError:
        return None


def resolve_endpoints(names) -> list:
    """Expand the keywords ``table1``, ``extras`` and ``all``; check the names (one name may be
    given as a string; ``fetch_moleculenet``'s aliases, "lipo" or "SR-p53", name their endpoint)."""
    if isinstance(names, str):  # not its characters
        names = [names]
    out = []
    for name in names:
        key = name.strip().lower().replace("-", "_")
        if key == "table1":
            expanded = list(TABLE1_ENDPOINTS)
        elif key == "extras":
            expanded = list(EXTRA_ENDPOINTS)
        elif key == "all":
            expanded = list(ENDPOINTS)
        elif key in ENDPOINTS:
            expanded = [key]
        elif (alias := _alias_of(name)) in ENDPOINTS:
            expanded = [alias]
        else:
            hint = " ('bace' is ambiguous: bace_classification or bace_regression)" if key == "bace" else ""
            raise ValueError(f"unknown endpoint {name!r}{hint}; known: {', '.join(ENDPOINTS)} (or table1, extras, all)")
        out.extend(e for e in expanded if e not in out)
    return out


# tab:pretrain (the paper's Table 2): Chem-GMNet pretrained on 10M ZINC SMILES (mean, sd over three
# seeds) and the public ChemBERTa-2 MLM-10M release's figures (no sd printed), chemberta3 protocol.
PAPER_TABLE2: Mapping[str, Mapping[str, Tuple[str, Optional[str]]]] = FrozenDict({
    "bace_classification": FrozenDict({"gmnet": ("0.773", "0.033"), "chemberta": ("0.729", None)}),
    "bbbp": FrozenDict({"gmnet": ("0.698", "0.021"), "chemberta": ("0.696", None)}),
    # the paper flags ChemBERTa-2's ClinTox figure as anomalous (below random) and keeps it as printed
    "clintox": FrozenDict({"gmnet": ("0.983", "0.004"), "chemberta": ("0.349", None)}),
    "tox21_sr_p53": FrozenDict({"gmnet": ("0.667", "0.017"), "chemberta": ("0.748", None)}),
    "esol": FrozenDict({"gmnet": ("0.970", "0.050"), "chemberta": ("0.961", None)}),
    "lipophilicity": FrozenDict({"gmnet": ("0.932", "0.009"), "chemberta": ("1.009", None)}),
    "bace_regression": FrozenDict({"gmnet": ("1.103", "0.065"), "chemberta": ("1.611", None)}),
    "clearance": FrozenDict({"gmnet": ("51.11", "0.95"), "chemberta": ("53.86", None)}),
})
TABLE2_ENDPOINTS: Tuple[str, ...] = tuple(PAPER_TABLE2)


# Appendix tables of paper/chem-gmnet.tex: test metric over (k, L), three seeds, mean ± sd.
PAPER_KL: Mapping[str, Mapping[Tuple[int, int], Figure]] = FrozenDict({
    # tab:kl-esol (RMSE, lower is better)
    "esol": FrozenDict({
        (6, 2): ("1.016", "0.030"), (6, 3): ("0.985", "0.030"), (6, 4): ("0.981", "0.058"),
        (8, 2): ("1.010", "0.061"), (8, 3): ("1.010", "0.055"), (8, 4): ("1.042", "0.030"),
        (10, 2): ("0.967", "0.026"), (10, 3): ("0.938", "0.042"), (10, 4): ("1.015", "0.009"),
    }),
    # tab:kl-bbbp (ROC-AUC, higher is better)
    "bbbp": FrozenDict({
        (6, 2): ("0.685", "0.012"), (6, 3): ("0.699", "0.022"), (6, 4): ("0.704", "0.023"),
        (8, 2): ("0.687", "0.050"), (8, 3): ("0.722", "0.011"), (8, 4): ("0.696", "0.006"),
        (10, 2): ("0.698", "0.010"), (10, 3): ("0.710", "0.010"), (10, 4): ("0.719", "0.012"),
    }),
})
PAPER_KL_LABELS: Mapping[str, str] = FrozenDict({"esol": "tab:kl-esol", "bbbp": "tab:kl-bbbp"})

# tab:kl-params: trainable parameters of Chem-GMNet (hidden 384, 3 layers, 12 heads, vocab 591).
PAPER_KL_PARAMS: Mapping[Tuple[int, int], int] = FrozenDict({
    (6, 2): 1688513, (6, 3): 1871699, (6, 4): 2256350,
    (8, 2): 1786526, (8, 3): 2196818, (8, 4): 3061970,
    (10, 2): 1899191, (10, 3): 2668457, (10, 4): 4401392,
})
