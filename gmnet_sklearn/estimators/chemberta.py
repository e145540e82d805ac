"""ChemBERTaRegressor and ChemBERTaClassifier: the same-shape dot-product baseline, same API."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval

from ..baselines import ChemBERTa
from ._base import TRAINING_PARAMETER_CONSTRAINTS, SmilesNetBase
from ._classification import SmilesClassifierMixin
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


class _ChemBERTaParams(SmilesNetBase):
    """Hyperparameters of the ChemBERTa-2 baseline estimators (RoBERTa, ChemBERTa-10M shape).

    Same training parameters (and defaults: the library's tuned recipe, at the same width, with
    the ChemBERTa-10M ratio of intermediate to hidden size, 464/384) as the Chem-GMNet estimators;
    the architecture parameters are d_model, n_layers, n_heads, intermediate_size, dropout
    (hidden), attention_dropout and max_position_embeddings (515: RoBERTa's positions after the
    padding index, 514 tokens). ``ChemBERTaRegressor(**CHEMBERTA_PAPER_PROTOCOL)`` is
    the paper's baseline and protocol. ``pretrained`` (a ``gmnet_sklearn.pretrain`` folder, a Hugging
    Face ``RobertaForMaskedLM`` folder, "moses", "moses-paper", "moses-mtr" or "moses-epoch") warm-starts the
    encoder, as for Chem-GMNet; ``ChemBERTaRegressor.from_pretrained(path, ...)`` takes the shape
    from the checkpoint.

    on_invalid : "raise" (default), "nan" (NaN rows at predict) or "skip" (also leaves the rows
        of X and X_valid whose SMILES RDKit rejects out of fit, with a warning naming them and
        ``n_invalid_skipped_`` / ``invalid_rows_`` / ``invalid_valid_rows_`` recording them), as
        for the Chem-GMNet estimators.
    cuda_graphs, precision, freeze_encoder_epochs, n_jobs, memory, layer_lr_decay : CUDA graphs of
        each batch shape's steps, bf16 autocast, head-only first epochs of a warm start (LP-FT), CPU
        threads, the descriptors' cache, layer-wise learning-rate decay of a warm start; as for the
        Chem-GMNet estimators.
    """

    _pretrain_family = "chemberta"
    _family = "ChemBERTa"
    _parameter_constraints: dict = {**TRAINING_PARAMETER_CONSTRAINTS, **CHEMBERTA_PARAMETER_CONSTRAINTS}

    def __init__(self, d_model=256, n_layers=3, n_heads=8, intermediate_size=309, dropout=0.1,
                 attention_dropout=0.1, max_position_embeddings=515, optimizer="adamw", lr=5e-4, weight_decay=0.01, warmup=0.1,
                 lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None, n_estimators=1, augment=0, tta=0,
                 descriptors=True, fingerprint=True, forest=True, valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None, pretrained=None,
                 cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0):
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
    __doc__ = ("Same-shape ChemBERTa-2 regressor on SMILES.\n"
               + (_ChemBERTaParams.__doc__ or "").rstrip() + "\n" + REGRESSOR_PARAMETERS_DOC)
    _parameter_constraints: dict = {**_ChemBERTaParams._parameter_constraints, **REGRESSOR_PARAMETER_CONSTRAINTS}

    # scikit-learn reads the parameters from the signature: the family's, and the regressors' own
    def __init__(self, d_model=256, n_layers=3, n_heads=8, intermediate_size=309, dropout=0.1,
                 attention_dropout=0.1, max_position_embeddings=515, optimizer="adamw", lr=5e-4,
                 weight_decay=0.01, warmup=0.1, lr_schedule="cosine", batch_size=32, max_epochs=20, patience=None,
                 n_estimators=1, augment=0, tta=0, descriptors=True, fingerprint=True, forest=True,
                 valid_split="scaffold", valid_size=0.1, max_length=None, vocab_file=None, on_invalid="raise",
                 bucket_by_length=True, random_state=None, device="auto", verbose=0, callbacks=None,
                 pretrained=None, cuda_graphs=True, precision="float32", freeze_encoder_epochs=0, n_jobs=None,
                 memory=None, layer_lr_decay=1.0, normalize_y=True):
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
                         layer_lr_decay=layer_lr_decay)
        self.normalize_y = normalize_y


class ChemBERTaClassifier(SmilesClassifierMixin, _ChemBERTaParams):
    __doc__ = "Same-shape ChemBERTa-2 classifier on SMILES.\n" + (_ChemBERTaParams.__doc__ or "")
