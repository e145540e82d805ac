"""Saving and loading a fitted estimator as a folder read without executing code: safetensors
weights, a JSON config, the vocabulary, the descriptor scaling (safetensors), the forest (skops),
the training histories (skorch's JSON). `SavedModelMixin` gives the estimators ``save`` and
``load``; the helpers below name and check the folder's files."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted
from skorch.history import History

from .. import __version__
from ..descriptors import RDKitDescriptors
from ..forest import MoleculeForest
from ..tokenizer import DEEPCHEM_VOCAB, SmilesTokenizer
from .data import sequential_loader
from .net import SmilesNet

__all__ = ["SavedModelMixin"]


class SavedModelMixin:
    """``save`` / ``load`` of a fitted SMILES estimator (`estimators._base.SmilesNetBase`), and the
    fitted metadata its ``config.json`` holds (subclasses add theirs: ``_fitted_metadata_keys``,
    ``_fitted_metadata``, ``_restore_fitted_metadata``)."""

    def save(self, path) -> Path:
        """Write a directory loadable without executing code: ``model.safetensors`` (weights;
        ``model_<i>.safetensors`` for ensemble member i > 0), ``descriptors.safetensors`` (the
        descriptor scaling, with ``descriptors=True``), ``forest.skops`` (the forest, with
        ``forest=True``; skops' format, loaded with scikit-learn's tree type as the only type
        trusted beyond skops' defaults), ``config.json`` (estimator parameters and fitted
        metadata), ``history.json`` (the training history, skorch's ``History.to_file`` format;
        ``history_<i>.json`` for member i > 0) and ``vocab.txt``.

        ``path`` is a new folder, one whose files are none of those ``save`` writes (they are kept
        beside the model), or one an earlier ``save`` wrote, whose files are then replaced (those of
        ensemble members or parts this model lacks are removed); a folder of another kind (a
        pretrained encoder's, a Hugging Face model's), or one holding some of these file names
        beside files of its own without a ``config.json`` of this format, is refused. Its ``config.json`` is
        removed first and written last: a save that does not finish leaves a folder ``load``
        refuses, never one model's weights beside another's configuration. Each file is written
        whole or not at all (``utils.files.write_atomic``)."""
        from ..utils.files import write_atomic, write_safetensors

        check_is_fitted(self, "net_")
        # a value set_params gave since the fit (written as params_now) that load would refuse
        self._validate_params()
        params = {k: v for k, v in self.__dict__.get("_params_at_fit", self.get_params(deep=False)).items()
                  if k != "callbacks"}
        # vocab_file stays the path the fit read (a clone of the loaded model refits with it); the
        # loaded model itself reads its vocabulary from vocab.txt
        params["memory"] = None  # a cache folder of this machine's, not part of the model
        pretrained = params.get("pretrained")
        from .warm_start import NAMED

        if pretrained is not None and not (isinstance(pretrained, str) and pretrained in NAMED):
            # a folder, as the absolute path the fit read (resolved then, not now: the working folder
            # may have changed since); written as its text, Path("moses") would read back as the
            # shipped encoder's name
            source = self.__dict__.get("pretrained_")
            folder = Path(source["path"] if source else pretrained)
            params["pretrained"] = str(folder if folder.is_absolute() else folder.resolve())  # (older fits kept it relative)
        if isinstance(params.get("random_state"), np.random.RandomState):
            params["random_state"] = self._tta_seed  # the seed the fit drew from it: a refit repeats the fit
        config = {
            "format": "gmnet_sklearn.v1",
            "library_version": __version__,
            "estimator": type(self).__name__,
            "params": params,
            "fitted": self._fitted_metadata(),
            "vocabulary_digest": self.tokenizer_.vocabulary_digest(),  # (load checks vocab.txt against it)
        }
        # the parameters set_params changed since the fit (tta, n_jobs, ...): the loaded model's
        # get_params are this one's (as a pickle's), it predicts as this one does, and its
        # _params_at_fit stay the fit's (the shape the weights were built with; the parameters save writes)
        changed = self._params_changed_since_fit()
        if changed:
            config["params_now"] = changed
        # first, so a parameter config.json cannot hold (a callable, a RandomState) fails before
        # any file is written
        histories = [_history_json(net.history) for net in self.nets_]
        # which files hold this model's histories: load() reads no other (a folder saved into
        # before by another version may hold an older one)
        config["histories"] = [_history_file(i) for i in range(len(self.nets_))]
        config_text = json.dumps(config, indent=2, default=_json_default)
        path = Path(path)
        _check_model_folder(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").unlink(missing_ok=True)  # the folder is no model until the new config is in
        for i, net in enumerate(self.nets_):
            state = {k: v.detach().cpu().contiguous() for k, v in net.module_.state_dict().items()}
            write_safetensors(path / _weights_file(i), state)
            write_atomic(path / _history_file(i), histories[i].encode())
        written = {_weights_file(i) for i in range(len(self.nets_))} | set(config["histories"])
        for old in path.iterdir():  # an earlier save's members beyond this model's
            if _MEMBER_FILE.fullmatch(old.name) and old.name not in written:
                old.unlink()
        if params["descriptors"]:  # as fitted (config.json says so), whatever set_params did since
            scaler = self.descriptor_scaler_
            arrays = {"kept": scaler.kept_, "quantiles": scaler.quantiles_.quantiles_,
                      "references": scaler.quantiles_.references_}
            import rdkit

            # which descriptors the columns are: another RDKit may list others (checked on load)
            write_safetensors(path / "descriptors.safetensors",
                              {k: torch.as_tensor(np.ascontiguousarray(v)) for k, v in arrays.items()},
                              metadata={"names": json.dumps(scaler.names_.tolist()), "rdkit_version": rdkit.__version__})
        else:
            (path / "descriptors.safetensors").unlink(missing_ok=True)
        if getattr(self, "forest_", None) is not None:
            self.forest_.save(path / "forest.skops")
        else:  # a folder saved into before must not lend this model another model's forest
            (path / "forest.skops").unlink(missing_ok=True)
        vocab = sorted(self.tokenizer_.vocabulary_.items(), key=lambda kv: kv[1])
        write_atomic(path / "vocab.txt", "".join(tok + "\n" for tok, _ in vocab).encode())
        write_atomic(path / "config.json", config_text.encode())
        return path

    def _params_changed_since_fit(self) -> dict:
        """The parameters whose value ``set_params`` changed since the fit (the callbacks and the
        cache folder left out: not part of a saved model)."""
        fit = self.__dict__.get("_params_at_fit")
        if fit is None:
            return {}
        changed = {}
        for key, value in self.get_params(deep=False).items():
            if key in ("callbacks", "memory") or value is fit.get(key):
                continue
            if key == "random_state" and isinstance(value, np.random.RandomState):
                continue  # (no JSON for it; the loaded model keeps the fit's seed, as save writes it)
            try:
                same = bool(value == fit.get(key)) and type(value) is type(fit.get(key))
            except Exception:  # (an object whose == is no bool)
                same = False
            if not same:
                try:
                    json.dumps(value, default=_json_default)
                except TypeError:
                    raise TypeError(f"cannot store {key}={value!r}, set after the fit, in config.json: set a value "
                                    "JSON can hold (a name, a number), or the fit's, before save()") from None
                changed[key] = value
        return changed

    @classmethod
    def load(cls, path, device: str | None = None):
        """Load a directory written by :meth:`save` (no pickle, no code execution): only the files
        ``save`` writes, each a regular file; ``config.json`` refused where it sets what ``save``
        does not write (a cache folder, callbacks, other attributes) or values the parameters'
        checks refuse, ``vocab.txt`` where it is not the saved vocabulary, ``forest.skops`` where
        it holds anything but the forests ``save`` wrote, a weights file where it does not hold the
        weights of the model config.json describes (checked before the model's tensors are
        allocated, so a crafted config.json cannot ask for larger tensors than its weights file
        holds; ``utils.files.check_weights_fit`` says what that does not bound)."""
        from ..utils.files import check_regular_file, check_weights_fit, read_json, read_safetensors
        from . import ESTIMATORS
        from ._base import FITTED_VOCABULARY, SmilesNetBase, resolve_device  # (_base imports this module)

        path = Path(path)
        if path.is_dir() and not (path / "config.json").exists() and any(
                _SAVED_FILE.fullmatch(f.name) for f in path.iterdir()):
            raise ValueError(f"{path} has no config.json: a save() into it did not finish; save the model again")
        config = read_json(path / "config.json")
        if not isinstance(config, dict) or config.get("format") != "gmnet_sklearn.v1":
            raise ValueError(f"{path} is not a gmnet_sklearn model directory (format "
                             f"{config.get('format') if isinstance(config, dict) else None!r})")
        saved_by = f"saved by gmnet_sklearn {config.get('library_version', '?')}, this is {__version__}"
        est_cls = ESTIMATORS.get(config.get("estimator"))
        if est_cls is None and cls is not SmilesNetBase and cls.__name__ == config.get("estimator"):
            est_cls = cls  # a subclass of the user's, loaded through its own load()
        if est_cls is None:
            raise ValueError(f"{path} holds a {config.get('estimator')!r}, which this version cannot load "
                             f"({saved_by}; it loads {sorted(ESTIMATORS)})")
        if cls is not SmilesNetBase and not issubclass(est_cls, cls):
            raise TypeError(f"{path} holds a {est_cls.__name__}, not a {cls.__name__}")
        # (a folder saved before a parameter existed: what the model did then)
        params = {**{k: v for k, v in _BEFORE_THEY_EXISTED.items() if k in est_cls._get_param_names()},
                  **config["params"]}
        now = dict(config.get("params_now", config.get("predict_params", {})))
        unknown = sorted((set(params) | set(now)) - set(est_cls._get_param_names()))
        if unknown:
            raise ValueError(f"{path} holds parameters {unknown} that this version's {est_cls.__name__} does not "
                             f"have ({saved_by})")
        # what save never writes: a cache folder (joblib's pickles, read by predict) or callbacks
        # from a folder someone else wrote would run their code here
        foreign = sorted({k for k in ("memory", "callbacks") if params.get(k) is not None} | ({"memory", "callbacks"} & set(now)))
        extra = sorted(set(config.get("fitted", {})) - est_cls._fitted_metadata_keys())
        if foreign or extra:
            raise ValueError(f"{path}: config.json sets {foreign + extra}, which save() does not write; not loaded "
                             "(a folder from an untrusted source?)")
        digest = config.get("vocabulary_digest")
        tokenizer = SmilesTokenizer(str(check_regular_file(path / "vocab.txt"))).fit([])
        if device is not None:
            params["device"] = device
            now.pop("device", None)
        if params.get("vocab_file") is None and params.get("pretrained") is None and digest is None:
            # saved before vocab_file=None meant DeepChem's vocabulary: it meant one fitted on the
            # training SMILES, which a refit (clone(loaded).fit) must repeat
            if tokenizer.vocabulary_digest() != SmilesTokenizer(DEEPCHEM_VOCAB).fit([]).vocabulary_digest():
                params["vocab_file"] = FITTED_VOCABULARY
        est = est_cls(**params)
        est._validate_params()  # (types and ranges, as fit checks them: a crafted value fails here)
        est.tokenizer_ = tokenizer
        if digest is not None and est.tokenizer_.vocabulary_digest() != digest:
            raise ValueError(f"{path / 'vocab.txt'} is not the vocabulary the model was saved with (its tokens or "
                             "their order changed)")
        # as fit leaves them: a set_params after loading must not change the model's inputs, what
        # save writes or tta's variants (save wrote random_state as an int or None)
        est._params_at_fit = est.get_params(deep=False)
        est._tta_seed = est.random_state if est.random_state is not None else 0
        est._restore_fitted_metadata(config["fitted"])
        est.device_ = resolve_device(est.device, check=device is not None)
        if device is None and str(est.device_).startswith("cuda"):
            try:
                resolve_device(est.device_)
            except ValueError as exc:
                # no CUDA, as an unpickled model does (skorch maps its nets to the CPU); fewer GPUs
                # than the fitting machine's: its first
                fallback = "cuda" if torch.cuda.is_available() else "cpu"
                warnings.warn(f"{path} holds a model fitted on {exc}: loaded on device {fallback!r} "
                              "(load(path, device=...) chooses)", UserWarning, stacklevel=2)
                est.device_ = fallback
        if est.descriptors:
            from safetensors import safe_open

            file = path / "descriptors.safetensors"
            arrays = read_safetensors(file)
            with safe_open(str(file), framework="pt") as fh:
                meta = fh.metadata() or {}  # none in folders saved before names were recorded
            est.descriptor_scaler_ = RDKitDescriptors()._restore(
                arrays["kept"].numpy(), arrays["quantiles"].numpy(), arrays["references"].numpy(),
                names=json.loads(meta["names"]) if "names" in meta else None,
                rdkit_version=meta.get("rdkit_version"), source=str(file))
        # every member's file, before any member is built
        check_weights_fit([path / _weights_file(i) for i in range(est.n_estimators)], est._make_module,
                          n_layers=est.n_layers)
        est.nets_ = []
        with torch.random.fork_rng(devices=[]):  # the modules' random initial weights, replaced: the caller's stream kept
            for i in range(est.n_estimators):
                module = est._make_module()
                module.load_state_dict(read_safetensors(path / _weights_file(i)))
                net = SmilesNet(module=module, criterion=est._criterion(), device=est.device_, optimizer=None,
                                iterator_valid=sequential_loader, train_split=None, cuda_graphs=est.cuda_graphs,
                                precision=est.precision, pad_id=est.tokenizer_.pad_id)
                net.initialize()
                net.module_.load_state_dict(module.state_dict())
                if _history_file(i) in config.get("histories", ()):  # (not in folders saved before it was kept)
                    net.history_ = History(read_json(path / _history_file(i)))  # (History.from_file, the file named in errors)
                est.nets_.append(net)
        est.net_ = est.nets_[0]
        est.resume_info_ = None
        est.forest_ = MoleculeForest.load(path / "forest.skops") if est.forest else None
        if est.forest_ is not None and (est.forest_.kind != est._forest_kind
                                        or est.forest_.multi_label != (getattr(est, "n_tasks_", 1) > 1)):
            raise ValueError(f"{path / 'forest.skops'} holds a {est.forest_.kind} forest "
                             f"(multi_label={est.forest_.multi_label}), not this {type(est).__name__}'s")
        if est.forest_ is not None and len(est.forest_.forests_) != est._n_forests():
            raise ValueError(f"{path / 'forest.skops'} holds {len(est.forest_.forests_)} forest(s); the model has "
                             f"{est._n_forests()} task(s)")
        # last: the nets above are built as fitted (d_model, n_estimators, ...), whatever set_params did since
        est.set_params(**now)
        est._validate_params()  # (the values set after the fit too)
        return est

    @classmethod
    def _fitted_metadata_keys(cls) -> set:
        """The entries ``_fitted_metadata`` writes: all ``load`` restores from ``config.json``'s
        "fitted" (a crafted folder must not set other attributes: ``memory``, methods)."""
        return {"n_outputs_", "max_length_", "n_train_", "n_valid_", "n_invalid_skipped_", "invalid_rows_",
                "invalid_valid_rows_", "forest_weight_", "best_epoch", "selection_metric"}

    def _n_forests(self) -> int:
        """Forests a fitted ``forest_`` holds: one per task (one for a single-task classifier)."""
        return self.n_tasks_ if hasattr(self, "n_tasks_") else self.n_outputs_

    def _fitted_metadata(self) -> dict[str, Any]:
        return {"n_outputs_": self.n_outputs_, "max_length_": self.max_length_, "n_train_": self.n_train_,
                "n_valid_": self.n_valid_, "n_invalid_skipped_": self.n_invalid_skipped_,
                "invalid_rows_": self.invalid_rows_, "invalid_valid_rows_": self.invalid_valid_rows_,
                "forest_weight_": getattr(self, "forest_weight_", 0.0), "best_epoch": self.best_epoch_,
                "selection_metric": self.__dict__.get("_selection_metric")}

    def _restore_fitted_metadata(self, meta: dict[str, Any]):
        meta = dict(meta)
        self._saved_best_epoch = meta.pop("best_epoch", None)  # (None: saved before it was kept)
        self._selection_metric = meta.pop("selection_metric", None)  # best_epoch_ reads it in the saved history
        for key, value in meta.items():
            setattr(self, key, np.asarray(value, dtype=np.int64 if key.startswith("invalid_") else None)
                    if isinstance(value, list) else value)


def _weights_file(member: int) -> str:
    return "model.safetensors" if member == 0 else f"model_{member}.safetensors"


def _history_file(member: int) -> str:
    return "history.json" if member == 0 else f"history_{member}.json"


def _history_json(history) -> str:
    """A training history as JSON (skorch's ``History.to_file`` format): numpy and torch numbers
    and arrays as Python ones; anything else a callback recorded (a datetime, an object) as its
    text, with a warning naming the types, rather than a model that cannot be saved."""
    as_text = set()

    def default(obj):
        if isinstance(obj, (torch.Tensor, np.ndarray, np.generic)):
            return obj.tolist()
        as_text.add(type(obj).__name__)
        return str(obj)

    text = json.dumps(list(history), default=default)
    if as_text:
        warnings.warn(f"history.json: the training history holds values JSON cannot (of types {sorted(as_text)}, "
                      "recorded by a callback); they are saved as their text", UserWarning, stacklevel=3)
    return text


#: The files ``save`` writes (``config.json`` aside), and of those the ensemble members' (a
#: smaller ensemble saved over a larger one removes the others).
_SAVED_FILE = re.compile(r"model(_\d+)?\.safetensors|history(_\d+)?\.json|descriptors\.safetensors|forest\.skops"
                         r"|vocab\.txt")
_MEMBER_FILE = re.compile(r"model(_\d+)?\.safetensors|history(_\d+)?\.json")

#: What a model did before each parameter existed, for folders saved then (their config.json
#: lacks it; today's default would build another model): no forest, descriptors, fingerprint,
#: ensemble, predict-time variants or average of epochs.
_BEFORE_THEY_EXISTED = {"forest": False, "descriptors": False, "fingerprint": False, "n_estimators": 1, "tta": 0,
                        "augment": 0, "average_epochs": 1}


def _check_model_folder(path: Path) -> None:
    """``save`` writes into a new folder, an earlier save's (``config.json`` of this format, other
    files beside it left as they are) or one without a ``config.json`` that holds none of the
    files it writes or only those (an unfinished save's); not into a folder of another kind
    (a pretrained encoder's, a Hugging Face model's) or one whose ``vocab.txt`` or
    ``model.safetensors`` belong to something else."""
    if not path.exists():
        return
    if not path.is_dir():
        raise ValueError(f"{path} is a file: save() writes a folder")
    config = path / "config.json"
    if config.exists():
        from ..utils.files import read_json

        try:
            fmt = read_json(config).get("format")  # (a regular file only: a FIFO would hang)
        except (ValueError, AttributeError):
            fmt = None
        if fmt != "gmnet_sklearn.v1":
            raise ValueError(f"{path} holds another kind of folder (config.json format {fmt!r}, e.g. a pretrained "
                             "encoder's): save() would replace its files; save into a new folder")
        return
    names = [f.name for f in path.iterdir() if not f.name.startswith(".")]  # (.DS_Store, .ipynb_checkpoints, ...)
    ours = sorted(n for n in names if _SAVED_FILE.fullmatch(n))
    other = sorted(n for n in names if not _SAVED_FILE.fullmatch(n))
    if ours and other:
        raise ValueError(f"{path} has no config.json and holds files save() would replace ({', '.join(ours[:5])}) "
                         f"beside others ({', '.join(other[:5])}): not a folder save() wrote; save into a new folder")


def _json_default(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, os.PathLike):  # e.g. pretrained=Path(...)
        return os.fspath(obj)
    if isinstance(obj, torch.device):
        return str(obj)
    raise TypeError(f"cannot store {type(obj).__name__} in config.json (save() writes the fit's parameters as "
                    "JSON: fit with a named value, e.g. activation='gelu', to save the model)")
