"""Shared machinery of the SMILES estimators: validation, encoding, the skorch net (saving and
loading: `persistence`).

Conventions (scikit-learn): ``__init__`` only stores parameters; everything is validated in
``fit``; fitted state ends in ``_``. Training runs through a skorch ``NeuralNet`` (``net_``) with
skorch callbacks: an ``EpochScoring`` of the validation metric, ``RestoreBest`` (skorch's
``Checkpoint(load_best=True)``) restores the best epoch and, with ``average_epochs`` > 1,
``AverageBestEpochs`` replaces it with the average of the best epochs' weights; ``ProgressBar``
shows progress when ``verbose``.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import shutil
import tempfile
import threading
import time
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils import check_consistent_length, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNet
from skorch.callbacks import Checkpoint, EarlyStopping, EpochScoring, ProgressBar
from skorch.helper import predefined_split

from ..augment import randomized_smiles
from ..descriptors import RDKitDescriptors, cached_descriptors
from ..exceptions import UnknownTokenWarning
from ..fingerprints import MorganFingerprint
from ..forest import MoleculeForest, blend, choose_blend_weight
from ..tokenizer import DEEPCHEM_VOCAB, EncodedBatch, SmilesTokenizer, tokenize_smiles
from ..utils.messages import shown_rows
from ..utils.stacklevel import _caller_stacklevel
from ..utils.validation import check_smiles_input  # the package's one SMILES coercion (also re-exported here)
from ._invalid import skip_invalid_rows
from ..utils.targets import check_target, missing_labels, warn_missing_targets
from .data import BucketedLoader, EncodedSmilesDataset, inference_loader, sequential_loader
from .epoch_average import AverageBestEpochs
from .fusion import DescriptorFusion
from .net import SmilesNet
from .schedule import SCHEDULES, WarmupDecay
from .persistence import SavedModelMixin
from .snapshot import TrainingSnapshot, earlier_fit_wall_seconds, fit_fingerprint

ON_INVALID = ("raise", "nan", "skip")
VALID_SPLITS = ("scaffold", "balanced_scaffold", "random", None)
OPTIMIZERS = ("adamw", "adam")

#: Parameters added after training snapshots were first written, with the default at which a
#: snapshot's fingerprint leaves them out (so snapshots from before they existed still resume).
_ADDED_PARAMETER_DEFAULTS = {"pretrained": None, "precision": "float32", "freeze_encoder_epochs": 0,
                             "layer_lr_decay": 1.0, "normalize_y": True, "average_epochs": 1}

#: scikit-learn parameter constraints of everything but the architecture, shared by both model
#: families (``sklearn.utils._param_validation``; a new parameter is one entry here).
TRAINING_PARAMETER_CONSTRAINTS = {
    "optimizer": [StrOptions(set(OPTIMIZERS))],
    "lr": [Interval(numbers.Real, 0, None, closed="neither")],
    "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
    "warmup": [Interval(numbers.Real, 0, 1, closed="left")],  # a fraction of the training steps
    "lr_schedule": [StrOptions(set(SCHEDULES))],
    "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
    "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
    "patience": [Interval(numbers.Integral, 1, None, closed="left"), None],
    "n_estimators": [Interval(numbers.Integral, 1, None, closed="left")],
    "augment": [Interval(numbers.Integral, 0, None, closed="left")],  # SMILES variants per molecule
    "tta": [Interval(numbers.Integral, 0, None, closed="left")],
    "descriptors": ["boolean"],
    "fingerprint": ["boolean"],
    "forest": ["boolean"],
    "pretrained": [str, os.PathLike, None],  # a pretrain folder, a Hugging Face RoBERTa folder or a NAMED one
    "freeze_encoder_epochs": [Interval(numbers.Integral, 0, None, closed="left")],  # LP-FT with `pretrained`
    "layer_lr_decay": [Interval(numbers.Real, 0, 1, closed="right")],  # layer-wise lr decay with `pretrained`
    "average_epochs": [Interval(numbers.Integral, 1, None, closed="left")],  # the best epochs' weights averaged
    "dropout": [Interval(numbers.Real, 0, 1, closed="left")],
    "valid_split": [StrOptions({s for s in VALID_SPLITS if s is not None}), None],
    "valid_size": [Interval(numbers.Real, 0, 1, closed="neither")],
    # tokens incl. [CLS]/[SEP]; the model's own limit is checked in fit (_max_length)
    "max_length": [Interval(numbers.Integral, 3, None, closed="left"), None],
    "vocab_file": [str, os.PathLike, None],
    "on_invalid": [StrOptions(set(ON_INVALID))],
    "bucket_by_length": ["boolean"],
    "random_state": ["random_state"],
    # scikit-learn's meaning: -1 all CPUs, -2 all but one (joblib.effective_n_jobs); 0 is refused
    "n_jobs": [Interval(numbers.Integral, 1, None, closed="left"), Interval(numbers.Integral, None, -1, closed="right"),
               None],
    "device": [str, torch.device],
    "cuda_graphs": ["boolean"],
    "precision": [StrOptions({"float32", "bf16"})],
    "verbose": ["verbose"],
    "callbacks": [list, tuple, None],
    "memory": [None, str, os.PathLike, HasMethods(["cache"])],  # sklearn.utils.validation.check_memory's
}
#: The fingerprint ``fingerprint=True`` fuses into the head: ECFP4 as chemists use it, as counts.
FUSED_FINGERPRINT = {"radius": 2, "n_bits": 2048}
#: Rows predicted (and embedded) at a time: the molecule features (about 2,200 columns, made
#: through float64 copies) are held for the rows at hand, so in one piece a million-molecule
#: screen held all of its rows' at once. Every row's answer is its own (TTA variants are seeded
#: per molecule): the chunks change it only by float rounding (batches of other rows).
PREDICT_CHUNK = 20_000


def _every_task_in_training(train: np.ndarray, valid: np.ndarray, y) -> tuple[np.ndarray, np.ndarray]:
    """The internal split's validation rows that hold a task's only labels go back to training
    (a sparse task's few labelled molecules can all be rare scaffolds, which the scaffold split
    puts into validation), as the classifiers keep a class the split would leave out of training."""
    if y is None or np.ndim(y) not in (1, 2) or not len(valid):
        return train, valid
    try:  # (a 1-D y is one task: a regression y with NaN too)
        observed = ~np.isnan(np.asarray(y, dtype=np.float64).reshape(len(y), -1))
    except (TypeError, ValueError):  # a classifier's class labels: kept in training by its own rule
        return train, valid
    untrained = ~observed[train].any(0)
    move = observed[valid][:, untrained].any(1)
    if move.any():
        train, valid = np.sort(np.concatenate([train, valid[move]])), valid[~move]
    return train, valid


#: ``vocab_file``'s name for a vocabulary fitted on the training SMILES (its default, None, is
#: DeepChem's 591 tokens); a path object of that name is a file.
FITTED_VOCABULARY = "training"


def fitted_vocabulary(vocab_file) -> bool:
    """Whether ``vocab_file`` asks for a vocabulary fitted on the training SMILES."""
    return isinstance(vocab_file, str) and vocab_file == FITTED_VOCABULARY


def _distinct(X: list, rows) -> set:
    """The different SMILES among ``X``'s ``rows`` (an item that is no string, refused later by
    the tokenizer, counts as one of its own)."""
    return {X[i].strip() if isinstance(X[i], str) else ("item", i) for i in rows}


def in_chunks(X: list, predict, encode=None, chunk: int | None = None) -> None:
    """``predict(rows, start, stop)`` over ``X`` in chunks of :data:`PREDICT_CHUNK` rows. With
    ``encode`` (``on_invalid="raise"``: ``encode(rows)``, an ``EncodedBatch`` that marks the
    invalid rows) the whole input is checked first, chunk by chunk (memory as the predict's), so
    every invalid SMILES is named, by its position in ``X``, before any chunk is predicted. (So
    each SMILES is encoded twice: on a large screen ``on_invalid="nan"`` encodes once.)"""
    from ..tokenizer import invalid_smiles_error

    chunk = PREDICT_CHUNK if chunk is None else chunk
    if encode is not None and len(X) > chunk:
        problems = []
        for start in range(0, len(X), chunk):
            rows = X[start:start + chunk]
            problems += [(start + pos, rows[pos], why) for pos, why in sorted(encode(rows).errors.items())]
        if problems:
            raise invalid_smiles_error(problems, len(X))
    for start in range(0, len(X), chunk):
        stop = min(start + chunk, len(X))
        predict(X[start:stop], start, stop)


def resolve_device(device, check: bool = True):
    """"auto" -> "cuda" where torch sees a GPU, else "cpu"; another value is checked (with
    ``check``) to be a torch device this machine has, so a fit fails at once naming ``device``
    rather than after its data are prepared, in torch's words."""
    if isinstance(device, str) and device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if check:
        try:
            resolved = torch.device(device)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ValueError(f"device={device!r} is not a torch device ({exc})") from None
        if resolved.type == "cuda":
            n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if not n_gpus:
                raise ValueError(f"device={device!r}: this machine has no CUDA device (device='cpu', or 'auto')")
            if resolved.index is not None and resolved.index >= n_gpus:
                raise ValueError(f"device={device!r}: this machine has {n_gpus} CUDA device(s)")
    return device


def adam_options(device: str) -> dict:
    """Adam's fused implementation where this torch has one for ``device`` (CUDA; CPU from torch
    2.4): one pass over all parameters instead of about six ops per parameter tensor. The same
    update rule and defaults as the foreach form (results agree to float rounding)."""
    kind = torch.device(device).type
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    return {"fused": True} if kind == "cuda" or (kind == "cpu" and version >= (2, 4)) else {}


# Fits running at once in one process (threads), counted to say so: torch's random generator is
# one per process, so their seeded draws interleave.
_ACTIVE_FITS = {"lock": threading.Lock(), "count": 0}

@contextlib.contextmanager
def torch_threads(n_jobs: int | None):
    """torch's intra-op threads set to ``n_jobs`` inside the block (None: left as they are; -1 all
    CPUs, -2 all but one, as in scikit-learn), and restored after. The descriptors' worker
    processes and the forest's jobs follow the same count (they read ``torch.get_num_threads()``).
    (With torch's OpenMP backend the count is the calling thread's, but it is also the count a
    thread takes at its first torch call: a thread whose first torch call falls while a fit or
    predict with ``n_jobs`` runs in another keeps that count after it, as its own setting.)"""
    before = torch.get_num_threads()
    if n_jobs is not None and n_jobs < 0:
        from joblib import effective_n_jobs

        n_jobs = effective_n_jobs(n_jobs)
    if n_jobs is not None and n_jobs != before:
        torch.set_num_threads(n_jobs)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


#: The best-epoch checkpoint folders' names in the temporary folder: ``gmnet_ckpt_<pid>_<random>``
#: (a fit removes its own; one killed cannot, and its folder names the process it was).
CHECKPOINT_PREFIX = "gmnet_ckpt_"


def _seed(random_state) -> int:
    """The fit's base seed: an int is the seed itself (seeded fits stay as they were), else one
    draw from ``check_random_state`` (a RandomState, or numpy's global one for None)."""
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(2**31 - 1))


