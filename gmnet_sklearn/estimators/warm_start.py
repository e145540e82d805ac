"""Warm start: the estimators' ``pretrained=`` parameter.

``pretrained`` is a folder written by ``gmnet_sklearn.pretrain`` (either family), a Hugging Face
``RobertaForMaskedLM`` folder (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin``;
ChemBERTa estimators only), or ``"moses"``: the encoder pretrained on MOSES that ships in the
package (``gmnet_sklearn/pretrained/moses-<family>/``, the estimators' default shape; ``"moses-paper"``:
the paper's shape, for ``PAPER_PROTOCOL``, ``moses-paper-<family>/``; ``"moses-mtr"``: the
default shape pretrained by regressing RDKit's descriptors instead of masked-LM,
``moses-mtr-<family>/``; ``"moses-epoch"``: the default shape's masked-LM pretraining run for one
whole MOSES epoch instead of a quarter, ``moses-epoch-<family>/``).

The encoder's weights and the vocabulary come from the checkpoint; the head (and the descriptor
fusion's projection) start fresh from the fit's seed. The estimator's shape parameters must
match the checkpoint's; a conflict is a ``ValueError`` naming each one.
``GMNetRegressor.from_pretrained(path, **params)`` builds an estimator with the checkpoint's shape
(so the parameters stay what ``get_params`` shows, and ``clone``/``GridSearchCV`` see them).
Dropout rates are free to differ. Nothing is unpickled: safetensors, JSON and text, except a
Hugging Face ``pytorch_model.bin``, read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

import torch

from ..pretrain.models import PRETRAINED_FORMAT, SHAPE_PARAMS
from ..utils.files import read_json, read_safetensors, safetensors_shapes
from .fusion import DescriptorFusion

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "pretrained"
#: Names ``pretrained=`` accepts besides a path: the folder per family under PACKAGE_DIR.
#: "moses" has the estimators' default shape; "moses-paper" the paper's (``PAPER_PROTOCOL``'s).
NAMED = {"moses": {"gmnet": "moses-gmnet", "chemberta": "moses-chemberta"},
         "moses-paper": {"gmnet": "moses-paper-gmnet", "chemberta": "moses-paper-chemberta"},
         "moses-mtr": {"gmnet": "moses-mtr-gmnet", "chemberta": "moses-mtr-chemberta"},
         "moses-epoch": {"gmnet": "moses-epoch-gmnet", "chemberta": "moses-epoch-chemberta"}}
_NAMED_LABELS = {"moses": "MOSES-pretrained", "moses-paper": "MOSES-pretrained paper-shape",
                 "moses-mtr": "MOSES descriptor-regression-pretrained",
                 "moses-epoch": "one-epoch MOSES-pretrained"}
_FAMILY_NAMES = {"gmnet": "Chem-GMNet", "chemberta": "ChemBERTa"}
#: Hugging Face RoBERTa config -> the ChemBERTa estimators' parameter names.
_HF_PARAMS = {"hidden_size": "d_model", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
              "intermediate_size": "intermediate_size", "max_position_embeddings": "max_position_embeddings"}


def resolve_path(pretrained, family: str) -> Path:
    """The folder ``pretrained`` names for ``family`` ("gmnet" or "chemberta")."""
    if not isinstance(pretrained, (str, os.PathLike)):
        raise TypeError(f"pretrained must be None, a folder path or one of {sorted(NAMED)}, got {pretrained!r}")
    if isinstance(pretrained, str) and pretrained in NAMED:
        if Path(pretrained).is_dir():
            import warnings

            from ..utils.stacklevel import _caller_stacklevel

            warnings.warn(f"pretrained={pretrained!r} names the shipped encoder, not the folder {pretrained!r} here "
                          f"(pass pathlib.Path({pretrained!r}) or './{pretrained}' for that one)", UserWarning,
                          stacklevel=_caller_stacklevel())
        path = PACKAGE_DIR / NAMED[pretrained][family]
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"pretrained={pretrained!r}: the {_NAMED_LABELS[pretrained]} {_FAMILY_NAMES[family]} encoder is not "
                f"shipped with this version of gmnet_sklearn yet (expected in {path}; it needs a full pretraining run, "
                "DEVELOPERS.md 'Pretraining'). Pass the folder a gmnet_sklearn.pretrain run wrote instead.")
        return path
    path = Path(pretrained)
    if path.is_file():
        raise FileNotFoundError(f"pretrained={str(pretrained)!r} is a file; pass the folder that holds it, "
                                f"{str(path.resolve().parent)!r}")
    if not path.is_dir():
        raise FileNotFoundError(f"pretrained={str(pretrained)!r}: no such folder")
    return path.resolve()  # absolute now: a model saved later from another working folder names this one


def read_source(pretrained, family: str) -> dict:
    """What the checkpoint is: ``path``, ``kind`` ("gmnet_sklearn" or "huggingface"), the shape
    ``params`` in the estimators' names, ``vocab_file`` (or None) and ``vocab_size``, ``pad_id``."""
    path = resolve_path(pretrained, family)
    config_file = path / "config.json"
    if not config_file.is_file():
        if (path / "checkpoint.pt").is_file():  # a pretraining run's folder, written as it goes
            raise FileNotFoundError(f"pretrained={str(pretrained)!r}: {path} holds an unfinished pretraining run "
                                    "(checkpoint.pt, no config.json yet): run the same gmnet-pretrain command again "
                                    "to finish it")
        raise FileNotFoundError(f"pretrained={str(pretrained)!r}: {path} has no config.json; expected a folder written "
                                "by gmnet_sklearn.pretrain or a Hugging Face RobertaForMaskedLM folder")
    config = read_json(config_file)
    vocab = path / "vocab.txt"
    if config.get("format") == PRETRAINED_FORMAT:
        if config["model"] != family:
            raise ValueError(f"pretrained={str(pretrained)!r} holds a pretrained {_FAMILY_NAMES[config['model']]} "
                             f"model, not a {_FAMILY_NAMES[family]} one")
        digest = config.get("training", {}).get("definition", {}).get("vocab")
        if not vocab.is_file():  # (the estimator's vocab_file cannot stand in: the ids are the encoder's)
            raise FileNotFoundError(f"pretrained={str(pretrained)!r}: {path} has lost its vocab.txt, the vocabulary "
                                    "its encoder was pretrained with; put it back (a pretraining run writes it there)")
        if digest is not None and _vocab_file_digest(vocab) != digest:
            raise ValueError(f"pretrained={str(pretrained)!r}: {vocab} is not the vocabulary the encoder was pretrained "
                             f"with (its digest differs from config.json's {digest}): every token id would be another's")
        _check_layers_against_weights(pretrained, path, config["params"])
        return {"path": str(path), "kind": "gmnet_sklearn", "params": dict(config["params"]),
                "vocab_file": str(vocab), "vocab_size": config["vocab_size"], "pad_id": config["pad_id"]}
    if config.get("model_type") == "roberta":
        if family != "chemberta":
            raise ValueError(f"pretrained={str(pretrained)!r} is a Hugging Face RoBERTa model: it warm-starts the "
                             "ChemBERTa estimators, not Chem-GMNet")
        if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"pretrained={str(pretrained)!r}: only hidden_act='gelu' and absolute position embeddings "
                             "are supported")
        if float(config.get("layer_norm_eps", 1e-12)) != 1e-12:
            raise ValueError(f"pretrained={str(pretrained)!r}: layer_norm_eps={config['layer_norm_eps']}, the "
                             "ChemBERTa estimators use RoBERTa's 1e-12")
        absent = [hf for hf in (*_HF_PARAMS, "vocab_size") if hf not in config]
        if absent:
            raise ValueError(f"pretrained={str(pretrained)!r}: {config_file} lacks {absent}")
        params = {ours: config[hf] for hf, ours in _HF_PARAMS.items()}
        _check_layers_against_weights(pretrained, path, params)
        return {"path": str(path), "kind": "huggingface", "params": params,
                "vocab_file": str(vocab) if vocab.is_file() else None, "vocab_size": config["vocab_size"],
                "pad_id": config.get("pad_token_id", 1)}
    if config.get("format") == "gmnet_sklearn.v1":  # a fitted estimator, saved by est.save
        raise ValueError(f"pretrained={str(pretrained)!r} is a fitted {config.get('estimator', 'estimator')} saved "
                         "by save(), not a pretrained encoder: open it with its class's load(), or pass a "
                         "folder written by gmnet_sklearn.pretrain")
    raise ValueError(f"pretrained={str(pretrained)!r}: {config_file} is neither a gmnet_sklearn pretrained model nor a "
                     "Hugging Face RoBERTa config")


