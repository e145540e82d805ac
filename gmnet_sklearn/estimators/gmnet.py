"""GMNetRegressor and GMNetClassifier: Chem-GMNet on SMILES as scikit-learn estimators."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ..gm import GMNet
from ._base import TRAINING_PARAMETER_CONSTRAINTS, SmilesNetBase
from ._classification import SmilesClassifierMixin
from ._docs import (CLASSIFIER_ATTRIBUTES_DOC, CLASSIFIER_N_ESTIMATORS_DOC, FITTED_ATTRIBUTES_DOC,
                    REGRESSOR_ATTRIBUTES_DOC, REGRESSOR_N_ESTIMATORS_DOC, estimator_doc, training_parameters_doc)
from ._regression import REGRESSOR_PARAMETER_CONSTRAINTS, REGRESSOR_PARAMETERS_DOC, SmilesRegressorMixin

#: The Chem-GMNet architecture's parameters; the shared training ones come from ``_base``.
GMNET_PARAMETER_CONSTRAINTS = {
    "k": [Interval(Integral, 3, None, closed="left")],
    # (L = 0: every token's harmonics are the constant one, so the encoder cannot tell tokens apart)
    "L": [Interval(Integral, 1, None, closed="left")],
    "attention": [StrOptions({"dual_ska", "bidir_sfa", "gated_sfa", "ska"})],
    "d_model": [Interval(Integral, 1, None, closed="left")],
    "n_layers": [Interval(Integral, 1, None, closed="left")],
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    # a zonal activation's name (gm.functional resolves it, case-insensitively) or a callable
    "activation": [str, callable],
    "adaptive": ["boolean"],
    "conj_shift": [Interval(Real, None, None, closed="neither")],  # finite (inf or NaN: a NaN model)
}


#: The opening paragraph both Chem-GMNet estimators' docstrings share (after their summary line).
GMNET_EXTENDED_SUMMARY = """\
The defaults are the library's tuned recipe, chosen on validation splits only
(``benchmarks/recipe_search.py``; ``average_epochs``: ``benchmarks/epoch_average.py``);
``PAPER_PROTOCOL`` (``GMNetRegressor(**PAPER_PROTOCOL)``, ``GMNetClassifier(**PAPER_PROTOCOL)``)
is the paper's model and protocol (Adam 3e-5, 100 epochs, batch 32, the ChemBERTa-10M shape).
"""

#: numpydoc entries of the Chem-GMNet architecture's parameters, in signature order.
GMNET_ARCHITECTURE_PARAMETERS_DOC = """\
k : int, default=8
    Sphere dimension (>= 3); with ``L``, D* = sum_l N(k, l).
L : int, default=3
    Harmonic degree (>= 1); D* = sum_l N(k, l) over the degrees l <= L. (At 0 every token's
    harmonics are the constant one: the encoder could not tell tokens apart.)
attention : {"dual_ska", "bidir_sfa", "gated_sfa", "ska"}, default="dual_ska"
    The encoder's attention: "dual_ska", "bidir_sfa", "gated_sfa" or "ska".
d_model : int, default=256
    Width of the encoder.
n_layers : int, default=3
    Depth of the encoder (its number of layers).
n_heads : int, default=8
    Attention heads of the encoder.
dropout : float, default=0.1
    Dropout of the encoder.
activation : str or callable, default="gelu"
    SH-FFN zonal activation: its name (resolved case-insensitively by ``gm.functional``) or a
    callable applied elementwise to a numpy float64 array (``np.tanh``, not a torch function;
    ``save`` needs a name).
adaptive : bool, default=False
    Whether the SH-FFN activation's eigenvalues are trained.
conj_shift : float, default=1.0
    The conjugation flag's fixed shift of the decay-gate logits.
"""

#: The Chem-GMNet estimators' ``max_length`` entry (goes between ``valid_size`` and ``vocab_file``).
GMNET_MAX_LENGTH_DOC = """\
max_length : int, default=None
    Longest accepted token sequence incl. [CLS]/[SEP] (None: 514, the paper's; a larger value
    raises ``ValueError``).
