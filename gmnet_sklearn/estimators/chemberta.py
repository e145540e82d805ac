"""ChemBERTaRegressor and ChemBERTaClassifier: the same-shape dot-product baseline, same API."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval

from ..baselines import ChemBERTa
from ._base import TRAINING_PARAMETER_CONSTRAINTS, SmilesNetBase
from ._classification import SmilesClassifierMixin
from ._docs import (CLASSIFIER_ATTRIBUTES_DOC, CLASSIFIER_N_ESTIMATORS_DOC, FITTED_ATTRIBUTES_DOC,
                    REGRESSOR_ATTRIBUTES_DOC, REGRESSOR_N_ESTIMATORS_DOC, estimator_doc, training_parameters_doc)
from ._regression import REGRESSOR_PARAMETER_CONSTRAINTS, REGRESSOR_PARAMETERS_DOC, SmilesRegressorMixin

#: The RoBERTa architecture's parameters; the shared training ones come from ``_base``.
CHEMBERTA_PARAMETER_CONSTRAINTS = {
    "d_model": [Interval(Integral, 1, None, closed="left")],
    "n_layers": [Interval(Integral, 1, None, closed="left")],
    "n_heads": [Interval(Integral, 1, None, closed="left")],
    "intermediate_size": [Interval(Integral, 1, None, closed="left")],
    "attention_dropout": [Interval(Real, 0, 1, closed="left")],
    "max_position_embeddings": [Interval(Integral, 1, None, closed="left")],
}


#: The opening paragraph both ChemBERTa estimators' docstrings share (after their summary line).
CHEMBERTA_EXTENDED_SUMMARY = """\
The ChemBERTa-2 baseline (RoBERTa, ChemBERTa-10M shape) with the Chem-GMNet estimators' API:
the same training parameters, with the same defaults (the library's tuned recipe, at the same
width, with the ChemBERTa-10M ratio of intermediate to hidden size, 464/384); the architecture
parameters are ``d_model``, ``n_layers``, ``n_heads``, ``intermediate_size``, ``dropout``
(hidden), ``attention_dropout`` and ``max_position_embeddings``.
``CHEMBERTA_PAPER_PROTOCOL`` (``ChemBERTaRegressor(**CHEMBERTA_PAPER_PROTOCOL)``,
``ChemBERTaClassifier(**CHEMBERTA_PAPER_PROTOCOL)``) is the paper's baseline and protocol.
"""

#: numpydoc entries of the RoBERTa architecture's parameters, in signature order.
CHEMBERTA_ARCHITECTURE_PARAMETERS_DOC = """\
d_model : int, default=256
    Hidden size (the Chem-GMNet estimators' default width).
n_layers : int, default=3
    Encoder layers.
n_heads : int, default=8
    Attention heads.
intermediate_size : int, default=309
    The feed-forward (intermediate) size; the default keeps the ChemBERTa-10M ratio of
    intermediate to hidden size, 464/384, at the default width (256 * 464/384 = 309.3).
dropout : float, default=0.1
    Hidden dropout (embeddings, residual branches, head).
attention_dropout : float, default=0.1
    Attention-probability dropout.
max_position_embeddings : int, default=515
    Size of RoBERTa's position table; positions start after the padding index, so 515 takes
    514 tokens ([PAD] = 0).
"""

#: The ChemBERTa estimators' ``max_length`` entry (goes between ``valid_size`` and ``vocab_file``).
CHEMBERTA_MAX_LENGTH_DOC = """\
max_length : int, default=None
    Longest accepted token sequence incl. [CLS]/[SEP]. None: the most the position table takes,
    ``max_position_embeddings - 1`` less [PAD]'s id (514 at the defaults, the paper's); a
    larger value raises ``ValueError``.
"""

#: The ChemBERTa estimators' ``pretrained`` entry (goes between ``callbacks`` and ``cuda_graphs``).
CHEMBERTA_PRETRAINED_DOC = """\
pretrained : str or path-like, default=None
    None, a ``gmnet_sklearn.pretrain`` folder, a Hugging Face ``RobertaForMaskedLM`` folder,
    "moses", "moses-paper", "moses-mtr" or "moses-epoch" (the shipped ChemBERTa encoders, as
    for Chem-GMNet): start the encoder from its pretrained weights and vocabulary (the head is
    fresh). Shape parameters must match the checkpoint's (``ValueError`` otherwise);
    ``ChemBERTaRegressor.from_pretrained(path, ...)`` (or
    ``ChemBERTaClassifier.from_pretrained``) takes the shape from the checkpoint. A Hugging Face
    folder without ``vocab.txt`` needs its vocabulary as ``vocab_file``.
"""

CHEMBERTA_REGRESSOR_SEE_ALSO = """\
ChemBERTaClassifier : The ChemBERTa classifier: the same parameters, without ``normalize_y``.
GMNetRegressor : The Chem-GMNet regressor this baseline is compared with, same API.
gmnet_sklearn.estimators.CHEMBERTA_PAPER_PROTOCOL : The paper's baseline and protocol,
    ``ChemBERTaRegressor(**CHEMBERTA_PAPER_PROTOCOL)``.
"""

CHEMBERTA_CLASSIFIER_SEE_ALSO = """\
ChemBERTaRegressor : The ChemBERTa regressor: the same parameters, and ``normalize_y``.
GMNetClassifier : The Chem-GMNet classifier this baseline is compared with, same API.
gmnet_sklearn.estimators.CHEMBERTA_PAPER_PROTOCOL : The paper's baseline and protocol,
    ``ChemBERTaClassifier(**CHEMBERTA_PAPER_PROTOCOL)``.