def _check_layers_against_weights(pretrained, path: Path, params: dict) -> None:
    """A config.json asking for more layers than its weights file has tensors is not these
    weights' (refused at once, without reading the weights: building a million layers, even on
    the meta device as `check_encoder_fits` does, would take hours)."""
    n_layers = params.get("n_layers")
    if isinstance(n_layers, int) and not isinstance(n_layers, bool):
        shapes = _weight_shapes(path)
        if shapes is not None and n_layers > len(shapes):
            raise ValueError(f"pretrained={str(pretrained)!r}: {path / 'config.json'} asks for {n_layers} layers, more "
                             f"than the {len(shapes)} tensors of its weights: it is not these weights' config")


#: The files of a checkpoint folder a warm start reads (the rest, e.g. a pretraining run's
#: checkpoint.pt with its optimizer state, or a Hugging Face folder's other weight formats, not).
READ_FILES = ("config.json", "vocab.txt", "model.safetensors", "pytorch_model.bin")


@functools.lru_cache(maxsize=16)
def _digest_of(files: tuple) -> str:
    h = hashlib.sha256()
    for file, _, _ in files:
        h.update(file.name.encode() + b"\0")
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def source_digest(source: dict) -> str:
    """sha256 over the files of the checkpoint folder a warm start reads (`READ_FILES`: names and
    contents): what a training snapshot compares, so a folder rewritten in place (pretraining run
    again) is not taken for the old one. Cached by the files' paths, sizes and modification times
    (a grid search's every fit of every member would hash the weights again)."""
    files = sorted(p for p in (Path(source["path"]) / name for name in READ_FILES) if p.is_file())
    key = tuple((file, file.stat().st_size, file.stat().st_mtime_ns) for file in files)
    return _digest_of(key)