class SmilesNetBase(SavedModelMixin, BaseEstimator):
    """Base of the SMILES estimators. Model families provide ``_build_module`` and
    ``_model_max_length``; the task mixins provide targets, loss, metric and predict."""

    _family: str = ""  # set by the model families, used in messages
    _pretrain_family: str = ""  # "gmnet" or "chemberta": which pretrained checkpoints fit

    def __setstate__(self, state):
        super().__setstate__(state)
        # a model pickled before a parameter existed ran as its default does: get_params, clone
        # and a refit need the attribute
        for name in self._get_param_names():
            if name in _ADDED_PARAMETER_DEFAULTS:
                self.__dict__.setdefault(name, _ADDED_PARAMETER_DEFAULTS[name])
        nets = self.__dict__.get("nets_")
        if nets and "device_" in self.__dict__:
            # skorch maps a net pickled on CUDA to the CPU where there is none (its __setstate__):
            # the data must follow the nets, or a GPU-fitted model cannot predict on a CPU machine
            self.device_ = str(nets[0].device)

    # ---- hooks ------------------------------------------------------------------------------
    def _build_module(self, vocab_size: int, n_outputs: int, pad_id: int) -> torch.nn.Module:
        raise NotImplementedError

    def _model_max_length(self) -> int | None:
        """Longest token sequence (incl. [CLS]/[SEP]) the model can take, None if unbounded."""
        return None

    # ---- validation ----------------------------------------------------------------------
    # scikit-learn checks the parameters (``_validate_params`` in ``fit``) against this table;
    # the model families add their architecture's entries to it.
    _parameter_constraints: dict = {**TRAINING_PARAMETER_CONSTRAINTS}

    def _max_length(self) -> int | None:
        limit = self._model_max_length()
        if self.max_length is None:
            return limit
        if limit is not None and self.max_length > limit:
            raise ValueError(f"max_length={self.max_length} exceeds what the {self._family} model can take ({limit})")
        return int(self.max_length)

    def _vocabulary_max_length(self, max_length: int | None) -> int | None:
        """``max_length_`` once the vocabulary (``tokenizer_``) is known, where the model's limit
        depends on it; the model families override this."""
        return max_length

    def _check_y(self, y, n: int, name: str = "y") -> np.ndarray:
        raise NotImplementedError

    def _balanced_order(self, smiles, seed: int):
        """Chemprop's balanced scaffold split of ``smiles`` (seeded), or None where it cannot make
        one: too few molecules for a validation part of its own, or an item that is no SMILES
        (which encoding names next)."""
        from ..model_selection.scaffold import _balanced_scaffold_split

        try:  # (its rows' problems are this fit's to name: no warning of the split's own)
            return _balanced_scaffold_split(np.asarray(smiles, dtype=object), self.valid_size, seed, warn=False)
        except (ValueError, TypeError):
            return None

    def _can_rank(self, y_valid: np.ndarray) -> bool:
        """Whether a validation set with these targets can rank epochs and blends by the metric."""
        return True

    # ---- encoding ---------------------------------------------------------------------------
    def _encode(self, X, on_invalid: str = "raise"):
        mask = on_invalid in ("nan", "skip")  # predict: NaN rows (fit skips them before encoding)
        return self.tokenizer_.encode_batch(X, max_length=self.max_length_, on_invalid="mask" if mask else "raise")

    def _internal_split(self, smiles: list, seed: int, y: np.ndarray | None = None):
        """Train/valid indices for best-epoch selection when no validation set is passed. The
        scaffold split is DeepChem's; where its validation part cannot rank a classifier (one
        class only: rare scaffolds often share a label, as in BACE and BBBP), the scaffold sets
        are ordered as Chemprop's balanced scaffold split does instead (seeded)."""
        n = len(smiles)
        balanced = self._balanced_order(smiles, seed) if self.valid_split == "balanced_scaffold" else None
        if balanced is not None:  # (None: too few molecules for one; DeepChem's order then)
            train, valid = _placing_every_row(*balanced, n)
        elif self.valid_split in ("scaffold", "balanced_scaffold"):
            from ..model_selection.scaffold import _deepchem_split, _scaffolds

            smiles = np.asarray(smiles, dtype=object)
            # (not strict: an item that is no SMILES is the tokenizer's to name, in the user's words)
            train, valid, _ = _deepchem_split(smiles, _scaffolds(smiles, strict=False), 1 - self.valid_size,
                                              self.valid_size, max_smiles_length=None, drop_invalid=True)
            if y is not None and len(valid) and not self._can_rank(y[valid]):
                balanced = self._balanced_order(smiles, seed)
                if balanced is not None:
                    train, valid = balanced
            train, valid = _placing_every_row(train, valid, n)
        else:
            perm = np.random.RandomState(seed).permutation(n)
            n_valid = max(1, int(round(self.valid_size * n)))
            valid, train = np.sort(perm[:n_valid]), np.sort(perm[n_valid:])
        return _every_task_in_training(np.asarray(train), np.asarray(valid), y)

    # ---- fit --------------------------------------------------------------------------------
    # skorch's way: fit = prepare the data once, then per ensemble member build the module, the
    # callbacks and the net, and train it. Each step is a method a subclass can override.
    def fit(self, X, y, X_valid=None, y_valid=None):
        """Train on SMILES ``X`` and targets ``y``: a regression target's NaN, or a multi-label
        classifier's (2-D 0/1 y), is a missing label, masked out of the loss; a single-task
        classifier's labels must all be present.

        The weights of the ``average_epochs`` epochs (3 by default) with the best validation metric
        (RMSE for regression, mean ROC-AUC for classification) are averaged, or with 1 the best
        epoch's restored; with ``patience`` training stops once it has not improved for that many
        epochs. The validation set is ``(X_valid, y_valid)`` when given, else a
        ``valid_split`` of the training data (scaffold split by default), else none (the last
        epoch is kept). With ``n_estimators > 1`` that many members are trained (seeds
        ``random_state + i``) and their predictions averaged. With ``on_invalid="skip"`` rows of
        ``X`` and ``X_valid`` whose SMILES cannot be used are left out with their targets (an
        ``InvalidSmilesWarning`` names them; ``n_invalid_skipped_``, ``invalid_rows_`` and
        ``invalid_valid_rows_`` keep the count and positions); otherwise they raise.

        A fit that raises while it checks and prepares the data leaves the estimator as it was: an
        earlier fit stays usable (a refit with a mistyped ``y_valid`` does not cost the model
        already trained). One that fails later, in training, leaves it unfitted: the earlier
        networks are let go before training starts, so a refit never holds two models' memory.

        The fit draws from torch's global random generator (seeded from ``random_state``; on CUDA
        also the GPUs') and gives the caller's generator state back afterwards. That generator is
        one per process, so fits running at once in threads (joblib's threading backend, a dask
        worker's threads) do not repeat, and the state each gives back may be another's: a
        warning says so; run them in processes (joblib's default).
        """
        self._validate_params()
        # Everything a fit sets replaces an attribute (none is changed in place), so a shallow copy
        # is the whole earlier state: a failure half-way must not leave the old networks beside the
        # new data's vocabulary and target scaling, nor lose a fitted model to a bad argument.
        before = dict(self.__dict__)
        with _ACTIVE_FITS["lock"]:
            _ACTIVE_FITS["count"] += 1
            concurrent = _ACTIVE_FITS["count"] > 1
        try:
            if concurrent:
                warnings.warn("another fit is running in this process (threads): torch's random generator is one per "
                              "process, so seeded fits running at once do not repeat, and the generator state each "
                              "gives back may be the other's; run them in processes (joblib's default backend)",
                              UserWarning, stacklevel=_caller_stacklevel())
            with torch.random.fork_rng(devices=self._cuda_devices()):  # the caller's stream, given back
                return self._fit(X, y, X_valid, y_valid, before)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise
        finally:
            with _ACTIVE_FITS["lock"]:
                _ACTIVE_FITS["count"] -= 1

    def _cuda_devices(self) -> list:
        """The CUDA devices whose generators a fit on ``device`` seeds (every one, as
        ``torch.manual_seed`` does, for a fit on CUDA; [] on CPU, or where the name is not a
        device: the fit names that error itself)."""
        try:  # (resolve_device refuses a name that is no device, and CUDA where there is none)
            device = torch.device(resolve_device(self.device))
        except ValueError:
            return []
        return list(range(torch.cuda.device_count())) if device.type == "cuda" else []

    def _fit(self, X, y, X_valid, y_valid, before: dict):
        """``fit``'s work, on validated parameters; ``fit`` restores ``before`` if it raises, from
        which the earlier networks are dropped once the data are ready."""
        self._fit_started = time.time()  # a TrainingSnapshot records it with each part of the fit
        for name in ("net_", "nets_", "forest_"):  # not fitted (__sklearn_is_fitted__) until the fit has finished
            self.__dict__.pop(name, None)
        # what only some fits set: an earlier fit's must not stay beside this one's (in its pickle too)
        for name in ("descriptor_scaler_", "_label_encoder"):
            self.__dict__.pop(name, None)
        if self.freeze_encoder_epochs and self.pretrained is None:
            raise ValueError(f"freeze_encoder_epochs={self.freeze_encoder_epochs} keeps the encoder fixed, which "
                             "needs pretrained weights: pass pretrained=... or freeze_encoder_epochs=0")
        if self.layer_lr_decay != 1.0 and self.pretrained is None:
            raise ValueError(f"layer_lr_decay={self.layer_lr_decay} slows the lower layers of a pretrained encoder, "
                             "which needs pretrained weights: pass pretrained=... or layer_lr_decay=1.0")
        self.device_ = resolve_device(self.device)
        _check_callbacks(self.callbacks)
        if len([cb for cb in (self.callbacks or []) if _snapshot_in(cb) is not None]) > 1:
            raise ValueError("pass at most one TrainingSnapshot in callbacks")
        self._check_model_parameters()
        seed = _seed(self.random_state)
        # what save() writes: the parameters this fit ran with (a set_params after fit must not
        # make the saved model rebuild another shape), and tta's seed (one draw, so repeated
        # predicts agree when random_state is a RandomState)
        self._params_at_fit = self.get_params(deep=False)
        self._tta_seed = seed if self.random_state is not None else 0
        self._selection_metric = None
        with torch_threads(self.n_jobs):
            train_set, valid_set, fingerprint_data = self._prepare_data(X, y, X_valid, y_valid, seed)
            for name in ("net_", "nets_", "forest_"):  # (GPU memory, optimizer state, CUDA graphs)
                before.pop(name, None)
            self.nets_, infos = [], []
            with _watching_sigint() as sigint:
                for member in range(self.n_estimators):
                    net, info = self._fit_member(member, seed + member, train_set, valid_set, fingerprint_data, sigint)
                    self.nets_.append(net)
                    infos.append(info)
            self.net_ = self.nets_[0]  # (the forest's blend weight reads the networks' predictions)
            self._fit_forest(train_set, valid_set, seed)
        self.n_train_ = int(train_set.n_molecules)
        self.n_valid_ = 0 if valid_set is None else len(valid_set)
        # How this fit came about: None without a TrainingSnapshot, else the snapshot file(s), the
        # epoch each part started from (more than one: resumed), the epoch seconds of the earlier
        # parts and their whole wall time (data preparation included; None if a part predates it).
        self.resume_info_ = None if infos[0] is None else _merge_resume_info(infos)
        if self.resume_info_ is not None:
            self.resume_info_["fit_wall_seconds_before"] = earlier_fit_wall_seconds(
                self.resume_info_["parts"], self._fit_started)
        return self

    def _prepare_data(self, X, y, X_valid, y_valid, seed: int):
        """Check and encode the data once (tokens, RDKit flags, descriptors, SMILES variants);
        fit the vocabulary, target statistics and descriptor scaling on the training part."""
        X = check_smiles_input(X)
        if y is None:  # scikit-learn's wording (check_requires_y_none)
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = check_target(y)  # (a number: named, not scikit-learn's "got float")
        check_consistent_length(X, y)
        y = self._check_y(y, len(X))
        warn_missing_targets(y)  # a 1-D y with NaN: masked, but said once (rows as the user numbers them)
        if (X_valid is None) != (y_valid is None):
            raise ValueError("pass both X_valid and y_valid, or neither")
        if X_valid is not None:  # a list once: a generator is read here, not hashed by its address below
            X_valid = check_smiles_input(X_valid, "X_valid")
        self.max_length_ = self._max_length()
        fingerprint_data = [np.asarray(X, dtype=object), y, None if X_valid is None else np.asarray(X_valid, dtype=object),
                            None if y_valid is None else np.asarray(y_valid)]
        # on_invalid="skip": rows RDKit (or the tokenizer) rejects leave before anything else, so
        # splits, vocabulary, descriptors and variants all see the same rows.
        if self.on_invalid == "skip":
            # rows past the model's length limit leave too, and the limit can depend on the
            # vocabulary ([PAD]'s id: ChemBERTa), whose special tokens do not depend on the rows
            self.tokenizer_ = self._make_tokenizer([])
            self.max_length_ = self._vocabulary_max_length(self.max_length_)
        X, y, self.invalid_rows_ = self._skip_invalid(X, y, "X")

        # Every SMILES is checked and encoded once, before any split, so errors name positions in
        # the user's X and nothing is dropped silently.
        train_idx = np.arange(len(X))
        valid_X = None
        self.invalid_valid_rows_ = np.empty(0, dtype=np.int64)
        if X_valid is not None:
            valid_X = X_valid  # (a list already: above)
            y_valid = check_target(y_valid, "y_valid")  # (a number: named, not scikit-learn's "got float")
            if len(y_valid) != len(valid_X):
                raise ValueError(f"X_valid has {len(valid_X)} SMILES and y_valid {len(y_valid)} labels: they must match")
            y_valid = self._check_y(y_valid, len(valid_X), "y_valid")
            n_columns = (1 if y.ndim == 1 else y.shape[1], 1 if y_valid.ndim == 1 else y_valid.shape[1])
            if n_columns[0] != n_columns[1]:
                raise ValueError(f"y_valid has {n_columns[1]} target column(s) and y {n_columns[0]}: they must match")
            no_labels = ("y_valid has no observed labels{}: nothing to select the best epoch by (pass labelled "
                         "validation rows, or neither X_valid nor y_valid)")
            if missing_labels(np.asarray(y_valid, dtype=object).ravel()).all():
                raise ValueError(no_labels.format(""))
            warn_missing_targets(y_valid, name="y_valid")
            valid_X, y_valid, self.invalid_valid_rows_ = self._skip_invalid(valid_X, y_valid, "X_valid")
            if missing_labels(np.asarray(y_valid, dtype=object).ravel()).all():  # its labelled rows were skipped
                raise ValueError(no_labels.format(" on the rows kept"))
        elif self.valid_split is not None:
            train_idx, valid_idx = self._internal_split(X, seed, y)
            if len(valid_idx) == 0 or len(train_idx) == 0:
                why = ""
                if self.valid_split in ("scaffold", "balanced_scaffold"):
                    from ..model_selection.scaffold import _scaffolds, _sorted_scaffold_sets

                    n_groups = len(_sorted_scaffold_sets(_scaffolds(np.asarray(X, dtype=object), strict=False)))
                    why = (f" ({len(X)} molecules in {n_groups} scaffold group(s): no group fits a validation part "
                           f"of valid_size={self.valid_size}, or its rows held the only training labels of a class or "
                           "task and stayed in training; valid_split='random' splits molecules, not groups)")
                warnings.warn(f"the internal validation split is empty{why}; training without best-epoch selection",
                              UserWarning, stacklevel=_caller_stacklevel())
                train_idx = np.arange(len(X))
            elif missing_labels(np.asarray(y[valid_idx], dtype=object).ravel()).all():
                # (sparse multi-task labels) every epoch would score NaN, or a loss of 0 on no label
                warnings.warn(f"the internal validation split's {len(valid_idx)} rows have no observed label; "
                              "training on all rows without best-epoch selection", UserWarning,
                              stacklevel=_caller_stacklevel())
                train_idx = np.arange(len(X))
            elif self.descriptors and len(_distinct(X, train_idx)) < 2 <= len(_distinct(X, range(len(X)))):
                # (copies of one molecule: the descriptor scaling, fitted on them, failed saying
                # the user's molecules do not vary)
                warnings.warn(f"the internal validation split leaves {len(train_idx)} training row(s) of one molecule; "
                              "training on all rows without best-epoch selection (more molecules, or "
                              "valid_split=None)", UserWarning, stacklevel=_caller_stacklevel())
                train_idx = np.arange(len(X))
            else:
                valid_X, y_valid = [X[i] for i in valid_idx], y[valid_idx]
        train_X = [X[i] for i in train_idx]
        variants = randomized_smiles(train_X, int(self.augment), seed) if self.augment else []
        flat_variants = [v for vs in variants for v in vs]
        # The vocabulary comes from a pretrained checkpoint, else (when fitted) from all of X and
        # the variants: tokens seen only in the internal validation rows get (untrained) ids of
        # their own rather than [UNK]. (on_invalid="skip" made it above already; only a fitted
        # vocabulary depends on the rows, and a checkpoint is not read twice)
        if self.on_invalid != "skip" or (self.pretrained is None and fitted_vocabulary(self.vocab_file)):
            self.tokenizer_ = self._make_tokenizer(list(X) + flat_variants)
        self.max_length_ = self._vocabulary_max_length(self.max_length_)
        if variants:
            variants = self._encodable_variants(train_X, variants)
            flat_variants = [v for vs in variants for v in vs]
        encoded = self._encode(X).subset(train_idx)
        y_train = self._fit_y(y[train_idx])  # target statistics / classes come from the training part only
        descriptors = self._molecule_features(train_X, fit=True)
        groups = None
        if variants:
            encoded = EncodedBatch.concat([encoded, self._encode(flat_variants)])
            groups = np.concatenate([np.arange(len(train_X)), np.repeat(np.arange(len(train_X)), self.augment)])
            y_train = np.concatenate([y_train, np.repeat(y_train, self.augment, axis=0)])
            if descriptors is not None:
                descriptors = np.concatenate([descriptors, np.repeat(descriptors, self.augment, axis=0)])
        self._warn_unknown_tokens(encoded, train_X + flat_variants)  # (variants can bring tokens of their own)
        train_set = EncodedSmilesDataset(encoded, y_train, device=self.device_, descriptors=descriptors, groups=groups)
        train_set.n_molecules = len(train_X)
        train_set.smiles = train_X  # the given SMILES, as the forest reads them
        valid_set = None
        if valid_X is not None:
            try:
                enc_valid = self._encode(valid_X)
            except (ValueError, TypeError) as exc:
                if X_valid is None:  # rows of X: encoded (and reported) with X above
                    raise
                kind = TypeError if isinstance(exc, TypeError) else ValueError
                raise kind(f"X_valid: {exc}") from None  # its rows, not X's
            order = np.argsort(enc_valid.lengths, kind="stable")  # less padding, same rows
            valid_set = EncodedSmilesDataset(enc_valid, self._transform_y(y_valid), order=order, device=self.device_,
                                             descriptors=self._molecule_features(valid_X))
            valid_set.smiles = list(valid_X)  # the forest's blend weight is chosen on their predictions
        self.n_invalid_skipped_ = len(self.invalid_rows_) + len(self.invalid_valid_rows_)
        return train_set, valid_set, fingerprint_data

    def _warn_unknown_tokens(self, encoded, smiles: list) -> None:
        """Training tokens outside a given vocabulary (a checkpoint's or ``vocab_file``'s) are all
        read as one [UNK]: said once, with the tokens, rather than trained on unseen. (A vocabulary
        fitted on X has every token of X.)"""
        if self.pretrained is None and fitted_vocabulary(self.vocab_file):  # (fitted on X and its variants: none unknown)
            return
        unk = self.tokenizer_.unk_id
        counts = np.array([np.count_nonzero(ids == unk) for ids in encoded.ids])
        rows = np.flatnonzero(counts)
        if not len(rows):
            return
        n_unknown = int(counts.sum())
        n_tokens = int(encoded.lengths.sum()) - 2 * len(encoded)  # without [CLS] and [SEP]
        tokens = self._unknown_tokens(smiles, rows[:50])
        source = (f"pretrained={str(self.pretrained)!r}" if self.pretrained is not None else
                  "DeepChem (vocab_file=None)" if self.vocab_file is None else f"vocab_file={str(self.vocab_file)!r}")
        warnings.warn(f"{n_unknown} of {n_tokens} tokens of the training SMILES (in {len(rows)} of {len(encoded.ids)}, "
                      "SMILES variants included) are not in the "
                      f"vocabulary of {source} and are read as [UNK]: {tokens[:10]}", UnknownTokenWarning,
                      stacklevel=_caller_stacklevel())

    def _encodable_variants(self, smiles: list, variants: list) -> list:
        """``variants`` (a list per SMILES) with each one the tokenizer rejects replaced by its
        SMILES: a randomised SMILES can have more tokens than the given one, past ``max_length``,
        and must neither fail a fit or predict on valid input nor be averaged in as an empty row."""
        flat = [v for vs in variants for v in vs]
        ok = iter(self.tokenizer_.encode_batch(flat, max_length=self.max_length_, on_invalid="mask").valid.tolist())
        return [[v if next(ok) else s for v in vs] for s, vs in zip(smiles, variants)]

    def _skip_invalid(self, X: list, y: np.ndarray, name: str):
        """``(X, y, skipped row positions)``: unchanged unless ``on_invalid="skip"``."""
        if self.on_invalid != "skip":
            return X, y, np.empty(0, dtype=np.int64)
        return skip_invalid_rows(X, y, self.max_length_, name)

    def _snapshot_inputs(self) -> dict[str, str]:
        """Digests of what a fit reads from files named by its parameters (the parameters hold
        only their paths): the vocabulary and the pretrained checkpoint. A snapshot whose files
        changed since is not resumed."""
        inputs = {"vocabulary": self.tokenizer_.vocabulary_digest()}
        if getattr(self, "pretrained_", None) is not None:
            from . import warm_start

            inputs["pretrained"] = warm_start.source_digest(self.pretrained_)
        return inputs

    def _molecule_features(self, smiles, fit: bool = False) -> np.ndarray | None:
        """Molecule-level features fused into the head, one row per SMILES (None without any):
        the scaled RDKit descriptors (their scaling fitted here when ``fit``), then the Morgan
        count fingerprint as log(1 + count). A SMILES RDKit rejects gets NaN descriptors (0
        after scaling) and a zero fingerprint; rejecting it is the tokenizer's job."""
        parts = []
        if self._as_fitted("descriptors"):
            # as many worker processes as torch has threads (the forest does the same)
            raw = cached_descriptors(self.memory, smiles, on_invalid="raise" if fit else "nan",
                                     n_jobs=torch.get_num_threads())
            if fit:
                self.descriptor_scaler_ = RDKitDescriptors()._fit_raw(raw)
            parts.append(self.descriptor_scaler_._transform_raw(raw))
        if self._as_fitted("fingerprint"):
            counts = MorganFingerprint(**FUSED_FINGERPRINT, counts=True)._fingerprints(smiles)[0]
            parts.append(np.log1p(counts, dtype=np.float32))
        return np.concatenate(parts, axis=1) if parts else None

    def _n_molecule_features(self) -> int:
        n = self.descriptor_scaler_.n_features_out_ if self._as_fitted("descriptors") else 0
        return n + (FUSED_FINGERPRINT["n_bits"] if self._as_fitted("fingerprint") else 0)

    def _as_fitted(self, name: str):
        """A parameter as the fit ran with it: what shapes the model's inputs (the molecule
        features) must not follow a set_params made after the fit."""
        return self.__dict__.get("_params_at_fit", {}).get(name, getattr(self, name))

    def _make_tokenizer(self, smiles: list) -> SmilesTokenizer:
        """The checkpoint's vocabulary with ``pretrained`` (its shape checked here), else
        ``vocab_file``'s: DeepChem's (None), a file's, or one fitted on ``smiles`` ("training")."""
        if self.pretrained is None:
            self.pretrained_ = None
            if fitted_vocabulary(self.vocab_file):
                return SmilesTokenizer().fit(smiles, on_invalid="ignore")
            return SmilesTokenizer(DEEPCHEM_VOCAB if self.vocab_file is None else self.vocab_file).fit([])
        from . import warm_start

        self.pretrained_ = warm_start.read_source(self.pretrained, self._pretrain_family)
        warm_start.check_compatible(self, self.pretrained_, self._pretrain_family)
        tokenizer = warm_start.tokenizer_for(self, self.pretrained_)
        warm_start.check_encoder_fits(self, self.pretrained_, self._pretrain_family)  # before anything is built
        return tokenizer

    def _check_model_parameters(self) -> None:
        """What only the model's constructor checks (``d_model`` divisible by ``n_heads``, the
        activation, ...), on a small probe model before the data are prepared: the error comes
        at once, and a refit that raises it keeps the earlier fit. On the meta device: no memory,
        whatever the shape asks (a checkpoint's, through ``from_pretrained``)."""
        with torch.device("meta"):
            self._build_module(8, 1, 0)  # (vocabulary size and outputs do not matter here)

    def _initialize_module(self, seed: int) -> torch.nn.Module:
        """The model with its initial weights, drawn from ``seed``; with ``pretrained`` the
        encoder's weights are then the checkpoint's (the head stays fresh)."""
        # torch.manual_seed also seeds (or, CUDA not yet started, queues seeding) every GPU: a fit
        # on CPU seeds the CPU generator alone, so the caller's GPU streams stay theirs
        if str(getattr(self, "device_", "cpu")).startswith("cuda"):
            torch.manual_seed(seed)
        else:
            torch.default_generator.manual_seed(seed)
        module = self._make_module()
        if getattr(self, "pretrained_", None) is not None:
            from . import warm_start

            warm_start.load_encoder(module, warm_start.encoder_state(self.pretrained_, self._pretrain_family))
        return module

    @classmethod
    def from_pretrained(cls, pretrained, **params):
        """An estimator warm-started from ``pretrained`` (a ``gmnet_sklearn.pretrain`` folder, a Hugging
        Face RoBERTa folder for the ChemBERTa estimators, or a shipped encoder's name: "moses",
        "moses-paper", "moses-mtr", "moses-epoch") with the checkpoint's shape parameters; ``params`` set the
        others (a shape parameter given here must match)."""
        from . import warm_start

        source = warm_start.read_source(pretrained, cls._pretrain_family)
        shape = {k: v for k, v in source["params"].items() if k in warm_start.SHAPE_PARAMS[cls._pretrain_family]}
        return cls(pretrained=pretrained, **{**shape, **params})

    def _make_module(self) -> torch.nn.Module:
        """The model for the fitted vocabulary and outputs; wrapped for descriptor and
        fingerprint fusion."""
        module = self._build_module(self.tokenizer_.vocab_size, self.n_outputs_, self.tokenizer_.pad_id)
        if self._as_fitted("descriptors") or self._as_fitted("fingerprint"):
            module = DescriptorFusion(module, self._n_molecule_features(), self.d_model)
        return module

    def _callbacks(self, valid_set, n_batches: int) -> list:
        """Validation scoring and best-epoch restore, early stopping, the learning-rate
        schedule and the progress bar; the user's callbacks come first."""
        callbacks = [cb for cb in (self.callbacks or []) if _snapshot_in(cb) is None]
        if valid_set is not None:
            callbacks += self._selection_callbacks(valid_set)
        else:
            if self.patience is not None:
                warnings.warn(f"patience={self.patience} stops on the validation metric, and this fit has no "
                              "usable validation data (valid_split=None, or an internal split left unused: see the "
                              "warning above): every epoch runs", UserWarning, stacklevel=_caller_stacklevel())
            # (valid_split=None chose no validation, and then the last epoch, as documented: no
            # warning, or every such fit at the default average_epochs would have one)
            if self.average_epochs > 1 and self.valid_split is not None:
                warnings.warn(f"average_epochs={self.average_epochs} averages the epochs with the best validation "
                              "metric, and this fit has no usable validation data (its internal split was left "
                              "unused: see the warning above): the last epoch's weights are kept", UserWarning,
                              stacklevel=_caller_stacklevel())
        if self.freeze_encoder_epochs:
            from .warm_start import encoder_freeze_callbacks

            callbacks += encoder_freeze_callbacks(self.freeze_encoder_epochs)
        if self.warmup > 0 or self.lr_schedule != "constant":
            callbacks.append(WarmupDecay(self.lr, n_batches * self.max_epochs, self.warmup, self.lr_schedule))
        if self.verbose:
            callbacks.append(ProgressBar())
        return callbacks

    def _build_net(self, module, callbacks, valid_set, loader) -> NeuralNet:
        optimizer = torch.optim.AdamW if self.optimizer == "adamw" else torch.optim.Adam
        options = {**adam_options(self.device_), "weight_decay": self.weight_decay}
        return SmilesNet(
            module=module,
            criterion=self._criterion(),
            optimizer=optimizer,
            lr=self.lr,
            **{f"optimizer__{key}": value for key, value in options.items()},
            batch_size=int(self.batch_size),  # (torch's loaders refuse np.int64)
            max_epochs=self.max_epochs,
            train_split=predefined_split(valid_set) if valid_set is not None else None,
            iterator_train=loader,
            iterator_valid=sequential_loader,
            callbacks=callbacks,
            device=self.device_,
            verbose=int(self.verbose),
            cuda_graphs=self.cuda_graphs,
            precision=self.precision,
            pad_id=self.tokenizer_.pad_id,
            layer_lr_decay=self.layer_lr_decay,
        )

    def _fit_member(self, member: int, seed: int, train_set, valid_set, fingerprint_data, sigint=()):
        """Train one ensemble member; returns its net and its snapshot's resume info (or None).
        ``sigint``: not empty once a Ctrl-C arrived during the fit (``_watching_sigint``)."""
        snapshots = [snap for cb in (self.callbacks or []) if (snap := _snapshot_in(cb)) is not None]  # (one: _fit)
        self._checkpoint_dir = None
        # the checkpoint folder _callbacks makes is removed whatever fails after it (a pretrained
        # shape conflict in _initialize_module, a snapshot that does not bind), not only the training
        try:
            loader = BucketedLoader(seed=seed, bucket=self.bucket_by_length)
            n_batches = -(-int(train_set.n_molecules) // self.batch_size)  # one row per molecule an epoch
            callbacks = self._callbacks(valid_set, n_batches)
            snapshot = snapshots[0] if snapshots else None
            if snapshot is not None and self.random_state is None and not member:
                warnings.warn("TrainingSnapshot: random_state=None draws another seed for every fit, so no later fit "
                              "can resume this one: pass an int random_state", UserWarning, stacklevel=_caller_stacklevel())
            if snapshot is not None:  # last, so it sees this epoch's scores and best weights
                # how a fit runs (device, graphs, threads) is not what it computes; parameters at their old
                # defaults stay out so snapshots from before they existed still fit
                # a RandomState's repr holds its address; the seed drawn from it is hashed as the seed
                params = {k: "<RandomState>" if isinstance(v, np.random.RandomState) else v
                          for k, v in self.get_params(deep=False).items()
                          if k not in ("callbacks", "verbose", "device", "cuda_graphs", "n_jobs", "memory")
                          and not (k in _ADDED_PARAMETER_DEFAULTS and v == _ADDED_PARAMETER_DEFAULTS[k])}
                snapshot.bind(fingerprint=fit_fingerprint({"estimator": type(self).__name__, **params,
                                                           **({"member": member} if member else {})},
                                                          seed - member, fingerprint_data),
                              summary={"estimator": type(self).__name__, "seed": seed, "member": member,
                                       "n_train": int(train_set.n_molecules),
                                       **{k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))}},
                              max_epochs=self.max_epochs, loader=loader, checkpoint_dir=self._checkpoint_dir,
                              fit_started=getattr(self, "_fit_started", None), inputs=self._snapshot_inputs())
                callbacks.append(snapshot)
            net = self._build_net(self._initialize_module(seed), callbacks, valid_set, loader)
            net.initialize()
            # A snapshot of this fit puts the net back where it left off (in its on_train_begin);
            # only the epochs left are trained.
            epochs_done = snapshot.prepare() if snapshot is not None else 0
            finished = snapshot is not None and snapshot.finished_  # it stopped early: nothing left to train
            net.partial_fit(train_set, y=None, epochs=0 if finished else self.max_epochs - epochs_done)
            if _interrupted(net, self.max_epochs):
                if sigint and member < self.n_estimators - 1:
                    # one Ctrl-C stops the fit, not only this member (an ensemble of fewer members than
                    # n_estimators is not the model asked for): it fails as any error in training does.
                    # A callback that stops training (skorch's way: a KeyboardInterrupt) stops this member only.
                    raise KeyboardInterrupt(f"training of ensemble member {member} of {self.n_estimators} interrupted: "
                                            "the fit stops (a TrainingSnapshot in callbacks lets a later fit resume it)")
                _warn_interrupted(net, self.max_epochs, member)
            _check_finite_weights(net, self.lr, member)
            # predefined_split holds the validation set (tokens, fused features), and the optimizer
            # Adam's moments (twice the weights): a fitted model (its memory, its pickle) needs neither
            net.train_split = None
            net.optimizer_.state.clear()
        finally:
            if self._checkpoint_dir is not None:
                shutil.rmtree(self._checkpoint_dir, ignore_errors=True)
            del self._checkpoint_dir
        if snapshot is None:
            return net, None
        return net, {"snapshot": str(snapshot.path_), "parts": list(snapshot.parts_),
                     "resumed_from_epoch": epochs_done or None, "fit_seconds_before": snapshot.elapsed_before_}

    def _fit_forest(self, train_set, valid_set, seed: int):
        """With ``forest``: a random forest on the training molecules' features (the ones the head
        gets) and its weight in the blend with the network, chosen on the validation split
        (``gmnet_sklearn.forest``; 0.5 without one). Sets ``forest_`` and ``forest_weight_``."""
        from ..forest import FALLBACK_WEIGHT

        self.forest_, self.forest_weight_ = None, 0.0
        if not self.forest:
            return
        n = int(train_set.n_molecules)  # the given SMILES come first, their randomised variants after
        forest = MoleculeForest(self._forest_kind, multi_label=getattr(self, "n_tasks_", 1) > 1, random_state=seed,
                                n_jobs=torch.get_num_threads())
        head = None if train_set.descriptors is None else train_set.descriptors[:n].cpu().numpy()
        forest.fit(self._forest_features(train_set.smiles, head), train_set.y[:n].cpu().numpy())
        weight = FALLBACK_WEIGHT if valid_set is None else self._choose_forest_weight(forest, valid_set)
        self.forest_, self.forest_weight_ = forest, weight

    def _choose_forest_weight(self, forest, valid_set) -> float:
        """The forest's weight in the blend with the networks as they are now, chosen on
        ``valid_set`` (``forest_`` is not consulted: the networks' outputs are their own)."""
        head = None if valid_set.descriptors is None else valid_set.descriptors.cpu().numpy()
        fitted, self.forest_ = getattr(self, "forest_", None), None  # the network alone
        try:  # (its features were computed with the validation set)
            network = self._member_outputs(valid_set.smiles, features=head, warn_unknown=False)[0].mean(0)
        finally:
            self.forest_ = fitted
        y_valid = valid_set.y.cpu().numpy()
        return choose_blend_weight(network, forest.predict(self._forest_features(valid_set.smiles, head)),
                                   lambda pred: self._blend_score(pred, y_valid))

    @staticmethod
    def _forest_features(smiles, head_features: np.ndarray | None) -> np.ndarray:
        """What the forest reads: the molecule features the head gets, else (neither descriptors nor
        fingerprint fused) the same Morgan count fingerprint, log(1 + count)."""
        if head_features is not None:
            return head_features
        counts = MorganFingerprint(**FUSED_FINGERPRINT, counts=True)._fingerprints(smiles)[0]
        return np.log1p(counts, dtype=np.float32)

    def _selection_callbacks(self, valid_set):
        name, lower, scorer = self._validation_metric(valid_set.y.cpu().numpy())
        self._selection_metric = name  # best_epoch_ reads its "_best" flags, not a user scorer's
        self._checkpoint_dir = tempfile.mkdtemp(prefix=f"{CHECKPOINT_PREFIX}{os.getpid()}_")
        scoring = [] if scorer is None else [EpochScoring(scorer, name=name, lower_is_better=lower, on_train=False, use_caching=True)]
        stopping = [] if self.patience is None else [
            EarlyStopping(monitor=name, patience=self.patience, threshold=0.0, threshold_mode="abs",
                          lower_is_better=lower, sink=print if self.verbose else _quiet)]
        # the average, when asked for, replaces the best epoch's weights RestoreBest loads first
        averaging = [] if self.average_epochs == 1 else [
            AverageBestEpochs(monitor=name, k=self.average_epochs, lower_is_better=lower, dirname=self._checkpoint_dir)]
        return scoring + [
            RestoreBest(monitor=f"{name}_best", f_params="best.pt", f_optimizer=None, f_criterion=None,
                        f_history=None, dirname=self._checkpoint_dir, load_best=True),
        ] + averaging + stopping

    # ---- predict ----------------------------------------------------------------------------
    #: The parameters predict reads (the others shape the fitted model, which does not follow a
    #: set_params made since the fit).
    _PREDICT_PARAMS = ("tta", "on_invalid", "n_jobs", "batch_size", "memory")

    def _validate_predict_params(self) -> None:
        """The parameters predict reads, checked as fit checks them: a value set_params gave since
        the fit fails here, named (tta=-1 failed inside the augmenter, n_jobs=0 inside torch,
        on_invalid="bogus" ran as "raise": a review). A subset: a predict call is often one molecule."""
        from sklearn.utils._param_validation import validate_parameter_constraints

        validate_parameter_constraints({k: self._parameter_constraints[k] for k in self._PREDICT_PARAMS},
                                       {k: getattr(self, k) for k in self._PREDICT_PARAMS},
                                       caller_name=type(self).__name__)

    def _member_outputs(self, X, features: np.ndarray | None = None,
                        warn_unknown: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Module outputs of every member, (n_members, n, n_outputs) in input order, each
        averaged over ``tta`` SMILES variants besides the given SMILES (in the space
        ``_average_space`` gives: probabilities for classifiers) and blended with the forest's
        predictions when there is one (``forest_weight_`` > 0); NaN rows for invalid SMILES.
        ``features``: the molecule features of ``X`` when the caller has them already. Rows
        whose SMILES hold tokens outside the vocabulary are named in one warning."""
        check_is_fitted(self, "net_")
        self._validate_predict_params()
        X = check_smiles_input(X)
        unknown = [] if warn_unknown else None
        with torch_threads(self.n_jobs):
            if len(X) <= PREDICT_CHUNK:
                total, valid = self._member_outputs_of(X, features, unknown)
            else:
                total, valid = None, np.empty(len(X), dtype=bool)

                def predict(rows, start, stop):
                    nonlocal total
                    part, valid[start:stop] = self._member_outputs_of(
                        rows, None if features is None else features[start:stop], unknown, start)
                    if total is None:
                        total = np.empty((part.shape[0], len(X), *part.shape[2:]), dtype=part.dtype)
                    total[:, start:stop] = part

                in_chunks(X, predict, (lambda rows: self._encode(rows, "nan")) if self.on_invalid == "raise" else None)
        if unknown and (rows := np.concatenate(unknown)).size:
            self._warn_unknown_at_predict(X, rows)
        return total, valid

    def _warn_unknown_at_predict(self, X: list, rows: np.ndarray) -> None:
        """The network reads a token its vocabulary lacks as [UNK] (with a vocabulary fitted on the
        training SMILES, an embedding no step trained): the rows and tokens are named, since a
        new chemical space (a metal, a charged atom the training set lacked) shows up this way."""
        tokens = self._unknown_tokens(X, rows[:50])
        warnings.warn(f"{len(rows)} of {len(X)} SMILES hold tokens the model's vocabulary lacks, read as [UNK]: rows "
                      f"{shown_rows(rows)}; tokens {tokens[:10]}", UnknownTokenWarning, stacklevel=_caller_stacklevel())

    def _unknown_tokens(self, smiles: list, rows) -> list:
        """The tokens outside the vocabulary in ``smiles``' ``rows``, in the order first met."""
        vocabulary = self.tokenizer_.vocabulary_
        return list(dict.fromkeys(t for i in rows for t in tokenize_smiles(smiles[i].strip()) if t not in vocabulary))

    def _unknown_rows(self, encoded) -> np.ndarray:
        """Positions of the valid rows of ``encoded`` with an [UNK] token."""
        unk = self.tokenizer_.unk_id
        has_unknown = np.fromiter((bool((ids == unk).any()) for ids in encoded.ids), dtype=bool, count=len(encoded))
        return np.flatnonzero(has_unknown & np.asarray(encoded.valid, dtype=bool))

    def _member_outputs_of(self, X: list, features: np.ndarray | None, unknown: list | None = None,
                           offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``_member_outputs``' work on checked SMILES, run under the estimator's ``n_jobs``;
        appends to ``unknown`` the positions (+ ``offset``) of valid rows with an [UNK] token."""
        encoded = self._encode(X, self.on_invalid)  # "raise": names X's invalid rows
        if unknown is not None:
            unknown.append(offset + self._unknown_rows(encoded))
        views = [encoded]
        if self.tta:
            # each SMILES variant is encoded once (tokens and RDKit's parse are most of a view's
            # cost): a view takes a molecule's variant, or its given SMILES where the tokenizer
            # rejects the variant (longer than max_length; as _encodable_variants does in fit) or
            # the variant holds a token the vocabulary lacks and the given SMILES does not (with a
            # fitted vocabulary, [C@@H] where training had [C@H]: an untrained [UNK] averaged in,
            # unnamed). Per molecule: a molecule's answer is its own; int(): RDKit refuses np.int64
            variants = randomized_smiles(X, int(self.tta), self._tta_seed, per_molecule=True)
            flat = self._encode([v for vs in variants for v in vs], "nan")
            encodable = np.asarray(flat.valid, dtype=bool)
            usable = encodable.copy()
            usable[self._unknown_rows(flat)] = False
            given_unknown = np.zeros(len(X), dtype=bool)
            given_unknown[self._unknown_rows(encoded)] = True
            both = EncodedBatch.concat([encoded, flat])
            n = len(X)
            for j in range(self.tta):
                at = n + np.arange(n) * self.tta + j
                take = usable[at - n] | (given_unknown & encodable[at - n])
                views.append(both.subset(np.where(take, at, np.arange(n))))
        if features is None:
            features = self._molecule_features(X)  # the given SMILES' own: also the forest's input
        total, valid = None, None
        for enc in views:
            # a variant is the same molecule: its features are the given SMILES' (as in training,
            # where the variants share their molecule's rows), not computed again per view
            ds = EncodedSmilesDataset(enc, order=np.argsort(enc.lengths, kind="stable"), device=self.device_,
                                      descriptors=features)
            outs = np.stack([self._average_space(self._module_outputs(net, ds)) for net in self.nets_])
            out = np.empty_like(outs)
            out[:, ds.order.numpy()] = outs
            total = out if total is None else total + out
            valid = enc.valid if valid is None else valid
        total /= len(views)
        if getattr(self, "forest_", None) is not None and self.forest_weight_ > 0:
            total = blend(total, self.forest_.predict(self._forest_features(X, features), n_jobs=torch.get_num_threads())[None],
                          self.forest_weight_)
        total[:, ~valid] = np.nan
        return total, valid

    def _module_outputs(self, net, ds) -> np.ndarray:
        net.module_.eval()
        # big batches of length-sorted rows (little padding); on a GPU bigger still: prediction is
        # no longer launch-bound there at 512 rows (benchmarks/results/throughput_cuda_batch512.json)
        batch_size = int(max(self.batch_size, 512 if str(self.device_).startswith("cuda") else 128))
        with torch.inference_mode():  # net.infer: the module, or its CUDA graphs / autocast when asked
            outs = [net.infer(Xb) for Xb, _ in inference_loader(ds, batch_size=batch_size)]
            return torch.cat(outs).float().cpu().numpy().astype(np.float64)  # one copy back

    def _average_space(self, raw: np.ndarray) -> np.ndarray:
        """Where predictions are averaged over members and SMILES variants (raw outputs)."""
        return raw

    def _raw_predict(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Mean over members of ``_member_outputs``, (n, n_outputs); NaN rows for invalid SMILES."""
        outs, valid = self._member_outputs(X)
        return outs.mean(0), valid

    @property
    def history_(self):
        """The skorch training history (per-epoch losses, validation metric, best flags)."""
        check_is_fitted(self, "net_")
        return self.net_.history

    @property
    def best_epoch_(self) -> int:
        """1-based epoch with the best validation metric (the last epoch without validation): the
        one restored at ``average_epochs=1``, else the best of those averaged."""
        hist = self.history_
        if not len(hist):  # loaded from a folder saved without its history: the epoch is in config.json
            return self.__dict__.get("_saved_best_epoch")
        name = self.__dict__.get("_selection_metric")
        if name is None:  # no validation set: the last epoch
            return len(hist)
        key = f"{name}_best"
        best = [row["epoch"] for row in hist if row.get(key)]
        return best[-1] if best else len(hist)

    def __sklearn_is_fitted__(self) -> bool:
        """Fitted once a fit has finished (``net_``): a fit that fails in training has let the
        earlier networks go (see ``fit``), and the vocabulary or target statistics left must not
        make ``check_is_fitted`` pass (scikit-learn's hook)."""
        return "net_" in self.__dict__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.target_tags.required = True
        tags.target_tags.multi_output = True  # a 2-D y: multi-output regression (the classifiers' mixin: multi-label)
        tags.non_deterministic = self.random_state is None
        return tags


class RestoreBest(Checkpoint):
    """skorch's ``Checkpoint`` restoring the best epoch's weights after training. Where no epoch
    had a finite validation metric (a diverged fit, or validation rows without labels) none was
    saved: the last epoch's weights stay, with a warning, instead of a missing-file error."""

    def on_train_end(self, net, **kwargs):
        flagged = [row["epoch"] for row in net.history if row.get(self.event_name)] if self.event_name else None
        if self.load_best and flagged is not None and (
                not flagged or not os.path.exists(self.get_formatted_files(net)["f_params"])):
            # nothing saved: every epoch's metric was not finite, or training was interrupted before
            # the first epoch's checkpoint (skorch's own lookup then fails on the missing key; the
            # fit names the interruption); or the history flags a best epoch whose file is gone
            if flagged:
                warnings.warn(f"the best epoch's weights (epoch {flagged[-1]}) are not on disk: the last epoch's "
                              "weights are kept", UserWarning, stacklevel=_caller_stacklevel())
            elif all(self.event_name in row for row in net.history):
                warnings.warn(f"the validation metric ({self.monitor[:-len('_best')]}) was not finite in any epoch: "
                              "no best epoch to restore, the last epoch's weights are kept", UserWarning,
                              stacklevel=_caller_stacklevel())
            return
        super().on_train_end(net, **kwargs)


def _quiet(*args, **kwargs):
    """Sink for EarlyStopping's message when the estimator is not verbose."""


def _check_callbacks(callbacks) -> None:
    """skorch's forms of a ``callbacks`` entry: a Callback, a Callback class, or a (name, callback)
    pair. Anything else failed inside skorch once the data were prepared (a review)."""
    from skorch.callbacks import Callback

    for i, item in enumerate(callbacks or []):
        named = isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)
        cb = item[1] if named else item
        if not (isinstance(cb, Callback) or (isinstance(cb, type) and issubclass(cb, Callback))):
            raise ValueError(f"callbacks[{i}] is {item!r}: not a skorch Callback, a Callback class, or a "
                             "(name, Callback) pair")


def _snapshot_in(callback) -> TrainingSnapshot | None:
    """The TrainingSnapshot a ``callbacks`` entry is, as such or named (skorch's ``(name, cb)``)."""
    if isinstance(callback, tuple) and len(callback) == 2:
        callback = callback[1]
    return callback if isinstance(callback, TrainingSnapshot) else None


def _merge_resume_info(infos: list) -> dict:
    """One ``resume_info_`` for a fit of one or more members (snapshots of each member)."""
    if len(infos) == 1:
        return infos[0]
    resumed = [i["resumed_from_epoch"] for i in infos if i["resumed_from_epoch"] is not None]
    return {"snapshot": [i["snapshot"] for i in infos], "parts": [p for i in infos for p in i["parts"]],
            "resumed_from_epoch": resumed[0] if resumed else None,
            "fit_seconds_before": float(sum(i["fit_seconds_before"] for i in infos))}


def _placing_every_row(train, valid, n: int):
    """A row a scaffold split leaves in no part (a scaffold RDKit cannot make, or a parse failing
    where the tokenizer's succeeded) trains rather than vanishes; the placed rows keep their order."""
    train, valid = np.asarray(train, dtype=np.int64), np.asarray(valid, dtype=np.int64)
    unplaced = np.setdiff1d(np.arange(n), np.concatenate([train, valid]))
    return (np.concatenate([train, unplaced]) if len(unplaced) else train), valid


@contextlib.contextmanager
def _watching_sigint():
    """A list that is not empty once a SIGINT (Ctrl-C) arrived during the block, the signal then
    handled as before; skorch turns it and a callback's stop alike into a quiet end of training.
    Watched only where a Python handler takes SIGINT (Python's own, which raises
    KeyboardInterrupt, or the caller's) in the main thread: where it is ignored (a shell's
    background job), ends the process (SIG_DFL) or is a C host's (not restorable from Python),
    nothing is installed and the list stays empty."""
    import signal

    seen: list = []
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if not callable(previous):
        yield seen
        return

    def handler(signum, frame):
        seen.append(signum)
        previous(signum, frame)

    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):  # (an embedding interpreter's thread that is no main thread)
        yield seen
        return
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(net, max_epochs: int) -> bool:
    """skorch ends training quietly on a KeyboardInterrupt (Ctrl-C, or a callback stopping it) and
    restores the best weights: the model looks finished. Early stopping raises one too, so
    training ended short of ``max_epochs`` is interrupted only when no EarlyStopping ran out of patience."""
    from skorch.callbacks import EarlyStopping

    stopped_early = any(isinstance(cb, EarlyStopping) and getattr(cb, "misses_", 0) >= cb.patience
                        for _, cb in net.callbacks_)
    return len(net.history) < max_epochs and not stopped_early