"""

#: The Chem-GMNet estimators' ``pretrained`` entry (goes between ``callbacks`` and ``cuda_graphs``).
GMNET_PRETRAINED_DOC = """\
pretrained : str or path-like, default=None
    None, a folder written by ``gmnet_sklearn.pretrain``, "moses" (the shipped MOSES masked-LM
    encoder, the default shape), "moses-paper" (the same at the paper's shape), "moses-mtr"
    (pretrained on MOSES to regress RDKit's descriptors, the default shape) or "moses-epoch"
    (the masked-LM pretraining run for a whole MOSES epoch, four times as long): start the
    encoder from its pretrained weights and vocabulary (the head is fresh). Shape parameters
    must match the checkpoint's (``ValueError`` otherwise);
    ``GMNetRegressor.from_pretrained(path, ...)`` (or ``GMNetClassifier.from_pretrained``)
    takes them from it.
"""

GMNET_REGRESSOR_SEE_ALSO = """\
GMNetClassifier : The Chem-GMNet classifier: the same parameters, without ``normalize_y``.
ChemBERTaRegressor : The same-shape ChemBERTa-2 baseline regressor, same API.
gmnet_sklearn.estimators.PAPER_PROTOCOL : The paper's model and protocol,
    ``GMNetRegressor(**PAPER_PROTOCOL)``.
gmnet_sklearn.estimators.MOSES_FINE_TUNING : The tuned recipe's warm start from the shipped
    MOSES encoder (``pretrained="moses"``, ``lr=2e-4``).
"""

GMNET_CLASSIFIER_SEE_ALSO = """\
GMNetRegressor : The Chem-GMNet regressor: the same parameters, and ``normalize_y``.
ChemBERTaClassifier : The same-shape ChemBERTa-2 baseline classifier, same API.
gmnet_sklearn.estimators.PAPER_PROTOCOL : The paper's model and protocol,
    ``GMNetClassifier(**PAPER_PROTOCOL)``.
gmnet_sklearn.estimators.MOSES_FINE_TUNING : The tuned recipe's warm start from the shipped
    MOSES encoder (``pretrained="moses"``, ``lr=2e-4``).
"""


class _GMNetParams(SmilesNetBase):
    """Hyperparameters of the Chem-GMNet estimators (their shared ``__init__``); documented on
    ``GMNetRegressor`` and ``GMNetClassifier``."""

    _pretrain_family = "gmnet"
    _family = "Chem-GMNet"
    _parameter_constraints: dict = {**TRAINING_PARAMETER_CONSTRAINTS, **GMNET_PARAMETER_CONSTRAINTS}

    def __init__(self, k=8, L=3, attention="dual_ska", d_model=256, n_layers=3, n_heads=8, dropout=0.1,
                 activation="gelu", adaptive=False, conj_shift=1.0, optimizer="adamw", lr=5e-4, weight_decay=0.01,
                 warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None, n_estimators=1,
                 augment=0, tta=0, descriptors=True, fingerprint=True, forest=True, valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None, pretrained=None,
                 cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, average_epochs=3):
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
        self.average_epochs = average_epochs

    def _model_max_length(self):
        return 514  # the paper's max sequence length; the model itself has no position table

    def _build_module(self, vocab_size, n_outputs, pad_id):
        return GMNet(vocab_size, n_outputs, k=self.k, L=self.L, d_model=self.d_model, n_layers=self.n_layers,
                     n_heads=self.n_heads, dropout=self.dropout, attention=self.attention,
                     activation=self.activation, adaptive=self.adaptive, conj_shift=self.conj_shift, pad_id=pad_id)


class GMNetRegressor(SmilesRegressorMixin, _GMNetParams):
    __doc__ = estimator_doc(
        "Chem-GMNet regressor on SMILES (single or multi-output; NaN targets are masked).",
        GMNET_EXTENDED_SUMMARY,
        GMNET_ARCHITECTURE_PARAMETERS_DOC
        + training_parameters_doc(REGRESSOR_N_ESTIMATORS_DOC, GMNET_MAX_LENGTH_DOC, GMNET_PRETRAINED_DOC)
        + REGRESSOR_PARAMETERS_DOC,
        REGRESSOR_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
        GMNET_REGRESSOR_SEE_ALSO)
    _parameter_constraints: dict = {**_GMNetParams._parameter_constraints, **REGRESSOR_PARAMETER_CONSTRAINTS}

    # scikit-learn reads the parameters from the signature: the family's, and the regressors' own
    def __init__(self, k=8, L=3, attention="dual_ska", d_model=256, n_layers=3, n_heads=8, dropout=0.1,
                 activation="gelu", adaptive=False, conj_shift=1.0, optimizer="adamw", lr=5e-4,
                 weight_decay=0.01, warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None,
                 n_estimators=1, augment=0, tta=0, descriptors=True, fingerprint=True, forest=True,
                 valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None,
                 pretrained=None, cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, average_epochs=3, normalize_y=True):
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
                         memory=memory, layer_lr_decay=layer_lr_decay, average_epochs=average_epochs)
        self.normalize_y = normalize_y


class GMNetClassifier(SmilesClassifierMixin, _GMNetParams):
    __doc__ = estimator_doc(
        "Chem-GMNet classifier on SMILES (binary/multiclass, or multi-label with NaN = missing).",
        GMNET_EXTENDED_SUMMARY,
        GMNET_ARCHITECTURE_PARAMETERS_DOC
        + training_parameters_doc(CLASSIFIER_N_ESTIMATORS_DOC, GMNET_MAX_LENGTH_DOC, GMNET_PRETRAINED_DOC),
        CLASSIFIER_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
        GMNET_CLASSIFIER_SEE_ALSO)