def _comparable(value):
    """Names (activations) are resolved case-insensitively by the models, so compared so."""
    return value.lower() if isinstance(value, str) else value


def check_compatible(est, source: dict, family: str) -> None:
    """Shape parameters of ``est`` that differ from the checkpoint's raise one ``ValueError``."""
    conflicts = [f"{name}={getattr(est, name)!r} (checkpoint: {source['params'][name]!r})"
                 for name in SHAPE_PARAMS[family]
                 if name in source["params"] and _comparable(getattr(est, name)) != _comparable(source["params"][name])]
    if conflicts:
        raise ValueError(f"{type(est).__name__}(pretrained={str(est.pretrained)!r}): shape parameters conflict with the "
                         f"checkpoint: {', '.join(conflicts)}. Pass the checkpoint's values, or build the estimator with "
                         f"{type(est).__name__}.from_pretrained(path, ...), which takes them from the checkpoint.")


def _vocab_file_digest(vocab_file) -> str:
    """The digest a pretraining run records for its vocabulary (``pretrain.cache.vocab_digest``)."""
    from ..pretrain.cache import vocab_digest
    from ..tokenizer import SmilesTokenizer

    return vocab_digest(SmilesTokenizer(vocab_file).fit([]))


def _tokens(vocab_file) -> list[str]:
    return Path(vocab_file).read_text().split()


