"""A random forest beside the network, and the blend of the two (the estimators' ``forest=True``).

On scaffold splits a forest on substructure counts and descriptors errs differently from a
sequence model, so their average can beat both; a consensus of a neural model and a forest is
a common way to combine the two. The forest reads the molecule features the head
already gets (the scaled RDKit descriptors and the log Morgan counts), is fitted on the training
part only, and its weight in the blend is chosen on the validation split the epochs kept are
chosen on, for the network as it ends (:func:`choose_blend_weight`): a weight of 0 is the network
alone.

scikit-learn's forests, one per task on its labelled rows (as the ``rf_ecfp`` peer arm), because
missing labels are masked rather than imputed. Outputs are in the space the estimators average
ensemble members in: the targets as the network trains on them for regression (standardised
unless ``normalize_y=False``), probabilities for classification.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from .utils.targets import as_float_target, check_multilabel

#: Trees per forest (one forest per task); the peer arm's 500. Features tried per split: Breiman's
#: defaults (a third of them for regression, the square root for classification), which also keep
#: a single-task fit within the defaults' time budget (scikit-learn's regression default, all of
#: them, is several times slower); the cost grows with the number of tasks.
N_TREES = 500
MAX_FEATURES = {"regression": 1 / 3, "classification": "sqrt"}
#: Candidate forest weights; the first best one (the smallest) wins ties.
BLEND_GRID = tuple(round(0.1 * i, 1) for i in range(11))
#: The weight where the validation data cannot rank the blends (no validation set, or ROC-AUC
#: undefined on its labels): the plain average.
FALLBACK_WEIGHT = 0.5

__all__ = ["MoleculeForest", "blend_weight", "network_alone", "blend", "choose_blend_weight"]


#: Rows per thread of a forest's predict (the threads split the trees; each walks every row): fewer
#: rows, fewer threads, one below twice this, since a thread pool costs more than the trees on a few.
ROWS_PER_THREAD = 500

class MoleculeForest:
    """Per-task scikit-learn forests on molecule features.

    ``kind`` "regression": ``y`` (n, n_tasks) targets as the network trains on them, NaN = missing;
    predictions (n, n_tasks). "classification" with ``multi_label=False``: ``y`` (n,) class indices
    0..n_classes-1; predictions (n, n_classes) probabilities. With ``multi_label=True``: ``y``
    (n, n_tasks) 0/1/NaN; predictions (n, n_tasks) P(label = 1) (a task with one class in the
    training data predicts the fraction of positives there: 0 or 1).
    """

    def __init__(self, kind: str, multi_label: bool = False, random_state: int | None = 0, n_jobs: int = 1):
        self.kind = kind
        self.multi_label = multi_label
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _new_forest(self, task: int):
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        cls = RandomForestRegressor if self.kind == "regression" else RandomForestClassifier
        # a seed near 2**32 stays a valid seed; None: scikit-learn's unseeded forests
        seed = None if self.random_state is None else (self.random_state + task) % 2**32
        return cls(n_estimators=N_TREES, max_features=MAX_FEATURES[self.kind], n_jobs=self.n_jobs, random_state=seed)

    def fit(self, features: np.ndarray, y: np.ndarray) -> "MoleculeForest":
        # what the docstring says y is, checked (the estimators pass it so; a direct user gets
        # these errors rather than numpy's or scikit-learn's about a reshape or 0 samples)
        if self.kind not in MAX_FEATURES:
            raise ValueError(f"kind must be 'regression' or 'classification', got {self.kind!r}")
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or not len(features):
            raise ValueError(f"features must be a 2-D array with at least one row, got shape {features.shape}")
        y = np.asarray(y)
        if len(y) != len(features):
            raise ValueError(f"y has {len(y)} rows for {len(features)} rows of features")
        if self.kind == "classification" and not self.multi_label:
            if y.ndim != 1 or y.dtype.kind not in "iu" or (y < 0).any():
                raise ValueError("single-task classification: y must be 1-D class indices 0..n_classes-1 "
                                 "(sklearn.preprocessing.LabelEncoder's)")
            self.n_classes_ = int(y.max()) + 1
            self.forests_ = [self._new_forest(0).fit(features, y)]
            return self
        if self.kind == "classification":
            y = check_multilabel(y)
        else:
            y = as_float_target(y, "y", "regression targets must be numbers (NaN: a missing label)").reshape(len(y), -1)
        if self.kind == "regression" and (empty := np.flatnonzero(np.isnan(y).all(0))).size:
            raise ValueError(f"target column(s) {empty.tolist()} have no observed values to fit a forest on")
        self.forests_ = []
        for task in range(y.shape[1]):
            observed = ~np.isnan(y[:, task])
            labels = y[observed, task]
            if self.kind == "classification" and len(np.unique(labels)) < 2:
                self.forests_.append(float(labels.mean()) if len(labels) else 0.5)  # a constant P(1)
                continue
            self.forests_.append(self._new_forest(task).fit(features[observed], labels))
        return self

    def predict(self, features: np.ndarray, n_jobs: int | None = None) -> np.ndarray:
        """``n_jobs``: threads of this call (the predicting machine's, not the fitting one's);
        None: ``self.n_jobs``."""
        from joblib import effective_n_jobs
        from sklearn.exceptions import NotFittedError

        if not hasattr(self, "forests_"):
            raise NotFittedError("this MoleculeForest is not fitted yet: call fit first")
        features = np.asarray(features, dtype=np.float32)
        # (the threads' start and polling cost more than 500 trees on one molecule)
        jobs = max(1, min(effective_n_jobs(self.n_jobs if n_jobs is None else n_jobs), len(features) // ROWS_PER_THREAD))
        for forest in self.forests_:
            if not isinstance(forest, float):
                forest.n_jobs = jobs
        if self.kind == "classification" and not self.multi_label:
            forest = self.forests_[0]
            proba = np.zeros((len(features), self.n_classes_))
            proba[:, forest.classes_.astype(int)] = forest.predict_proba(features)
            return proba
        columns = []
        for forest in self.forests_:
            if isinstance(forest, float):
                columns.append(np.full(len(features), forest))
            elif self.kind == "regression":
                columns.append(forest.predict(features))
            else:
                positive = list(forest.classes_).index(1.0)
                columns.append(forest.predict_proba(features)[:, positive])
        return np.stack(columns, axis=1).astype(np.float64)


    # ---- persistence: skops' format, not pickle (loading executes no code) -------------------
    #: The one type beyond skops' own trusted defaults a forest needs (scikit-learn's tree).
    TRUSTED_TYPES = ("sklearn.tree._tree.Tree",)

    def save(self, path) -> None:
        import skops.io as sio

        from .utils.files import write_atomic

        write_atomic(path, sio.dumps({"kind": self.kind, "multi_label": self.multi_label, "random_state": self.random_state,
                                      "n_jobs": self.n_jobs, "n_classes": getattr(self, "n_classes_", None),
                                      "forests": self.forests_}))

    @classmethod
    def load(cls, path) -> "MoleculeForest":
        import zipfile

        import skops.io as sio

        from .utils.files import check_regular_file, unreadable

        data = check_regular_file(path).read_bytes()
        try:
            untrusted = set(sio.get_untrusted_types(data=data)) - set(cls.TRUSTED_TYPES)
        except (zipfile.BadZipFile, ValueError, KeyError, EOFError) as exc:  # (skops' and zipfile's own, naming no file)
            raise unreadable(path, exc) from exc
        if untrusted:
            raise ValueError(f"{path} holds types a forest does not have: {sorted(untrusted)}")
        try:
            state = sio.loads(data, trusted=list(cls.TRUSTED_TYPES))
        except (zipfile.BadZipFile, ValueError, KeyError, EOFError) as exc:
            raise unreadable(path, exc) from exc
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        # what save writes, checked: skops' own trusted types are all of scikit-learn's estimators
        # (a Pipeline of FunctionTransformers, a DummyRegressor would load as "the forest")
        expected = {"regression": RandomForestRegressor, "classification": RandomForestClassifier}.get(
            state.get("kind") if isinstance(state, dict) else None)
        forests = state.get("forests") if expected is not None else None
        if expected is not None and not isinstance(state.get("multi_label"), bool):
            raise ValueError(f"{path} is not a forest save() wrote (no multi_label)")
        if not isinstance(forests, list) or not forests or not all(
                type(f) is expected or (type(f) is float and state["multi_label"]) for f in forests):
            raise ValueError(f"{path} is not a forest save() wrote (kind {state.get('kind') if isinstance(state, dict) else None!r}, "
                             f"{[type(f).__name__ for f in forests] if isinstance(forests, list) else type(forests).__name__})")
        forest = cls(state["kind"], multi_label=state["multi_label"], random_state=state.get("random_state", 0),
                     n_jobs=state.get("n_jobs", 1))
        forest.forests_ = list(forests)
        if state.get("n_classes") is not None:
            forest.n_classes_ = int(state["n_classes"])
        return forest


#: The blocks open on each estimator (by id; the estimator lives while one is open): each with its
#: weight and the model (``net_``) it was opened on, and each such model's own weight. Blocks left
#: in another order than entered (threads) end on the newest open block's weight, the last block
#: on a model restores the model's own, and a model a fit made inside a block keeps its own.
_BLENDS: dict = {}
_BLENDS_LOCK = threading.RLock()  # (an abandoned block's cleanup may run in the garbage collector)


@contextlib.contextmanager
def blend_weight(est, weight: float):
    """Inside: a fitted ``forest=True`` estimator blends at ``weight`` (0: the network alone, 1: the
    forest alone) instead of its ``forest_weight_``, e.g. to score the blend at other weights; the
    weight is restored on leaving (unless a fit inside the block replaced the model: its weight
    stays). It sets the estimator's ``forest_weight_``: other threads predicting with the same
    estimator meanwhile blend at that weight too. A model without a forest has only the network: any other weight
    than 0 is an error, not a blend that silently is not one. A Pipeline's last step, a search's
    ``best_estimator_`` and a ``FrozenEstimator``'s estimator are the model it acts on."""
    import numbers

    from .estimators._base import SmilesNetBase
    from .utils.meta import inner_model

    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be a number in [0, 1], got {weight!r}")
    given, est = est, inner_model(est)
    if not isinstance(est, SmilesNetBase):  # setting forest_weight_ on anything else would change nothing
        raise TypeError(f"blend_weight acts on a GMNet or ChemBERTa estimator, not a {type(est).__name__}")
    if weight != 0 and getattr(est, "forest_", None) is None:
        raise ValueError(f"{type(est).__name__} has no forest to blend (fit with forest=True): its predictions are "
                         "the network's at any weight")
    token, model = object(), est.__dict__.get("net_")  # (the model is its networks: every fit makes net_ anew)
    with _BLENDS_LOCK:
        blocks, own = _BLENDS.setdefault(id(est), ([], []))
        if not any(m is model for m, _, _ in own):  # the model's own weight, when its first block opens
            own.append((model, "forest_weight_" in est.__dict__, est.__dict__.get("forest_weight_")))
        blocks.append((token, float(weight), model))
        est.forest_weight_ = float(weight)
    try:
        yield given
    finally:
        with _BLENDS_LOCK:
            blocks[:] = [b for b in blocks if b[0] is not token]
            current = est.__dict__.get("net_")
            open_on_current = [w for _, w, m in blocks if m is current]
            if open_on_current:
                est.forest_weight_ = open_on_current[-1]  # the newest block still open on this model
            elif model is current:  # the last block on this model: its own weight back
                _, had, before = next(o for o in own if o[0] is model)
                if had:
                    est.forest_weight_ = before
                else:  # an unfitted estimator must not look fitted afterwards
                    est.__dict__.pop("forest_weight_", None)
            # (else a fit inside the block made the model anew: its own weight stays; a review
            # found the earlier fit's brought back, or an unfitted model's entry deleted the new one)
            own[:] = [o for o in own if any(m is o[0] for _, _, m in blocks)]
            if not blocks:
                del _BLENDS[id(est)]


