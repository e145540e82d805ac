"""The estimators' numpydoc docstrings, in pieces both model families and both tasks share.

Each piece is written dedented (an entry's line at column 0, its description at column 4) and
ends with a newline, so that pieces joined by `estimator_doc` give a docstring numpydoc, Sphinx and
``help()`` read as written. The families add their architecture's entries and their own
``max_length`` and ``pretrained`` entries (``gmnet.py``, ``chemberta.py``), the regressors
``normalize_y`` (``_regression.REGRESSOR_PARAMETERS_DOC``).
"""

from __future__ import annotations

#: numpydoc entries of the training parameters shared by both model families, in signature
#: order, in four runs; the task's ``n_estimators`` entry and the family's ``max_length`` and
#: ``pretrained`` entries go between them (``training_parameters_doc``).
OPTIMISATION_PARAMETERS_DOC = """\
optimizer : {"adamw", "adam"}, default="adamw"
    The optimizer: "adamw" or "adam".
lr : float, default=5e-4
    Peak learning rate.
weight_decay : float, default=0.01
    Weight decay.
warmup : float, default=0.1
    Linear warm-up over this fraction of the training steps, then ``lr_schedule``; stepped
    every batch.
lr_schedule : {"cosine", "linear", "constant"}, default="cosine"
    The learning rate after the warm-up: "cosine", "linear" (both to 0 at ``max_epochs``) or
    "constant"; stepped every batch.
batch_size : int, default=32
    Batch size.
max_epochs : int, default=20
    The most epochs trained.
patience : int, default=None
    Stop once the validation metric has not improved for this many epochs (None: never). A fit
    without validation data runs every epoch, with a warning.
"""

DATA_PARAMETERS_DOC = """\
augment : int, default=0
    RDKit-randomised SMILES kept per training molecule; each epoch trains on one of the
    molecule's variants (or its given SMILES), drawn at random.
tta : int, default=0
    Randomised SMILES per molecule averaged with the given one at predict time. A variant
    holding a token the vocabulary lacks (with ``vocab_file="training"``: ``[C@@H]`` where
    training had ``[C@H]``) is replaced by the given SMILES where that one holds none, so it is
    not read as ``[UNK]``; ``augment`` trains the variants' tokens.
descriptors : bool, default=True
    Fuse RDKit 2D descriptors (quantile-scaled on the training data) into the head.
fingerprint : bool, default=True
    Fuse a Morgan count fingerprint (radius 2, 2048 bits, log(1 + count)) into the head, beside
    the descriptors (Chemprop's ``--features-generators morgan_count``).
forest : bool, default=True
    Also fit a random forest (500 trees) on those molecule features, on the training part, and
    blend its predictions with the network's; the forest's weight (``forest_weight_``, 0 to 1 in
    steps of 0.1) is the one that scores best on the validation split, 0.5 without one or where
    its labels cannot rank the blends (``gmnet_sklearn.forest``). Without descriptors or
    fingerprint in the head, the forest reads the Morgan count fingerprint alone. Multi-task data
    get one forest per task (500 trees each, fitted in turn), so its time and ``save``'s
    ``forest.skops`` grow with the number of tasks (Tox21's 12: 6,000 trees); ``forest=False``
    for many tasks.
valid_split : {"scaffold", "balanced_scaffold", "random"} or None, default="scaffold"
    Internal validation split that picks the epochs kept when ``fit`` gets no ``X_valid``:
    "scaffold" (DeepChem's: the largest scaffold groups train, the rest validate, so one large
    group that does not fit the training part validates whole), "balanced_scaffold" (Chemprop's,
    seeded: groups larger than half the validation part train, the others are drawn at random),
    "random" or None (keep the last epoch). A single-task classifier's "random" split is
    stratified where every class has two rows; where its scaffold validation part holds one
    class, Chemprop's balanced scaffold order is tried.
valid_size : float, default=0.1
    The fraction of the training SMILES the internal validation split holds.
"""