def tokenizer_for(est, source: dict):
    """The checkpoint's vocabulary (the estimator's ``vocab_file`` only for a Hugging Face folder
    without vocab.txt; else it may name the same vocabulary); its size and padding id must be the
    checkpoint's."""
    from ..tokenizer import SmilesTokenizer

    from ._base import FITTED_VOCABULARY, fitted_vocabulary

    if fitted_vocabulary(est.vocab_file):
        raise ValueError(f"pretrained={str(est.pretrained)!r} brings its own vocabulary: vocab_file="
                         f"{FITTED_VOCABULARY!r} (one fitted on the training SMILES) cannot go with it; leave "
                         "vocab_file=None")
    vocab = source["vocab_file"]
    if vocab is not None and est.vocab_file is not None and _tokens(est.vocab_file) != _tokens(vocab):
        raise ValueError(f"pretrained={str(est.pretrained)!r} brings its own vocabulary and vocab_file="
                         f"{str(est.vocab_file)!r} is another one; leave vocab_file=None")
    if vocab is None:
        if est.vocab_file is None:
            # (vocab_file=None's DeepChem vocabulary is not assumed: a folder trained with another
            # vocabulary of the same size would read every id as another token)
            raise ValueError(f"pretrained={str(est.pretrained)!r} has no vocab.txt: pass the vocabulary it was trained "
                             "with as vocab_file= (DeepChem's 591 tokens: gmnet_sklearn.tokenizer.DEEPCHEM_VOCAB)")
        vocab = est.vocab_file
    tokenizer = SmilesTokenizer(vocab).fit([])
    if tokenizer.vocab_size != source["vocab_size"] or tokenizer.pad_id != source["pad_id"]:
        raise ValueError(f"pretrained={str(est.pretrained)!r}: the vocabulary {vocab} has {tokenizer.vocab_size} tokens "
                         f"and [PAD] id {tokenizer.pad_id}; the checkpoint has {source['vocab_size']} and "
                         f"{source['pad_id']}")
    return tokenizer


def _weight_shapes(path: Path) -> dict[str, tuple] | None:
    """(shape, dtype) of each tensor of a checkpoint folder's weights, without reading them: the
    safetensors header, or a pytorch_model.bin memory-mapped (None for one torch cannot map: a
    file in the legacy format, checked when it is loaded)."""
    if (path / "model.safetensors").is_file():
        return safetensors_shapes(path / "model.safetensors", dtypes=True)
    if (path / "pytorch_model.bin").is_file():
        try:  # (weights_only: no code runs; mmap: the tensors' bytes are not read)
            raw = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True, mmap=True)
        except Exception:
            return None
        return {name: (tuple(t.shape), t.dtype) for name, t in raw.items() if isinstance(t, torch.Tensor)}
    return None


def encoder_state(source: dict, family: str, meta: bool = False) -> dict[str, torch.Tensor] | None:
    """The checkpoint's encoder weights, named as in the estimator's property model; with
    ``meta``, tensors of their shapes and dtypes on the meta device, read without the weights
    (`_weight_shapes`; None where they cannot be)."""
    path = Path(source["path"])
    if meta:
        shapes = _weight_shapes(path)
        if shapes is None:
            return None
        raw = {name: torch.empty(shape, dtype=dtype or torch.float32, device="meta")
               for name, (shape, dtype) in shapes.items()}
    elif (path / "model.safetensors").is_file() or source["kind"] == "gmnet_sklearn":
        raw = read_safetensors(path / "model.safetensors")
    elif (path / "pytorch_model.bin").is_file():
        raw = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{path}: neither model.safetensors nor pytorch_model.bin")
    if source["kind"] == "gmnet_sklearn":
        enc = {k[len("encoder."):]: v for k, v in raw.items() if k.startswith("encoder.")}
        return {f"encoder.{k}": v for k, v in enc.items()} if family == "gmnet" else enc
    from ..baselines.chemberta import hf_to_chemberta_key

    out = {}
    for key, value in raw.items():
        new = hf_to_chemberta_key(key)
        if new is not None and not new.startswith("head."):
            out[new] = value
    return out


def check_encoder_fits(est, source: dict, family: str) -> None:
    """Before a fit builds anything: the checkpoint's encoder tensors (names and shapes, read
    without the weights: `_weight_shapes`) fit the model the estimator will build, made here on the meta device, by
    `load_encoder`'s own checks. A folder whose config.json asks for a larger model than its
    weights (``from_pretrained`` takes the shape from it) fails here, not after the allocation."""
    state = encoder_state(source, family, meta=True)
    if state is None:  # (a legacy-format pytorch_model.bin: checked when loaded)
        return
    with torch.device("meta"):
        module = est._build_module(source["vocab_size"], 1, source["pad_id"])
    load_encoder(module, state)


