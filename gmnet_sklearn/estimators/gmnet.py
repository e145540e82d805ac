"""GMNetRegressor and GMNetClassifier: Chem-GMNet on SMILES as scikit-learn estimators."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..gm import GMNet
from ._base import TRAINING_PARAMETER_CONSTRAINTS, SmilesNetBase
from ._classification import SmilesClassifierMixin
from ._regression import REGRESSOR_PARAMETER_CONSTRAINTS, REGRESSOR_PARAMETERS_DOC, SmilesRegressorMixin

#: The Chem-GMNet architecture's parameters; the shared training ones come from ``_base``.
GMNET_PARAMETER_CONSTRAINTS = {
    "k": [Interval(Integral, 3, None, closed="left")],
    "L": [Interval(Integral, 0, None, closed="left")],
    "attention": [StrOptions({"dual_ska", "bidir_sfa", "gated_sfa", "ska"})],
    "d_model": [Interval(Integral, 1, None, closed="left")],
    "n_layers": [Interval(Integral, 1, None, closed="left")],
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    # a zonal activation's name (gm.functional resolves it, case-insensitively) or a callable
    "activation": [str, callable],
    "adaptive": ["boolean"],
    "conj_shift": [Real],
}


class _GMNetParams(SmilesNetBase):
    """Hyperparameters of the Chem-GMNet estimators.

    The defaults are the library's tuned recipe, chosen on validation splits only
    (``benchmarks/recipe_search.py``); ``GMNetRegressor(**PAPER_PROTOCOL)`` is the paper's model
    and protocol (Adam 3e-5, 100 epochs, batch 32, the ChemBERTa-10M shape).

    Parameters
    ----------
    k, L : sphere dimension (>= 3) and harmonic degree (>= 0); D* = sum_l N(k, l).
    attention : "dual_ska" (default), "bidir_sfa", "gated_sfa" or "ska".
    d_model, n_layers, n_heads, dropout : width, depth, heads and dropout of the encoder.
    activation, adaptive : SH-FFN zonal activation and whether its eigenvalues are trained.
    conj_shift : the conjugation flag's fixed shift of the decay-gate logits.
    optimizer, lr, weight_decay : "adamw" or "adam", peak learning rate, weight decay.
    warmup, lr_schedule : linear warm-up over this fraction of the training steps, then "cosine",
        "linear" (both to 0 at ``max_epochs``) or "constant"; stepped every batch.
    batch_size, max_epochs : batch size and the most epochs trained.
    patience : stop once the validation metric has not improved for this many epochs (None: never).
    n_estimators : ensemble members (seeds ``random_state + i``); predictions are averaged and
        ``predict(X, return_std=True)`` gives their spread.
    augment : RDKit-randomised SMILES kept per training molecule; each epoch trains on one of the
        molecule's variants (or its given SMILES), drawn at random.
    tta : randomised SMILES per molecule averaged with the given one at predict time.
    descriptors : fuse RDKit 2D descriptors (quantile-scaled on the training data) into the head.
    fingerprint : fuse a Morgan count fingerprint (radius 2, 2048 bits, log(1 + count)) into the
        head, beside the descriptors (Chemprop's ``--features-generators morgan_count``).
    forest : also fit a random forest (500 trees) on those molecule features, on the training
        part, and blend its predictions with the network's; the forest's weight (``forest_weight_``,
        0 to 1 in steps of 0.1) is the one that scores best on the validation split, 0.5 without
        one (``gmnet_sklearn.forest``). Without descriptors or fingerprint in the head, the forest
        reads the Morgan count fingerprint alone. Multi-task data get one forest per task (500
        trees each, fitted in turn), so its time and ``save``'s ``forest.skops`` grow with the
        number of tasks (Tox21's 12: 6,000 trees); ``forest=False`` for many tasks.
    valid_split, valid_size : internal validation split for best-epoch selection when ``fit`` gets
        no ``X_valid``: "scaffold" (default), "random" or None (keep the last epoch); the
        fraction of the training SMILES it holds (default 0.1).
    max_length : longest accepted token sequence incl. [CLS]/[SEP] (None: 514, the paper's).
    vocab_file : DeepChem-style vocabulary file; None fits the vocabulary on the training SMILES.
    on_invalid : what happens to a SMILES RDKit (or the tokenizer) rejects. "raise" (default): an
        error naming the rows, in fit and predict. "nan": predict gives NaN rows for them (fit still
        raises). "skip": as "nan" at predict, and fit leaves such rows of X and X_valid out, with
        their targets, before splitting and featurising, with an ``InvalidSmilesWarning`` naming
        them; ``n_invalid_skipped_``, ``invalid_rows_`` and ``invalid_valid_rows_`` (positions in
        X and X_valid) record them.
    bucket_by_length : length-bucketed (still shuffled) training batches, less padding.
    random_state, device ("auto" picks CUDA when present), verbose, callbacks (extra skorch callbacks;
        a ``TrainingSnapshot`` among them makes the fit resumable after a kill).
    pretrained : None, a folder written by ``gmnet_sklearn.pretrain``, "moses" (the shipped MOSES
        masked-LM encoder, the default shape), "moses-paper" (the same at the paper's shape),
        "moses-mtr" (pretrained on MOSES to regress RDKit's descriptors, the default shape) or
        "moses-epoch" (the masked-LM pretraining run for a whole MOSES epoch, four times as long): start
        the encoder from its pretrained weights and vocabulary (the head is fresh). Shape parameters
        must match the checkpoint's (``ValueError`` otherwise);
        ``GMNetRegressor.from_pretrained(path, ...)`` takes them from it.
    freeze_encoder_epochs : with ``pretrained``, train only the fresh head (and the descriptor
        projection) for this many first epochs, then everything (LP-FT). 0 (default): all from
        the start.
    cuda_graphs : on CUDA (default True), replay each batch shape's forward and backward from
        CUDA graphs (``gm/cuda_graphs.py``: one launch instead of hundreds per step; batches are
        right-padded to a few widths, which changes no output). False runs the plain module call.
        Ignored on CPU.
    precision : "float32" (default) or "bf16": bfloat16 autocast of the network's matrix work on
        CUDA (the fused attention kernel stays float32 inside). Ignored on CPU.
    n_jobs : CPU threads for ``fit`` and ``predict``: torch's intra-op threads, the descriptors'
        worker processes and the forest's jobs; torch's setting is restored afterwards. None
        (default): torch's current setting (all cores unless changed). On a machine other jobs
        keep busy, fewer threads than cores is much faster: threads that wait for a core stall
        every parallel step.
    memory : None (default), a folder or a ``joblib.Memory`` (scikit-learn's meaning, as
        ``Pipeline``'s): cache the RDKit descriptors of each list of SMILES there, so a search's
        candidates, which fit and score the same folds, compute them once per fold
        (``gmnet_sklearn.descriptors.cached_descriptors``). It changes no result, and ``save``
        does not keep it.
    layer_lr_decay : with ``pretrained``, layer-wise learning-rate decay: the fresh head trains
        at ``lr``, the top encoder layer at ``lr * layer_lr_decay``, each layer below at one
        factor more and the embeddings at ``lr * layer_lr_decay ** (n_layers + 1)``, so the most
        general pretrained features move least. 1.0 (default): one learning rate.
    """

    _pretrain_family = "gmnet"
    _family = "Chem-GMNet"
    _parameter_constraints: dict = {**TRAINING_PARAMETER_CONSTRAINTS, **GMNET_PARAMETER_CONSTRAINTS}

    def __init__(self, k=8, L=3, attention="dual_ska", d_model=256, n_layers=3, n_heads=8, dropout=0.1,
                 activation="gelu", adaptive=False, conj_shift=1.0, optimizer="adamw", lr=5e-4, weight_decay=0.01,
                 warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None, n_estimators=1,
                 augment=0, tta=0, descriptors=True, fingerprint=True, forest=True, valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None, pretrained=None,
                 cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0):
        self.k = k
        self.L = L
        self.attention = attention
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.dropout = dropout
        self.activation = activation
        self.adaptive = adaptive
        self.conj_shift = conj_shift
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.n_estimators = n_estimators
        self.augment = augment
        self.tta = tta
        self.descriptors = descriptors
        self.fingerprint = fingerprint
        self.forest = forest
        self.valid_split = valid_split
        self.valid_size = valid_size
        self.max_length = max_length
        self.vocab_file = vocab_file
        self.on_invalid = on_invalid
        self.bucket_by_length = bucket_by_length
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.cuda_graphs = cuda_graphs
        self.precision = precision
        self.callbacks = callbacks
        self.pretrained = pretrained
        self.freeze_encoder_epochs = freeze_encoder_epochs
        self.n_jobs = n_jobs
        self.memory = memory
        self.layer_lr_decay = layer_lr_decay

    def _model_max_length(self):
        return 514  # the paper's max sequence length; the model itself has no position table

    def _build_module(self, vocab_size, n_outputs, pad_id):
        return GMNet(vocab_size, n_outputs, k=self.k, L=self.L, d_model=self.d_model, n_layers=self.n_layers,
                     n_heads=self.n_heads, dropout=self.dropout, attention=self.attention,
                     activation=self.activation, adaptive=self.adaptive, conj_shift=self.conj_shift, pad_id=pad_id)


class GMNetRegressor(SmilesRegressorMixin, _GMNetParams):
    __doc__ = ("Chem-GMNet regressor on SMILES (single or multi-output; NaN targets are masked).\n"
               + (_GMNetParams.__doc__ or "").rstrip() + "\n" + REGRESSOR_PARAMETERS_DOC)
    _parameter_constraints: dict = {**_GMNetParams._parameter_constraints, **REGRESSOR_PARAMETER_CONSTRAINTS}

    # scikit-learn reads the parameters from the signature: the family's, and the regressors' own
    def __init__(self, k=8, L=3, attention="dual_ska", d_model=256, n_layers=3, n_heads=8, dropout=0.1,
                 activation="gelu", adaptive=False, conj_shift=1.0, optimizer="adamw", lr=5e-4,
                 weight_decay=0.01, warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None,
                 n_estimators=1, augment=0, tta=0, descriptors=True, fingerprint=True, forest=True,
                 valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None,
                 pretrained=None, cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, normalize_y=True):
        super().__init__(k=k, L=L, attention=attention, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                         dropout=dropout, activation=activation, adaptive=adaptive, conj_shift=conj_shift,
                         optimizer=optimizer, lr=lr, weight_decay=weight_decay, warmup=warmup,
                         lr_schedule=lr_schedule, batch_size=batch_size, max_epochs=max_epochs, patience=patience,
                         n_estimators=n_estimators, augment=augment, tta=tta, descriptors=descriptors,
                         fingerprint=fingerprint, forest=forest, valid_split=valid_split, valid_size=valid_size,
                         max_length=max_length, vocab_file=vocab_file, on_invalid=on_invalid,
                         bucket_by_length=bucket_by_length, random_state=random_state, device=device,
                         verbose=verbose, callbacks=callbacks, pretrained=pretrained, cuda_graphs=cuda_graphs,
                         precision=precision, freeze_encoder_epochs=freeze_encoder_epochs, n_jobs=n_jobs,
                         memory=memory, layer_lr_decay=layer_lr_decay)
        self.normalize_y = normalize_y


class GMNetClassifier(SmilesClassifierMixin, _GMNetParams):
    __doc__ = "Chem-GMNet classifier on SMILES (binary/multiclass, or multi-label with NaN = missing).\n" + (_GMNetParams.__doc__ or "")