INPUT_PARAMETERS_DOC = """\
vocab_file : str or path-like, default=None
    The token vocabulary. None: DeepChem's 591 tokens (``tokenizer.DEEPCHEM_VOCAB``, shipped
    with the package; the paper's, every benchmark's and every shipped encoder's); a path: a
    DeepChem-style vocabulary file; "training": one fitted on the training SMILES (and
    ``augment``'s variants). Tokens a vocabulary lacks are read as ``[UNK]`` and named
    (``UnknownTokenWarning``); those it holds that no training SMILES has keep their initial
    embedding, as in DeepChem and ChemBERTa. With ``pretrained`` the checkpoint's vocabulary is
    used: ``vocab_file`` must then be None or the same vocabulary (``ValueError`` otherwise).
on_invalid : {"raise", "nan", "skip"}, default="raise"
    What happens to a SMILES RDKit (or the tokenizer) rejects. "raise": an error naming the
    rows, in fit and predict. "nan": predict gives NaN rows for them (fit still raises).
    "skip": as "nan" at predict, and fit leaves such rows of X and X_valid out, with their
    targets, before splitting and featurising, with an ``InvalidSmilesWarning`` naming them;
    ``n_invalid_skipped_``, ``invalid_rows_`` and ``invalid_valid_rows_`` (positions in X and
    X_valid) record them.
bucket_by_length : bool, default=True
    Length-bucketed (still shuffled) training batches, less padding.
random_state : int, RandomState instance or None, default=None
    The fit's seed: an int is the seed itself, anything else gives one seed drawn from it
    (``sklearn.utils.check_random_state``). ``tta``'s variants at predict time are drawn from
    that seed too (from 0 with None).
device : str or torch.device, default="auto"
    The torch device; "auto" picks CUDA when present.
verbose : int, default=0
    Nonzero shows a progress bar (skorch's ``ProgressBar``) and skorch's epoch log.
callbacks : list or tuple of skorch callbacks, default=None
    Extra skorch callbacks, before the estimator's own; a ``TrainingSnapshot`` among them (at
    most one) makes the fit resumable after a kill. ``save`` does not keep them.
"""

RUNTIME_PARAMETERS_DOC = """\
cuda_graphs : bool, default=True
    On CUDA, replay each batch shape's forward and backward from CUDA graphs
    (``gm/cuda_graphs.py``: one launch instead of hundreds per step; batches are right-padded to
    a few widths, which changes no output). False runs the plain module call. Ignored on CPU.
precision : {"float32", "bf16"}, default="float32"
    The network's precision on CUDA: "float32", or "bf16" for bfloat16 autocast of its matrix
    work (the fused attention kernel stays float32 inside). Ignored on CPU.
freeze_encoder_epochs : int, default=0
    With ``pretrained``, train only the fresh head (and the descriptor projection) for this many
    first epochs, then everything (LP-FT). 0: all from the start. Nonzero without
    ``pretrained`` raises ``ValueError``.
n_jobs : int, default=None
    CPU threads for ``fit`` and ``predict``: torch's intra-op threads, the descriptors' worker
    processes and the forest's jobs (at ``predict``, one below 1,000 rows, where a thread pool
    costs more than the trees); torch's setting is restored afterwards. None: torch's
    current setting (all cores unless changed); -1: all CPUs, -2: all but one (joblib's
    ``effective_n_jobs``, as in scikit-learn). On a machine other jobs keep busy, fewer
    threads than cores is much faster: threads that wait for a core stall every parallel step.
memory : str, path-like or object with the joblib.Memory interface, default=None
    None, a folder or a ``joblib.Memory`` (scikit-learn's meaning, as ``Pipeline``'s): cache the
    RDKit descriptors of each list of SMILES there, so a search's candidates, which fit and
    score the same folds, compute them once per fold
    (``gmnet_sklearn.descriptors.cached_descriptors``). It changes no result, and ``save`` does
    not keep it.
layer_lr_decay : float in (0, 1], default=1.0
    With ``pretrained``, layer-wise learning-rate decay: the fresh head trains at ``lr``, the
    top encoder layer at ``lr * layer_lr_decay``, each layer below at one factor more and the
    embeddings at ``lr * layer_lr_decay ** (n_layers + 1)``, so the most general pretrained
    features move least. 1.0: one learning rate. A value below 1 without ``pretrained`` raises
    ``ValueError``.
average_epochs : int, default=3
    The weights of this many epochs with the best validation metric are averaged (uniformly,
    each network's parameters; a "soup" of epochs) at the end of training, and the forest's
    weight in the blend is chosen for that average. 1: the best epoch's weights are restored.
    The default 3 had lower validation error than 1 (recipe round twenty-one,
    ``benchmarks/epoch_average.py``).
    The epochs averaged are in ``history_``'s last row (``averaged_epochs``); fewer are
    averaged where fewer epochs have a finite metric. A fit without validation data keeps the
    last epoch (with a warning where ``valid_split`` split nothing off).
"""


