"""The two model families' masked-LM models and the pretrained-encoder folder (the safe format).

A pretrained folder holds

* ``model.safetensors``: the pretrained model's weights (``encoder.*`` and the pretraining head:
  ``lm_head.*`` for masked-LM, ``mtr_head.*`` for descriptor regression; a tied copy is stored once);
* ``config.json``: ``format``, the family (``"gmnet"`` or ``"chemberta"``), its architecture
  parameters (named as the estimators name them), the vocabulary size and padding id, the
  ``objective`` ("mlm", or "mtr" with the descriptor ``targets``; absent: "mlm"), and what the
  pretraining did (steps, SMILES and tokens seen, held-out metrics, wall time, hardware);
* ``vocab.txt``: the vocabulary, one token a line (DeepChem's layout).

Nothing in it is pickled: it loads without executing code. ``config.json`` is written last, so
a folder with it is complete.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ..estimators.presets import PAPER_SHAPE
from ..utils.files import check_weights_fit, read_json, read_safetensors, write_atomic, write_safetensors

PRETRAINED_FORMAT = "gmnet_sklearn.pretrained.v1"
FAMILIES = ("gmnet", "chemberta")
#: Pretraining objectives: masked-LM (RoBERTa's), or multi-task regression of RDKit's 2D
#: descriptors from the SMILES (ChemBERTa-2's "MTR"; targets.py).
OBJECTIVES = ("mlm", "mtr")

#: Architecture parameters of each family (estimator names) and pretrain()'s defaults: the paper's
#: ChemBERTa-10M shape, Chem-GMNet at k = 8, L = 3. ``lm_head`` (Chem-GMNet's masked-LM head,
#: ``gm/lm_head.py``) is a pretraining choice: the head is not kept for fine-tuning.
DEFAULT_PARAMS = {
    "gmnet": {**PAPER_SHAPE, "k": 8, "L": 3, "attention": "dual_ska", "activation": "gelu", "adaptive": False,
              "conj_shift": 1.0, "lm_head": "linear"},
    "chemberta": {**PAPER_SHAPE, "intermediate_size": 464, "attention_dropout": 0.109, "max_position_embeddings": 515},
}
#: The estimators' default shape (``GMNetRegressor()`` / ``ChemBERTaRegressor()``): pretrain with
#: it (``pretrain(..., **LIBRARY_SHAPE[model])``) and the estimators' defaults warm-start from the
#: run with no shape arguments; the MOSES encoders that ship (``pretrained="moses"``) have it.
#: Checked against the signatures in tests/test_pretrain.py.
LIBRARY_SHAPE = {
    "gmnet": {"d_model": 256, "n_layers": 3, "n_heads": 8, "dropout": 0.1, "k": 8, "L": 3},
    "chemberta": {"d_model": 256, "n_layers": 3, "n_heads": 8, "dropout": 0.1, "intermediate_size": 309,
                  "attention_dropout": 0.1},
}
#: The parameters that fix the weights' shapes or meaning: a fine-tuned estimator must match them.
#: (Dropout rates may differ between pretraining and fine-tuning.)
SHAPE_PARAMS = {
    "gmnet": ("k", "L", "d_model", "n_layers", "n_heads", "attention", "activation", "adaptive", "conj_shift"),
    "chemberta": ("d_model", "n_layers", "n_heads", "intermediate_size", "max_position_embeddings"),
}


def check_family(model: str) -> str:
    if model not in FAMILIES:
        raise ValueError(f"model must be one of {FAMILIES}, got {model!r}")
    return model


def model_params(model: str, params: dict | None) -> dict:
    """The family's defaults updated with ``params``; unknown names raise."""
    defaults = DEFAULT_PARAMS[check_family(model)]
    # numpy scalars (a grid from np.arange) as Python numbers: the run's definition is JSON
    params = {k: v.item() if isinstance(v, np.generic) else v for k, v in (params or {}).items()}
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {model} model parameters {unknown}; known: {sorted(defaults)}")
    for name, value in params.items():  # of its default's type: "False" (a string) would build adaptive=True
        if not _same_kind(value, defaults[name]):
            raise ValueError(f"{model} model parameter {name} must be a {type(defaults[name]).__name__} "
                             f"(like its default {defaults[name]!r}), got {value!r}")
        if isinstance(defaults[name], float):  # conj_shift=1 is the run conj_shift=1.0 (one fingerprint)
            params[name] = float(value)
    return {**defaults, **params}


def _same_kind(value, default) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):  # an int is a float here (conj_shift=1)
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, type(default)) if default is not None else True


def build_mlm(model: str, vocab_size: int, pad_id: int, params: dict) -> torch.nn.Module:
    """The family's masked-LM model (``encoder`` + ``lm_head``, ``masked_states``, ``tied_keys``)."""
    if check_family(model) == "gmnet":
        from ..gm.lm_head import GMNetForMaskedLM

        return GMNetForMaskedLM(vocab_size, pad_id=pad_id, **params)
    from ..baselines.chemberta import ChemBERTaForMaskedLM

    return ChemBERTaForMaskedLM(vocab_size, pad_id=pad_id, **params)


