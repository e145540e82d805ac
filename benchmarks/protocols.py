"""Benchmark protocols and the endpoint table (with the paper's published figures).

Protocols
---------
``PROTOCOLS`` maps a protocol name to a :class:`Protocol`: the estimator hyperparameters of both
arms (``gmnet`` = Chem-GMNet, ``chemberta`` = the same-shape ChemBERTa/RoBERTa baseline) and
the seeds. Results are written under ``benchmarks/results/<protocol>/``.

- ``chemberta3``: DESIGN.md section 4, the protocol the paper's tables report. Adam (the
  library's ``torch.optim.Adam`` defaults: betas 0.9/0.999, eps 1e-8, no weight decay, no
  schedule), lr 3e-5, batch 32, 100 epochs, no early stopping, the epoch with the best
  validation metric restored and scored on test; seeds 0, 1, 2; both arms at the
  ChemBERTa-10M-MLM shape (hidden 384, 3 layers, 12 heads, intermediate 464, dropout 0.144),
  Chem-GMNet at k = 8, L = 3 with DualSKA.
  Training batches are uniformly shuffled, as DeepChem's (``bucket_by_length=False``).
- ``chemberta3_bucketed``: the same with the estimators' default length-bucketed batches
  (much faster on CPU; batch composition differs from DeepChem's, so not the paper's protocol
  to the letter).
- ``smoke``: a tiny model and 2 epochs, for the tests only. Its numbers mean nothing.

- ``tuned``: the library's defaults, read from the estimators' signatures (one recipe for all
  endpoints and both arms, chosen on validation splits only by ``benchmarks/recipe_search.py``).

Adding a protocol is one dict entry or :func:`register_protocol`.

Endpoints
---------
``ENDPOINTS``: the ten endpoints of the paper's Table 1 (``tab:main``) plus Tox21 (12 tasks)
and HIV as extras, each with its dataset name for
:func:`gmnet_sklearn.datasets.fetch_moleculenet`, metric, and the paper's Table 1 figures for
both arms (mean, sd as the strings printed in ``paper/chem-gmnet.tex``). ``PAPER_KL`` holds the
appendix (k, L) grids (``tab:kl-esol``, ``tab:kl-bbbp``) and ``PAPER_KL_PARAMS`` the parameter
counts (``tab:kl-params``). ``tests/test_benchmarks.py`` checks every figure against the .tex
file when it is present.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Dict, Mapping, Optional, Tuple

# The estimators' defaults are the library's tuned recipe: the paper's protocols spell out every
# training parameter (optimizer, schedule, ensembles, ...) so they stay what they were.
from gmnet_sklearn.estimators.presets import PAPER_SHAPE, PAPER_TRAINING

ARMS: Tuple[str, ...] = ("gmnet", "chemberta")
ARM_LABELS: Mapping[str, str] = MappingProxyType({"gmnet": "Chem-GMNet", "chemberta": "ChemBERTa"})

#: Ablation grid of the paper's appendix.
KL_GRID_K: Tuple[int, ...] = (6, 8, 10)
KL_GRID_L: Tuple[int, ...] = (2, 3, 4)


# ------------------------------------------------------------------------------------------
# Protocols
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Protocol:
    """Hyperparameters of one benchmark protocol.

    ``training`` is shared by both arms; ``gmnet`` / ``chemberta`` hold each arm's architecture
    parameters (constructor arguments of the estimators). ``endpoint_overrides`` maps an
    endpoint name to parameters that replace the shared ones for that endpoint only (e.g.
    per-task batch sizes); empty for the protocols defined here.
    """

    name: str
    description: str
    seeds: Tuple[int, ...]
    training: Mapping[str, object]
    gmnet: Mapping[str, object]
    chemberta: Mapping[str, object]
    endpoint_overrides: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def arm_params(self, arm: str) -> Dict[str, object]:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; choose from {ARMS}")
        return dict(self.gmnet if arm == "gmnet" else self.chemberta)

    def estimator_params(self, arm: str, endpoint: Optional[str] = None, **overrides) -> Dict[str, object]:
        """Constructor arguments for ``arm`` (training + architecture + endpoint overrides +
        ``overrides``; an override of None is ignored)."""
        params: Dict[str, object] = dict(self.training)
        params.update(self.arm_params(arm))
        if endpoint is not None:
            params.update(self.endpoint_overrides.get(endpoint, {}))
        for key, value in overrides.items():
            if value is not None:
                params[key] = value
        return params

    def to_dict(self) -> Dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "seeds": list(self.seeds),
            "training": dict(self.training),
            "gmnet": dict(self.gmnet),
            "chemberta": dict(self.chemberta),
            "endpoint_overrides": {k: dict(v) for k, v in self.endpoint_overrides.items()},
        }


# The ChemBERTa-10M-MLM shape both arms share (DESIGN.md sections 3-4, paper section 5).
_SHAPE = dict(PAPER_SHAPE)

PROTOCOLS: Dict[str, Protocol] = {
    "chemberta3": Protocol(
        name="chemberta3",
        description=(
            "DESIGN.md section 4 (chemberta3-faithful): DeepChem 2.8.0 scaffold split 80/10/10, "
            "SMILES > 200 characters dropped after the split; regression z-scored on train "
            "(clearance: log(y+1) only); Adam lr 3e-5 (betas 0.9/0.999, eps 1e-8, no weight decay, "
            "no schedule), batch 32, 100 epochs, no early stopping, best validation epoch "
            "restored and scored on test; seeds 0, 1, 2; both arms random-initialised at the "
            "ChemBERTa-10M-MLM shape; plain shuffled batches as DeepChem's (no length bucketing)."
        ),
        seeds=(0, 1, 2),
        training=dict(PAPER_TRAINING),
        gmnet={**_SHAPE, "k": 8, "L": 3, "attention": "dual_ska"},
        chemberta={**_SHAPE, "intermediate_size": 464, "attention_dropout": 0.109, "max_position_embeddings": 515},
    ),
    # The same protocol with the estimators' default length-bucketed batches (each epoch:
    # shuffle, sort pools of 50 batches by length, shuffle the batch order). Much less padding,
    # so much faster on CPU; but batches group molecules of similar length (for sets under
    # 1600 training molecules the pool is the whole set), unlike DeepChem's uniform shuffling.
    "chemberta3_bucketed": Protocol(
        name="chemberta3_bucketed",
        description=(
            "chemberta3 with length-bucketed training batches (the estimators' default "
            "bucket_by_length=True) instead of DeepChem's uniformly shuffled batches; everything "
            "else identical. Faster, but batch composition differs from the paper's protocol."
        ),
        seeds=(0, 1, 2),
        training={**PAPER_TRAINING, "bucket_by_length": True},
        gmnet={**_SHAPE, "k": 8, "L": 3, "attention": "dual_ska"},
        chemberta={**_SHAPE, "intermediate_size": 464, "attention_dropout": 0.109, "max_position_embeddings": 515},
    ),
    "smoke": Protocol(
        name="smoke",
        description="Plumbing check for the tests: tiny models, 2 epochs. Its figures mean nothing.",
        seeds=(0,),
        training={**PAPER_TRAINING, "lr": 1e-3, "max_epochs": 2, "bucket_by_length": True},
        gmnet={"d_model": 32, "n_layers": 1, "n_heads": 2, "dropout": 0.0, "k": 4, "L": 2, "attention": "dual_ska"},
        chemberta={"d_model": 32, "n_layers": 1, "n_heads": 2, "dropout": 0.0, "intermediate_size": 32,
                   "attention_dropout": 0.0, "max_position_embeddings": 515},
    ),
}


def _estimator_defaults(cls, keys) -> Dict[str, object]:
    import inspect

    sig = inspect.signature(cls.__init__).parameters
    return {k: sig[k].default for k in keys}


def _tuned_protocol() -> Protocol:
    """The library's defaults as a protocol, read from the estimators' signatures so the two
    cannot drift apart; chosen on validation splits only (benchmarks/recipe_search.py)."""
    from gmnet_sklearn.estimators import ChemBERTaRegressor, GMNetRegressor

    training = _estimator_defaults(GMNetRegressor, PAPER_TRAINING.keys())
    if training != _estimator_defaults(ChemBERTaRegressor, PAPER_TRAINING.keys()):
        raise AssertionError("the two families' default training recipes differ")
    gmnet = _estimator_defaults(GMNetRegressor, ("d_model", "n_layers", "n_heads", "dropout", "k", "L", "attention"))
    chemberta = _estimator_defaults(ChemBERTaRegressor, ("d_model", "n_layers", "n_heads", "dropout",
                                                         "intermediate_size", "attention_dropout",
                                                         "max_position_embeddings"))
    return Protocol(
        name="tuned",
        description=("The library's defaults (GMNetRegressor() / ChemBERTaRegressor() with no arguments), chosen "
                     "by benchmarks/recipe_search.py on the DeepChem valid splits only, one recipe for all "
                     "endpoints; the valid split restores the best epoch, test scored once."),
        seeds=(0, 1, 2), training=training, gmnet=gmnet, chemberta=chemberta)


PROTOCOLS["tuned"] = _tuned_protocol()


def register_protocol(protocol: Protocol, replace: bool = False) -> Protocol:
    """Add a protocol to :data:`PROTOCOLS` (e.g. the library's tuned defaults, once measured)."""
    if protocol.name in PROTOCOLS and not replace:
        raise ValueError(f"protocol {protocol.name!r} already exists")
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {sorted(PROTOCOLS)}") from None


# ------------------------------------------------------------------------------------------
# Endpoints and the paper's figures
# ------------------------------------------------------------------------------------------
Figure = Tuple[str, str]  # (mean, sd) exactly as printed in the .tex file


@dataclass(frozen=True)
class Endpoint:
    name: str  # key used on the command line and in result paths
    label: str  # row label of the paper's Table 1
    dataset: str  # name for fetch_moleculenet
    metric: str  # "rmse" (lower is better) or "roc_auc" (higher is better)
    task_type: str  # "regression" or "classification"
    n_rows: int  # rows in the data file (orders the runs: smallest first)
    table1: bool  # one of the ten endpoints of the paper's Table 1
    paper: Optional[Mapping[str, Figure]] = None  # {"gmnet": (mean, sd), "chemberta": (mean, sd)}
    # Single-task classification: rows with a missing label are dropped after the split
    # (DeepChem gives them weight 0). Multi-task sets keep them (NaN, masked).
    drop_missing_labels: bool = False
    target_transform: Optional[str] = None  # "log1p": train on log(y + 1), score in original units
    units: str = ""

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
    return Endpoint(*args, paper=MappingProxyType(paper) if paper else None, **kwargs)


# Table 1 (tab:main) of paper/chem-gmnet.tex, in the paper's row order, then the extras.
ENDPOINTS: Dict[str, Endpoint] = {
    e.name: e
    for e in [
        _ep("bace_classification", "BACE-cls", "bace_classification", "roc_auc", "classification", 1513, True,
            paper={"gmnet": ("0.745", "0.025"), "chemberta": ("0.738", "0.007")}, drop_missing_labels=True),
        _ep("bbbp", "BBBP", "bbbp", "roc_auc", "classification", 2050, True,
            paper={"gmnet": ("0.722", "0.011"), "chemberta": ("0.632", "0.009")}, drop_missing_labels=True),
        _ep("sider", "SIDER", "sider", "roc_auc", "classification", 1427, True,
            paper={"gmnet": ("0.613", "0.008"), "chemberta": ("0.556", "0.013")}, units="mean over 27 tasks"),
        _ep("clintox", "ClinTox", "clintox", "roc_auc", "classification", 1484, True,
            paper={"gmnet": ("0.995", "0.001"), "chemberta": ("0.990", "0.002")}, units="mean over 2 tasks"),
        _ep("tox21_sr_p53", "SR-p53 (Tox21)", "tox21_sr_p53", "roc_auc", "classification", 7831, True,
            paper={"gmnet": ("0.636", "0.025"), "chemberta": ("0.593", "0.038")}, drop_missing_labels=True),
        _ep("esol", "ESOL", "esol", "rmse", "regression", 1128, True,
            paper={"gmnet": ("1.010", "0.055"), "chemberta": ("1.040", "0.028")}, units="log(mol/L)"),
        _ep("freesolv", "FreeSolv", "freesolv", "rmse", "regression", 642, True,
            paper={"gmnet": ("0.702", "0.026"), "chemberta": ("0.583", "0.006")},
            units="sigma (z-scored freesolv.csv y; x 3.845 for kcal/mol)"),
        _ep("lipophilicity", "Lipophilicity", "lipophilicity", "rmse", "regression", 4200, True,
            paper={"gmnet": ("0.968", "0.014"), "chemberta": ("1.026", "0.009")}, units="logD"),
        _ep("bace_regression", "BACE-reg", "bace_regression", "rmse", "regression", 1513, True,
            paper={"gmnet": ("1.350", "0.102"), "chemberta": ("1.141", "0.029")}, units="pIC50"),
        _ep("clearance", "Clearance", "clearance", "rmse", "regression", 837, True,
            paper={"gmnet": ("49.36", "1.21"), "chemberta": ("49.13", "0.53")}, target_transform="log1p",
            units="original units of clearance.csv target (trained on log(y+1))"),
        # Beyond the paper (DESIGN.md section 4): no published figures.
        _ep("tox21", "Tox21 (12 tasks)", "tox21", "roc_auc", "classification", 7831, False, units="mean over 12 tasks"),
        _ep("hiv", "HIV", "hiv", "roc_auc", "classification", 41127, False, drop_missing_labels=True),
    ]
}

@dataclass(frozen=True)
class Published:
    """The best published test figure on DeepChem's scaffold split for an endpoint the paper's
    Table 1 does not cover, with its source; ``figure`` None: none cited (``source`` says why)."""

    figure: Optional[str]  # exactly as printed in the source
    source: str


#: Beside the extras in the report. Only figures checked against their source go here: figures
#: from other scaffold splitters (balanced or random scaffold splits) are not comparable, since
#: DeepChem's deterministic split puts the rarest scaffolds in test.
PUBLISHED_DEEPCHEM_SPLIT: Mapping[str, Published] = MappingProxyType({
    "tox21": Published(None, "not cited: no published mean ROC-AUC over the 12 tasks on DeepChem's "
                             "deterministic scaffold split was checked against its source"),
    "hiv": Published(None, "not cited: no published ROC-AUC on DeepChem's deterministic scaffold split "
                           "was checked against its source"),
})

TABLE1_ENDPOINTS: Tuple[str, ...] = tuple(e.name for e in ENDPOINTS.values() if e.table1)
EXTRA_ENDPOINTS: Tuple[str, ...] = tuple(e.name for e in ENDPOINTS.values() if not e.table1)


def by_size(names) -> list:
    """Endpoint names, smallest data file first (ties keep the table's order)."""
    order = list(ENDPOINTS)
    return sorted(names, key=lambda n: (ENDPOINTS[n].n_rows, order.index(n)))


def resolve_endpoints(names) -> list:
    """Expand the keywords ``table1``, ``extras`` and ``all``; check the names."""
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
        else:
            raise ValueError(f"unknown endpoint {name!r}; known: {', '.join(ENDPOINTS)} (or table1, extras, all)")
        out.extend(e for e in expanded if e not in out)
    return out


# Appendix tables of paper/chem-gmnet.tex: test metric over (k, L), three seeds, mean ± sd.
PAPER_KL: Mapping[str, Mapping[Tuple[int, int], Figure]] = MappingProxyType({
    # tab:kl-esol (RMSE, lower is better)
    "esol": MappingProxyType({
        (6, 2): ("1.016", "0.030"), (6, 3): ("0.985", "0.030"), (6, 4): ("0.981", "0.058"),
        (8, 2): ("1.010", "0.061"), (8, 3): ("1.010", "0.055"), (8, 4): ("1.042", "0.030"),
        (10, 2): ("0.967", "0.026"), (10, 3): ("0.938", "0.042"), (10, 4): ("1.015", "0.009"),
    }),
    # tab:kl-bbbp (ROC-AUC, higher is better)
    "bbbp": MappingProxyType({
        (6, 2): ("0.685", "0.012"), (6, 3): ("0.699", "0.022"), (6, 4): ("0.704", "0.023"),
        (8, 2): ("0.687", "0.050"), (8, 3): ("0.722", "0.011"), (8, 4): ("0.696", "0.006"),
        (10, 2): ("0.698", "0.010"), (10, 3): ("0.710", "0.010"), (10, 4): ("0.719", "0.012"),
    }),
})
PAPER_KL_LABELS: Mapping[str, str] = MappingProxyType({"esol": "tab:kl-esol", "bbbp": "tab:kl-bbbp"})

# tab:kl-params: trainable parameters of Chem-GMNet (hidden 384, 3 layers, 12 heads, vocab 591).
PAPER_KL_PARAMS: Mapping[Tuple[int, int], int] = MappingProxyType({
    (6, 2): 1688513, (6, 3): 1871699, (6, 4): 2256350,
    (8, 2): 1786526, (8, 3): 2196818, (8, 4): 3061970,
    (10, 2): 1899191, (10, 3): 2668457, (10, 4): 4401392,
})
