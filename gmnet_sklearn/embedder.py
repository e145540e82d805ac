"""Fingerprints from the model: a fitted Chem-GMNet's features as a scikit-learn transformer.

    emb = GMNetEmbedder(GMNetRegressor().fit(X_train, y_train), prefit=True)
    make_pipeline(emb, RandomForestRegressor()).fit(X_train, y_train)

``features`` picks what each SMILES becomes:

- ``"pooled"``: the encoder's pooled final state (d_model values): the masked mean, ``GMNet.pool``,
  for Chem-GMNet; the [CLS] state for the ChemBERTa baseline;
- ``"head"``: what the head's first layer gets: the pooled state plus the projected RDKit
  descriptors / fingerprint when the estimator fuses them (``descriptors=True`` or
  ``fingerprint=True``, the defaults), the pooled state otherwise;
- ``"moments"``: the terminal Gated-SFA moment matrices of every layer and head (Theorem 1 of the
  paper, ``GMNet.multipole_moments``: the molecule's windowed multipole expansion), flattened to
  n_layers x n_heads x D* x k values.

The encoder comes from an estimator (``encoder_source``): today a fitted ``GMNetRegressor`` /
``GMNetClassifier`` (or, for "pooled"/"head", the ChemBERTa baseline); a pretrained encoder
needs only its own ``EncoderSource``.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .estimators._base import check_smiles_input, in_chunks, torch_threads
from .estimators.data import EncodedSmilesDataset, inference_loader
from .gm import functional as F

FEATURES = ("pooled", "head", "moments")
MOMENT_KINDS = ("mean", "forward", "backward")

__all__ = ["GMNetEmbedder", "EncoderSource", "encoder_source"]


@dataclass
class EncoderSource:
    """Everything the embedder needs from a model: how SMILES become inputs and the modules.

    ``modules`` are the ensemble members' modules as they are called at predict time (a
    ``DescriptorFusion`` or the bare model); ``encoders`` the bare models (with ``pool`` and, for
    Chem-GMNet, ``multipole_moments``); ``molecule_features(smiles)`` the fused rows (or None);
    ``width`` the pooled state's size.
    """

    encode: Callable[[list], object]
    molecule_features: Callable[[list], np.ndarray | None]
    modules: list
    encoders: list
    device: str
    width: int


def encoder_source(estimator) -> EncoderSource:
    """The encoder of a fitted SMILES estimator (raises NotFittedError if it is not fitted)."""
    check_is_fitted(estimator, "nets_")
    modules = [net.module_ for net in estimator.nets_]
    return EncoderSource(
        encode=lambda smiles, on_invalid="raise": estimator._encode(smiles, on_invalid),
        molecule_features=estimator._molecule_features,
        modules=modules,
        encoders=[getattr(m, "model", m) for m in modules],  # DescriptorFusion wraps the model
        device=estimator.device_,
        width=int(estimator._as_fitted("d_model")),
    )


class GMNetEmbedder(TransformerMixin, BaseEstimator):
    """SMILES -> fixed-length features from a Chem-GMNet estimator's encoder (float32 array).

    Parameters
    ----------
    estimator : GMNetRegressor or GMNetClassifier
        For "pooled" and "head" also a ChemBERTa estimator. With ``prefit=False`` (default)
        ``fit(X, y)`` trains a clone of it on ``X, y``; with ``prefit=True`` it must be fitted
        already and ``fit`` checks it and keeps a copy of it (as ``SelectFromModel(prefit=True)``:
        a later refit of ``est`` does not change the features; ``sklearn.frozen.FrozenEstimator(est)`` also keeps a
        fitted estimator through ``clone``, e.g. in ``cross_val_score``).
    features : {"pooled", "head", "moments"}, default="pooled"
        What each SMILES becomes (module docstring).
    moments : {"mean", "forward", "backward"}, default="mean"
        Which terminal state for "moments": "mean" (the paper's M_mol = (forward + backward) / 2),
        "forward" or "backward".
    layers : int or list of int, default=None
        Encoder layers whose moments are kept (None: all; negative indices count from the top).
    member : int or "all", default=0
        The ensemble member (``n_estimators > 1``; negative indices count from the last) whose
        encoder is used, or "all" for the
        members' features side by side.
    batch_size : int, default=128
        Molecules per forward pass in ``transform``.
    prefit : bool, default=False
        Whether ``estimator`` is already fitted.

    Attributes
    ----------
    estimator_ : estimator
        The fitted estimator used.
    members_ : list of int
        The member indices used.
    n_features_out_ : int
        Features per SMILES.
    """

    def __init__(self, estimator, features="pooled", moments="mean", layers=None, member=0, batch_size=128,
                 prefit=False):
        self.estimator = estimator
        self.features = features
        self.moments = moments
        self.layers = layers
        self.member = member
        self.batch_size = batch_size
        self.prefit = prefit

    def _check_params(self):
        if self.features not in FEATURES:
            raise ValueError(f"features must be one of {FEATURES}, got {self.features!r}")
        if self.moments not in MOMENT_KINDS:
            raise ValueError(f"moments must be one of {MOMENT_KINDS}, got {self.moments!r}")
        self._check_batch_size()

    def _check_batch_size(self):
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, numbers.Integral) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")

    def fit(self, X, y=None):
        """Fit a clone of ``estimator`` on ``X, y`` (``prefit=False``), or check that it is fitted."""
        self._check_params()
        # before fitting anything: a Pipeline or another model has no encoder to read
        # (a FrozenEstimator passes attribute reads through to the estimator it wraps)
        if not callable(getattr(self.estimator, "_encode", None)):
            hint = " (pass the pipeline's last step)" if hasattr(self.estimator, "steps") else ""
            raise TypeError(f"GMNetEmbedder reads the encoder of a GMNet or ChemBERTa estimator (GMNetRegressor, "
                            f"GMNetClassifier, ChemBERTaRegressor, ChemBERTaClassifier), not of a "
                            f"{type(self.estimator).__name__}{hint}")
        if self.prefit:
            check_smiles_input(X)
            if not _is_fitted(self.estimator):
                # the usual cause: ColumnTransformer, cross_val_score or GridSearchCV cloned the
                # embedder, and clone un-fits the estimator it holds
                raise NotFittedError(
                    f"GMNetEmbedder(prefit=True) needs a fitted estimator; its {type(self.estimator).__name__} "
                    "is not fitted. If a scikit-learn tool cloned the embedder (ColumnTransformer, "
                    "cross_val_score, GridSearchCV), wrap the fitted estimator: "
                    "GMNetEmbedder(FrozenEstimator(est)), with prefit=False"
                )
            # a copy, as SelectFromModel(prefit=True) takes: a later refit of the user's estimator
            # must not change (or break) the features this embedder was fitted to give. The forest
            # is shared, not copied: no step changes it in place (a refit makes a new one), and its
            # trees are most of a fitted model's memory
            forest = getattr(self.estimator, "forest_", None)
            estimator = copy.deepcopy(self.estimator, {} if forest is None else {id(forest): forest})
        else:
            estimator = clone(self.estimator)  # a FrozenEstimator clones to itself, fitted
            if y is None and not _is_fitted(estimator):
                raise ValueError("GMNetEmbedder(prefit=False) trains its estimator, so fit needs y; "
                                 "pass a fitted estimator with prefit=True to use it as it is")
            if not _is_fitted(estimator):
                self._check_before_training(estimator)  # (not after minutes of training)
            estimator = estimator.fit(X, y)
        source = encoder_source(estimator)
        members = self._members(len(source.modules))
        # what the features are, as fitted: transform and the feature names keep to it whatever
        # set_params does since (a review: a change made transform fail, or mislabel its columns)
        fitted = {"features": self.features, "moments": self.moments, "layers": copy.copy(self.layers)}
        names = self._names(source, **fitted)
        # the fitted state together, once every check passed: a failed fit leaves none (or the last fit's)
        self.estimator_, self.members_, self._feature_names, self._fitted_params = estimator, members, names, fitted
        self.n_features_out_ = len(names) * len(members)
        return self

    def fit_transform(self, X, y=None, **fit_params):
        # X read once: fit would exhaust a generator before TransformerMixin's transform read it
        X = check_smiles_input(X)
        return self.fit(X, y, **fit_params)._transform(X)  # (unwrapped: the index, as MorganFingerprint's)

    def _members(self, n_members: int) -> list[int]:
        if self.member == "all":
            return list(range(n_members))
        if isinstance(self.member, numbers.Integral) and not isinstance(self.member, bool) and -n_members <= self.member < n_members:
            return [int(self.member) % n_members]
        raise ValueError(f"member must be 'all' or an index of the estimator's {n_members} member(s), got {self.member!r}")

    def _check_before_training(self, estimator) -> None:
        """What the parameters alone show to be impossible, checked before ``fit`` trains."""
        params = estimator.get_params(deep=False)
        self._members(int(params.get("n_estimators", 1)))
        if self.features == "moments":
            if "k" not in params:  # the ChemBERTa baseline: no sphere, no moments
                raise ValueError(f"features='moments' needs a Chem-GMNet model, not {type(estimator).__name__}")
            if params.get("attention") == "ska":
                raise ValueError("features='moments' needs a Gated-SFA branch; attention='ska' has none")

    def _as_fitted(self, name: str):
        """``features``, ``moments`` or ``layers`` as the fit had them (the parameter itself before
        a fit, and in a model pickled before they were kept)."""
        return self.__dict__.get("_fitted_params", {}).get(name, getattr(self, name))

    @staticmethod
    def _layer_indices(n_layers: int, layers) -> list[int]:
        if layers is None:
            return list(range(n_layers))
        given = layers
        layers = [layers] if isinstance(layers, numbers.Integral) else list(layers)
        bad = [l for l in layers if isinstance(l, bool) or not isinstance(l, numbers.Integral) or not -n_layers <= l < n_layers]
        if bad or not layers:
            raise ValueError(f"layers must be indices of the model's {n_layers} layers (or None for all), got {given!r}")
        indices = [int(l) % n_layers for l in layers]
        if len(set(indices)) < len(indices):  # the same columns twice (a DataFrame's names must be unique)
            raise ValueError(f"layers names a layer twice: {given!r} (of {n_layers} layers)")
        return indices

    def _names(self, source: EncoderSource, features: str, moments: str, layers) -> list[str]:
        if features != "moments":
            return [f"{features}{i}" for i in range(source.width)]
        encoder = source.encoders[0]
        if not hasattr(encoder, "multipole_moments"):
            raise ValueError(f"features='moments' needs a Chem-GMNet model; {type(encoder).__name__} has no "
                             "Gated-SFA moment matrices")
        attn = encoder.encoder.layers[0].attn
        if not attn.uses_decay:
            raise ValueError(f"features='moments' needs a Gated-SFA branch; attention={encoder.config['attention']!r} "
                             "has none")
        degree = F.degree_index(attn.k, attn.L)
        return [f"moments_{moments}_layer{layer}_head{h}_deg{degree[m]}_{m}_ch{j}"
                for layer in self._layer_indices(len(encoder.encoder.layers), layers)
                for h in range(attn.n_heads) for m in range(attn.dim) for j in range(attn.k)]

    def transform(self, X) -> np.ndarray:
        """(n, n_features_out_) float32 features. An invalid SMILES follows the estimator's
        ``on_invalid``: "raise" names its row; "nan" and "skip" give it a row of NaN (a
        transformer keeps every row), as its ``predict`` does."""
        return self._transform(X)

    def _transform(self, X) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        self._check_batch_size()  # (read here, as set_params may have left it since the fit; not the others)
        X = check_smiles_input(X)
        source = encoder_source(self.estimator_)
        on_invalid = getattr(self.estimator_, "on_invalid", "raise")
        # one output, written batch by batch (the moments are ~117 KB a molecule at the defaults),
        # the rows in chunks as the estimators' predict (their molecule features' memory)
        out = np.empty((len(X), self.n_features_out_), dtype=np.float32)
        unknown = []  # rows with tokens the vocabulary lacks, named once, as the estimator's predict does
        with torch_threads(getattr(self.estimator_, "n_jobs", None)):  # as the estimator's own predict
            in_chunks(X, lambda rows, start, stop: unknown.append(
                          start + self._transform_into(source, rows, out[start:stop], on_invalid)),
                      (lambda rows: source.encode(rows, "nan")) if on_invalid == "raise" else None)
        if (rows := np.concatenate(unknown)).size:
            self.estimator_._warn_unknown_at_predict(X, rows)
        return out

    def _transform_into(self, source: EncoderSource, X: list, out: np.ndarray, on_invalid: str) -> np.ndarray:
        """Writes ``X``'s features into ``out``; returns the rows with an [UNK] token."""
        encoded = source.encode(X, on_invalid)
        order = np.argsort(encoded.lengths, kind="stable")  # batches of similar length: less padding
        fused = self._as_fitted("features") == "head" and any(m is not e for m, e in zip(source.modules, source.encoders))
        ds = EncodedSmilesDataset(encoded, order=order, device=source.device,
                                  descriptors=source.molecule_features(X) if fused else None)
        width = self.n_features_out_ // len(self.members_)
        for k, member in enumerate(self.members_):
            self._member_features(source, member, ds, out[:, k * width:(k + 1) * width], order)
        out[~np.asarray(encoded.valid)] = np.nan
        return self.estimator_._unknown_rows(encoded)

    def _member_features(self, source: EncoderSource, member: int, ds, out: np.ndarray, order: np.ndarray) -> None:
        """The member's features of ``ds``'s rows, written to ``out``'s rows ``order`` batch by batch."""
        module, encoder = source.modules[member], source.encoders[member]
        module.eval()
        done = 0
        features, kind = self._as_fitted("features"), self._as_fitted("moments")
        with torch.inference_mode():
            for batch, _ in inference_loader(ds, batch_size=int(self.batch_size)):
                if features == "head":
                    z = module.pool(**batch)
                elif features == "pooled":
                    z = encoder.pool(batch["input_ids"], batch["conj_flags"], batch["attention_mask"])
                else:
                    moments = encoder.multipole_moments(batch["input_ids"], batch["conj_flags"], batch["attention_mask"])
                    layers = self._layer_indices(moments[kind].shape[1], self._as_fitted("layers"))
                    z = moments[kind][:, layers].reshape(len(batch["input_ids"]), -1)
                out[order[done:done + len(z)]] = z.float().cpu().numpy()
                done += len(z)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        check_is_fitted(self, "estimator_")
        if len(self.members_) == 1:
            return np.asarray(self._feature_names, dtype=object)
        return np.asarray([f"member{m}_{name}" for m in self.members_ for name in self._feature_names], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.transformer_tags.preserves_dtype = []
        return tags


def _is_fitted(estimator) -> bool:
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True