"""


class _ChemBERTaParams(SmilesNetBase):
    """Hyperparameters of the ChemBERTa-2 baseline estimators (their shared ``__init__``);
    documented on ``ChemBERTaRegressor`` and ``ChemBERTaClassifier``."""

    _pretrain_family = "chemberta"
    _family = "ChemBERTa"
    _parameter_constraints: dict = {**TRAINING_PARAMETER_CONSTRAINTS, **CHEMBERTA_PARAMETER_CONSTRAINTS}

    def __init__(self, d_model=256, n_layers=3, n_heads=8, intermediate_size=309, dropout=0.1,
                 attention_dropout=0.1, max_position_embeddings=515, optimizer="adamw", lr=5e-4, weight_decay=0.01, warmup=0.1,
                 lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None, n_estimators=1, augment=0, tta=0,
                 descriptors=True, fingerprint=True, forest=True, valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None, pretrained=None,
                 cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, average_epochs=3):
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.intermediate_size = intermediate_size
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_position_embeddings = max_position_embeddings
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
        # RoBERTa positions start after the padding index; with [PAD] = 0 that leaves 514.
        return self.max_position_embeddings - 1

    def _vocabulary_max_length(self, max_length):
        # a vocabulary whose [PAD] is not id 0 leaves fewer positions (the model's own limit)
        limit = self.max_position_embeddings - self.tokenizer_.pad_id - 1
        if self.max_length is not None and self.max_length > limit:  # the user's own value: never cut silently
            raise ValueError(f"max_length={self.max_length} exceeds what the ChemBERTa model can take with this "
                             f"vocabulary ({limit}: max_position_embeddings={self.max_position_embeddings} less "
                             f"[PAD]'s id {self.tokenizer_.pad_id} and 1)")
        return limit if max_length is None else min(max_length, limit)

    def _build_module(self, vocab_size, n_outputs, pad_id):
        return ChemBERTa(vocab_size, n_outputs, d_model=self.d_model, n_layers=self.n_layers, n_heads=self.n_heads,
                         intermediate_size=self.intermediate_size, max_position_embeddings=self.max_position_embeddings,
                         dropout=self.dropout, attention_dropout=self.attention_dropout, pad_id=pad_id)


class ChemBERTaRegressor(SmilesRegressorMixin, _ChemBERTaParams):
    __doc__ = estimator_doc(
        "Same-shape ChemBERTa-2 regressor on SMILES.",
        CHEMBERTA_EXTENDED_SUMMARY,
        CHEMBERTA_ARCHITECTURE_PARAMETERS_DOC
        + training_parameters_doc(REGRESSOR_N_ESTIMATORS_DOC, CHEMBERTA_MAX_LENGTH_DOC, CHEMBERTA_PRETRAINED_DOC)
        + REGRESSOR_PARAMETERS_DOC,
        REGRESSOR_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
        CHEMBERTA_REGRESSOR_SEE_ALSO)
    _parameter_constraints: dict = {**_ChemBERTaParams._parameter_constraints, **REGRESSOR_PARAMETER_CONSTRAINTS}

    # scikit-learn reads the parameters from the signature: the family's, and the regressors' own
    def __init__(self, d_model=256, n_layers=3, n_heads=8, intermediate_size=309, dropout=0.1,
                 attention_dropout=0.1, max_position_embeddings=515, optimizer="adamw", lr=5e-4,
                 weight_decay=0.01, warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None,
                 n_estimators=1, augment=0, tta=0, descriptors=True, fingerprint=True, forest=True,
                 valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None,
                 pretrained=None, cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, average_epochs=3, normalize_y=True):
        super().__init__(d_model=d_model, n_layers=n_layers, n_heads=n_heads, intermediate_size=intermediate_size,
                         dropout=dropout, attention_dropout=attention_dropout,
                         max_position_embeddings=max_position_embeddings, optimizer=optimizer, lr=lr,
                         weight_decay=weight_decay, warmup=warmup, lr_schedule=lr_schedule, batch_size=batch_size,
                         max_epochs=max_epochs, patience=patience, n_estimators=n_estimators, augment=augment,
                         tta=tta, descriptors=descriptors, fingerprint=fingerprint, forest=forest,
                         valid_split=valid_split, valid_size=valid_size, max_length=max_length,
                         vocab_file=vocab_file, on_invalid=on_invalid, bucket_by_length=bucket_by_length,
                         random_state=random_state, device=device, verbose=verbose, callbacks=callbacks,
                         pretrained=pretrained, cuda_graphs=cuda_graphs, precision=precision,
                         freeze_encoder_epochs=freeze_encoder_epochs, n_jobs=n_jobs, memory=memory,
                         layer_lr_decay=layer_lr_decay, average_epochs=average_epochs)
        self.normalize_y = normalize_y


class ChemBERTaClassifier(SmilesClassifierMixin, _ChemBERTaParams):
    __doc__ = estimator_doc(
        "Same-shape ChemBERTa-2 classifier on SMILES.",
        CHEMBERTA_EXTENDED_SUMMARY,
        CHEMBERTA_ARCHITECTURE_PARAMETERS_DOC
        + training_parameters_doc(CLASSIFIER_N_ESTIMATORS_DOC, CHEMBERTA_MAX_LENGTH_DOC, CHEMBERTA_PRETRAINED_DOC),
        CLASSIFIER_ATTRIBUTES_DOC + FITTED_ATTRIBUTES_DOC,
        CHEMBERTA_CLASSIFIER_SEE_ALSO)