def network_alone(est):
    """Inside (a ``with`` block): the estimator predicts with its network alone (blend weight 0),
    e.g. to show what the forest adds."""
    return blend_weight(est, 0.0)


def blend(network: np.ndarray, forest: np.ndarray, weight: float) -> np.ndarray:
    """``(1 - weight) * network + weight * forest`` (``network`` may carry a leading members axis).
    At 0 and 1 one side alone: a non-finite prediction of the other (0 * inf is NaN) does not count."""
    if weight == 0.0:
        return network + 0.0 * np.nan_to_num(forest)  # (the broadcast shape either way)
    if weight == 1.0:
        return forest + 0.0 * np.nan_to_num(network)
    return (1.0 - weight) * network + weight * forest


def choose_blend_weight(network: np.ndarray, forest: np.ndarray, score) -> float:
    """The weight in :data:`BLEND_GRID` whose blend of the validation predictions scores best
    (``score(pred)``: higher is better); the smallest such weight on ties. ``score`` returning
    NaN for every blend (nothing to rank them by) gives :data:`FALLBACK_WEIGHT`."""
    scores = np.array([score(blend(network, forest, w)) for w in BLEND_GRID], dtype=np.float64)
    if np.isnan(scores).all():
        return FALLBACK_WEIGHT
    return float(BLEND_GRID[int(np.nanargmax(scores))])