class DescriptorRegressionModel(torch.nn.Module):
    """A family's encoder with a regression head on the molecule's pooled state, read as the
    family's property model reads it (Chem-GMNet: the mean of its token states; ChemBERTa: the
    [CLS] state), so fine-tuning starts from the representation pretraining shaped. The head
    (dense, GELU, LayerNorm, linear) is not kept for fine-tuning."""

    tied_keys: dict = {}

    def __init__(self, model: str, vocab_size: int, pad_id: int, params: dict, n_targets: int):
        super().__init__()
        self.family, self.pad_id = check_family(model), pad_id
        # through the masked-LM model: the same draws of the initial weights as a masked-LM run of
        # the same seed, and the shipped moses-mtr runs stay reproducible (its head costs little)
        self.encoder = build_mlm(model, vocab_size, pad_id, params).encoder
        d = params["d_model"]
        self.mtr_head = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.GELU(), torch.nn.LayerNorm(d),
                                            torch.nn.Linear(d, n_targets))

    def pooled(self, input_ids, conj_flags, attention_mask) -> torch.Tensor:
        if self.family == "chemberta":
            return self.encoder.encode(input_ids, attention_mask)[:, 0]
        return self.encoder.pool(input_ids, conj_flags, attention_mask)  # GMNet.pool's, packed on CPU

    def forward(self, input_ids, conj_flags=None, attention_mask=None) -> torch.Tensor:
        """Predicted scaled descriptors (B, n_targets)."""
        if attention_mask is None:
            attention_mask = input_ids != self.pad_id
        return self.mtr_head(self.pooled(input_ids, conj_flags, attention_mask))


def build_model(model: str, vocab_size: int, pad_id: int, params: dict, objective: str = "mlm",
                n_targets: int = 0) -> torch.nn.Module:
    """The pretraining model of ``objective``: :func:`build_mlm`'s, or a
    :class:`DescriptorRegressionModel` with ``n_targets`` outputs."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective == "mlm":
        return build_mlm(model, vocab_size, pad_id, params)
    return DescriptorRegressionModel(model, vocab_size, pad_id, params, n_targets)


def stored_state(module: torch.nn.Module) -> dict:
    """The state dict without tied copies, contiguous, on CPU (what safetensors can store)."""
    tied = getattr(module, "tied_keys", {})
    return {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items() if k not in tied}


def load_stored_state(module: torch.nn.Module, state: dict) -> None:
    """Inverse of :func:`stored_state`: every key but the tied ones must be there."""
    missing, unexpected = module.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in getattr(module, "tied_keys", {})]
    if missing or unexpected:
        raise KeyError(f"weights do not match the model: missing {missing}, unexpected {unexpected}")


def save_pretrained(path, mlm: torch.nn.Module, model: str, params: dict, tokenizer, training: dict,
                    objective: str = "mlm", targets: dict | None = None) -> Path:
    """Write the pretrained folder (see the module docstring)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config_path = path / "config.json"
    if config_path.exists():
        config_path.unlink()  # the folder is incomplete until the new config is in place
    write_safetensors(path / "model.safetensors", stored_state(mlm),
                      metadata={"format": PRETRAINED_FORMAT, "model": model})
    vocab = sorted(tokenizer.vocabulary_.items(), key=lambda kv: kv[1])
    (path / "vocab.txt").write_text("".join(tok + "\n" for tok, _ in vocab))
    config = {"format": PRETRAINED_FORMAT, "model": model, "params": params, "vocab_size": tokenizer.vocab_size,
              "pad_id": tokenizer.pad_id, "training": training}
    if objective != "mlm":  # masked-LM folders keep the layout they had before objectives existed
        config.update(objective=objective, targets=targets)
    write_atomic(config_path, json.dumps(config, indent=2).encode())
    return path


def read_config(path) -> dict:
    """The ``config.json`` of a pretrained folder, checked."""
    path = Path(path)
    file = path / "config.json"
    if not file.is_file():
        raise FileNotFoundError(f"{path} is not a pretrained model folder: it has no config.json "
                                "(a pretraining run writes it when it finishes)")
    config = read_json(file)
    if config.get("format") != PRETRAINED_FORMAT:
        raise ValueError(f"{path}: config.json is not a gmnet_sklearn pretrained model (format {config.get('format')!r})")
    return config


def load_mlm(path, device: str = "cpu") -> tuple[torch.nn.Module, dict]:
    """The masked-LM model of a pretrained folder (weights loaded) and its config."""
    config = read_config(path)
    if config.get("objective", "mlm") != "mlm":
        raise ValueError(f"{path} was pretrained with objective={config['objective']!r}: it has no masked-LM head "
                         "(its encoder warm-starts the estimators as any other: pretrained=PATH)")
    params = dict(config["params"])
    if config["model"] == "gmnet":
        params.setdefault("lm_head", "sphere")  # folders written before lm_head existed have the sphere head

    def make():
        return build_mlm(config["model"], config["vocab_size"], config["pad_id"], params)

    # (before the model's tensors take memory: a crafted config.json cannot ask for larger ones than the file holds)
    check_weights_fit(Path(path) / "model.safetensors", make, skip_tied=True, n_layers=params.get("n_layers"))
    mlm = make()
    load_stored_state(mlm, read_safetensors(Path(path) / "model.safetensors", device=device))
    return mlm.to(device), config


__all__ = ["PRETRAINED_FORMAT", "FAMILIES", "OBJECTIVES", "DescriptorRegressionModel", "build_model", "DEFAULT_PARAMS", "LIBRARY_SHAPE", "SHAPE_PARAMS", "build_mlm", "model_params",
           "save_pretrained", "read_config", "load_mlm", "stored_state", "load_stored_state"]