def training_parameters_doc(n_estimators_doc: str, max_length_doc: str, pretrained_doc: str) -> str:
    """The training parameters' numpydoc entries in signature order, ``optimizer`` to
    ``average_epochs``, with the task's ``n_estimators`` entry and the family's ``max_length``
    and ``pretrained`` entries in their places."""
    return (OPTIMISATION_PARAMETERS_DOC + n_estimators_doc + DATA_PARAMETERS_DOC + max_length_doc
            + INPUT_PARAMETERS_DOC + pretrained_doc + RUNTIME_PARAMETERS_DOC)


#: numpydoc entries of the fitted attributes both tasks and families have (the task's own come
#: first: ``REGRESSOR_ATTRIBUTES_DOC``, ``CLASSIFIER_ATTRIBUTES_DOC``).
FITTED_ATTRIBUTES_DOC = """\
net_ : skorch.NeuralNet
    The first ensemble member's trained skorch net (``nets_[0]``).
nets_ : list of skorch.NeuralNet
    The ``n_estimators`` ensemble members' trained nets.
history_ : skorch.history.History
    The first member's skorch training history (per-epoch losses, validation metric, best
    flags); ``nets_[i].history`` holds member i's.
best_epoch_ : int
    The 1-based epoch with the best validation metric (the last epoch without validation), of
    the first member: with ``average_epochs=1`` the epoch whose weights were restored, above 1
    the best of the epochs averaged (all of them are in ``history_[-1, "averaged_epochs"]``,
    a key absent when the fit had no usable validation data or no epoch a finite metric).
tokenizer_ : SmilesTokenizer
    The vocabulary: the checkpoint's with ``pretrained``, else ``vocab_file``'s (DeepChem's by
    default; with "training", fitted on ``fit``'s X and ``augment``'s variants).
max_length_ : int
    The longest token sequence (incl. [CLS]/[SEP]) the model takes: ``max_length``, or the
    model's own limit where it is None.
device_ : str or torch.device
    The device the nets run on (``device`` with "auto" resolved; a ``torch.device`` given stays one).
pretrained_ : dict or None
    What the ``pretrained`` checkpoint is (its folder, kind, shape parameters, vocabulary file
    and size, [PAD] id); None without ``pretrained``. Set by ``fit`` (not by ``load``).
descriptor_scaler_ : RDKitDescriptors
    With ``descriptors=True``: the RDKit descriptors' scaling, fitted on the training part.
forest_ : MoleculeForest or None
    With ``forest=True``: the random forest(s) blended with the networks; else None.
forest_weight_ : float
    The forest's weight in the blend (0 to 1; 0.0 without a forest).
n_train_ : int
    Training molecules (the given SMILES, without the validation rows or ``augment``'s
    variants).
n_valid_ : int
    Validation molecules (0 without validation data).
n_invalid_skipped_ : int
    Rows of X and X_valid that ``on_invalid="skip"`` left out of the fit (0 otherwise).
invalid_rows_ : ndarray of int64
    Their positions in X (empty unless ``on_invalid="skip"``).
invalid_valid_rows_ : ndarray of int64
    Their positions in X_valid (empty unless ``on_invalid="skip"``).
resume_info_ : dict or None
    How the fit came about: None without a ``TrainingSnapshot`` in ``callbacks`` (and for a
    loaded model), else the snapshot file(s) (``"snapshot"``), the parts of the fit
    (``"parts"``), the epoch it resumed from (``"resumed_from_epoch"``, None if not resumed),
    the epoch seconds of the earlier parts (``"fit_seconds_before"``) and their whole wall
    time (``"fit_wall_seconds_before"``, None if a part predates it).
"""