def load_encoder(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy ``state`` into the property model inside ``module`` (unwrapping descriptor fusion);
    every parameter outside the head must be provided. Returns the names loaded."""
    target = module.model if isinstance(module, DescriptorFusion) else module
    own = target.state_dict()
    head = ("head.", "dense.", "out_proj.")  # the fresh heads: ChemBERTa's `head`, GMNet's `dense`/`out_proj`
    unknown = sorted(set(state) - set(own))
    missing = sorted(k for k in own if k not in state and not k.startswith(head))
    if unknown or missing:
        raise ValueError(f"the pretrained encoder does not fit the model: missing {missing[:10]}, unknown {unknown[:10]}")
    with torch.no_grad():
        for key, value in state.items():
            dst = own[key]
            if value.shape != dst.shape:
                # Hugging Face RoBERTa checkpoints often have one token-type row, the model two; only row 0 is used.
                if key.endswith("token_type_embeddings.weight") and value.shape[1:] == dst.shape[1:] and value.shape[0] <= dst.shape[0]:
                    dst[: value.shape[0]].copy_(value.to(dst.dtype))
                    continue
                raise ValueError(f"pretrained weight {key} has shape {tuple(value.shape)}, the model {tuple(dst.shape)}")
            dst.copy_(value.to(dtype=dst.dtype, device=dst.device))
    return sorted(state)


#: Parameter names of the fresh head (and the descriptor projection beside it), with or without the
#: descriptor-fusion wrapper's "model." prefix: everything else is the (pretrained) encoder.
HEAD_PREFIXES = ("head.", "dense.", "out_proj.", "descriptor_proj.")


def is_encoder_parameter(name: str) -> bool:
    return not name.removeprefix("model.").startswith(HEAD_PREFIXES)


def _within_first_epochs(net, n_epochs: int) -> bool:
    return len(net.history) <= n_epochs  # re-frozen at each of those epochs: a resumed fit too


def _at_epoch(net, epoch: int) -> bool:
    return len(net.history) == epoch


def encoder_freeze_callbacks(n_epochs: int) -> list:
    """skorch callbacks that train only the head for the first ``n_epochs`` epochs, then everything
    (LP-FT: linear probing, then fine-tuning; Kumar et al. 2022): a fresh head first fits the
    pretrained features instead of pulling them towards its random start."""
    from functools import partial

    from skorch.callbacks import Freezer, Unfreezer

    return [Freezer(is_encoder_parameter, at=partial(_within_first_epochs, n_epochs=n_epochs)),
            Unfreezer(is_encoder_parameter, at=partial(_at_epoch, epoch=n_epochs + 1))]


_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def layerwise_lr_scales(names, decay: float) -> list[float]:
    """Each parameter's learning-rate factor under layer-wise decay (ULMFiT's discriminative
    fine-tuning in ELECTRA's form), for the module's parameter ``names`` in registration order:
    the fresh head 1, the top encoder layer ``decay``, each layer below one factor more, what the
    encoder has before its first layer (the embeddings) ``decay ** (n_layers + 1)``; what follows
    its last layer (Chem-GMNet's final LayerNorm) goes with the top layer. Lower layers hold the
    most general pretrained features, so they move least."""
    encoder = {name: is_encoder_parameter(name) for name in names}
    layer_of = {name: int(m.group(1)) for name, inside in encoder.items()
                if inside and (m := _LAYER_INDEX.search(name.removeprefix("model.")))}
    if not layer_of:
        raise ValueError("layer-wise learning-rate decay: the model has no encoder layers named 'layers.<i>.'")
    n_layers = max(layer_of.values()) + 1
    scales, past_first_layer = [], False
    for name, inside in encoder.items():
        if not inside:
            scales.append(1.0)
        elif name in layer_of:
            past_first_layer = True
            scales.append(decay ** (n_layers - layer_of[name]))
        else:
            scales.append(decay if past_first_layer else decay ** (n_layers + 1))
    return scales


__all__ = ["resolve_path", "read_source", "check_compatible", "tokenizer_for", "encoder_state", "load_encoder", "NAMED",
           "encoder_freeze_callbacks", "is_encoder_parameter", "layerwise_lr_scales"]