def _warn_interrupted(net, max_epochs: int, member: int) -> None:
    warnings.warn(f"training{f' of ensemble member {member}' if member else ''} stopped after {len(net.history)} of "
                  f"{max_epochs} epochs (interrupted: Ctrl-C, or a callback); the model is the best of those "
                  "epochs (with average_epochs, the average of the best). A TrainingSnapshot in callbacks lets a "
                  "later fit resume it", UserWarning, stacklevel=_caller_stacklevel())


def _check_finite_weights(net, lr: float, member: int) -> None:
    """A fit whose training diverged (weights inf or NaN: a learning rate too high, or targets of
    extreme scale) raises, as scikit-learn's MLP does, instead of returning a model that
    predicts NaN for every row (which ``score`` would then put down to the SMILES)."""
    if all(bool(torch.isfinite(p).all()) for p in net.module_.parameters()):
        return
    losses = [row.get("train_loss") for row in net.history]
    first_bad = next((i + 1 for i, loss in enumerate(losses) if loss is None or not np.isfinite(loss)), None)
    when = f"; the training loss was not finite from epoch {first_bad}" if first_bad else ""
    raise ValueError(f"training{f' of ensemble member {member}' if member else ''} diverged: the network's weights "
                     f"are not finite after {len(net.history)} epoch(s){when}. Lower the learning rate (lr={lr}), "
                     "or check y for values of extreme scale")