def estimator_doc(summary: str, extended: str, parameters: str, attributes: str, see_also: str) -> str:
    """An estimator's numpydoc docstring from its pieces (each written dedented): the summary
    line, the extended summary, then the Parameters, Attributes and See Also sections."""
    return "\n\n".join([summary.strip(), extended.strip(),
                        "Parameters\n----------\n" + parameters.rstrip("\n"),
                        "Attributes\n----------\n" + attributes.rstrip("\n"),
                        "See Also\n--------\n" + see_also.rstrip("\n")]) + "\n"


# ---- the tasks' own entries ------------------------------------------------------------------
#: The regressors' ``n_estimators`` entry (the classifiers average probabilities and have no
#: ``return_std``): goes between ``patience`` and ``augment`` (`training_parameters_doc`).
REGRESSOR_N_ESTIMATORS_DOC = """\
n_estimators : int, default=1
    Ensemble members, member i seeded ``random_state + i`` (the seed drawn from
    ``random_state`` plus i where it is not an int), so ensembles at neighbouring seeds share
    members (space the seeds of repeated runs ``n_estimators`` apart); predictions are averaged
    and ``predict(X, return_std=True)`` gives their spread.
"""
#: The regressors' own fitted attributes (before the shared `FITTED_ATTRIBUTES_DOC`).
REGRESSOR_ATTRIBUTES_DOC = """\
n_outputs_ : int
    Target columns (1 for a 1-D y).
y_mean_ : ndarray of shape (n_outputs_,)
    Each target's mean on the training rows (missing labels left out); zeros with
    ``normalize_y=False``.
y_scale_ : ndarray of shape (n_outputs_,)
    Each target's population standard deviation on the training rows (missing labels left
    out; 1 where it is 0); ones with ``normalize_y=False``. Predictions are the members'
    averaged outputs times ``y_scale_`` plus ``y_mean_``.
"""

#: The classifiers' ``n_estimators`` entry (no ``return_std``; the members' probabilities are
#: averaged): goes between ``patience`` and ``augment`` (`training_parameters_doc`).
CLASSIFIER_N_ESTIMATORS_DOC = """\
n_estimators : int, default=1
    Ensemble members, member i seeded ``random_state + i`` (the seed drawn from
    ``random_state`` plus i where it is not an int), so ensembles at neighbouring seeds share
    members (space the seeds of repeated runs ``n_estimators`` apart); their predicted
    probabilities are averaged.
"""
#: The classifiers' own fitted attributes (before the shared `FITTED_ATTRIBUTES_DOC`).
CLASSIFIER_ATTRIBUTES_DOC = """\
classes_ : ndarray
    Single task: the class labels of the training rows, sorted (``LabelEncoder``'s order).
    Multi-label: ``arange(n_tasks_)``, one entry per label column (scikit-learn's convention).
n_outputs_ : int
    The network's outputs: the number of classes for a single task (2 for binary), the number
    of tasks for multi-label.
n_tasks_ : int
    The number of label columns (1 for a single task).
"""
