"""Same-shape ChemBERTa-2 baseline in plain torch.

This is the network of Hugging Face's

    RobertaForSequenceClassification(RobertaConfig(
        vocab_size=591, hidden_size=384, num_hidden_layers=3, num_attention_heads=12,
        intermediate_size=464, max_position_embeddings=515, type_vocab_size=2, num_labels=2))

(3,425,138 parameters with 2 outputs), written without importing ``transformers`` so that the
core library does not depend on it.  The forward pass matches Hugging Face's to float rounding
(see ``tests/test_chemberta.py``) and :meth:`ChemBERTa.load_hf_state_dict` /
:meth:`ChemBERTa.from_hf` load Hugging Face weights, e.g. public ChemBERTa checkpoints.

Differences from Hugging Face that are deliberate:

* ``forward(input_ids, conj_flags, attention_mask)`` has the Chem-GMNet model's signature;
  ``conj_flags`` is accepted and ignored, token-type ids are always 0.
* ``attention_mask=None`` means ``input_ids != pad_id`` (Hugging Face would attend to everything).
* Attention runs through :func:`torch.nn.functional.scaled_dot_product_attention` with an
  additive key-padding mask of the dtype's most negative value (Hugging Face's convention), so a
  row made only of padding attends uniformly and stays finite instead of producing NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ChemBERTa", "ChemBERTaForMaskedLM", "RobertaLMHead", "hf_to_chemberta_key", "create_position_ids"]


def create_position_ids(input_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """RoBERTa position ids: padding gets ``padding_idx``, real tokens ``padding_idx + 1, + 2, ...``.

    Same as Hugging Face's ``create_position_ids_from_input_ids`` (fairseq's ``make_positions``).
    """
    mask = input_ids.ne(padding_idx).int()
    incremental = torch.cumsum(mask, dim=1).type_as(mask) * mask
    return incremental.long() + padding_idx


class RobertaEmbeddings(nn.Module):
    """Word + learned absolute position + token-type (always 0) embeddings, LayerNorm, dropout."""

    def __init__(self, vocab_size, d_model, max_position_embeddings, type_vocab_size, pad_id,
                 dropout, layer_norm_eps):
        super().__init__()
        self.pad_id = int(pad_id)
        self.word_embeddings = nn.Embedding(vocab_size, d_model, padding_idx=self.pad_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, d_model, padding_idx=self.pad_id)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, d_model)
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        position_ids = create_position_ids(input_ids, self.pad_id)
        x = self.word_embeddings(input_ids)
        # token_type ids are all 0: add row 0 of the token-type table to every position.
        x = x + self.token_type_embeddings.weight[0]
        x = x + self.position_embeddings(position_ids)
        return self.dropout(self.layer_norm(x))


class SelfAttention(nn.Module):
    """Multi-head self-attention with biased Q, K, V and output projections (output dropout included)."""

    def __init__(self, d_model, n_heads, attention_dropout, dropout):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.attention_dropout = float(attention_dropout)
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, attn_bias: torch.Tensor | None) -> torch.Tensor:
        b, t, d = x.shape

        def heads(z):
            return z.view(b, t, self.n_heads, self.d_head).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_bias,
            dropout_p=self.attention_dropout if self.training else 0.0,
            scale=1.0 / math.sqrt(self.d_head),
        )
        y = y.transpose(1, 2).reshape(b, t, d)
        return self.dropout(self.output(y))


class EncoderLayer(nn.Module):
    """Post-norm RoBERTa layer: x = LN(x + Attn(x)); x = LN(x + W2 GELU(W1 x))."""

    def __init__(self, d_model, n_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps):
        super().__init__()
        self.attention = SelfAttention(d_model, n_heads, attention_dropout, dropout)
        self.attention_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.intermediate = nn.Linear(d_model, intermediate_size)
        self.output = nn.Linear(intermediate_size, d_model)
        self.dropout = nn.Dropout(dropout)
        self.output_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def forward(self, x: torch.Tensor, attn_bias: torch.Tensor | None) -> torch.Tensor:
        x = self.attention_norm(x + self.attention(x, attn_bias))
        h = self.output(F.gelu(self.intermediate(x)))  # exact (erf) GELU, HF's "gelu"
        return self.output_norm(x + self.dropout(h))


class ClassificationHead(nn.Module):
    """RoBERTa classification head on the first ([CLS]) token: dropout, dense, tanh, dropout, out_proj."""

    def __init__(self, d_model, n_outputs, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dropout(x[:, 0, :])
        x = self.dropout(torch.tanh(self.dense(x)))
        return self.out_proj(x)


class ChemBERTa(nn.Module):
    """Same-shape ChemBERTa-2 (RoBERTa) baseline for sequence classification / regression.

    Parameters
    ----------
    vocab_size, n_outputs : int
        Vocabulary size (591 for DeepChem's SMILES vocabulary) and number of outputs
        (2 logits for a binary single task, n_tasks for multi-task or regression).
    d_model, n_layers, n_heads, intermediate_size, max_position_embeddings, type_vocab_size :
        RoBERTa shape; the defaults are ChemBERTa-2's same-shape baseline.
    dropout, attention_dropout : float
        Hidden (embeddings, residual branches, head) and attention-probability dropout.
    classifier_dropout : float or None
        The head's dropout where it differs (Hugging Face's ``config.classifier_dropout``; None:
        ``dropout``, as there).
    pad_id : int
        Padding token id (``[PAD]`` = 0 in DeepChem's vocabulary); also RoBERTa's position
        ``padding_idx``, so real tokens get positions ``pad_id + 1, pad_id + 2, ...``.
    layer_norm_eps : float
        LayerNorm epsilon (1e-12 as in RoBERTa).

    ``forward(input_ids, conj_flags=None, attention_mask=None)`` returns ``(batch, n_outputs)``.
    At most ``max_position_embeddings - pad_id - 1`` non-padding tokens per sequence (514 with the
    defaults) fit the position table; longer sequences raise ``ValueError``.
    """

    def __init__(self, vocab_size: int, n_outputs: int, d_model: int = 384, n_layers: int = 3,
                 n_heads: int = 12, intermediate_size: int = 464, max_position_embeddings: int = 515,
                 type_vocab_size: int = 2, dropout: float = 0.144, attention_dropout: float = 0.109,
                 pad_id: int = 0, layer_norm_eps: float = 1e-12, initializer_range: float = 0.02,
                 classifier_dropout: float | None = None):
        super().__init__()
        if not 0 <= pad_id < min(vocab_size, max_position_embeddings - 1):
            raise ValueError(f"pad_id={pad_id} must index the vocabulary ({vocab_size} tokens) and leave room for "
                             f"positions: max_position_embeddings={max_position_embeddings} must be at least "
                             f"pad_id + 2 (positions start after [PAD]'s id)")
        self.vocab_size = int(vocab_size)
        self.n_outputs = int(n_outputs)
        self.d_model = int(d_model)
        self.n_layers = int(n_layers)
        self.n_heads = int(n_heads)
        self.intermediate_size = int(intermediate_size)
        self.max_position_embeddings = int(max_position_embeddings)
        self.type_vocab_size = int(type_vocab_size)
        self.pad_id = int(pad_id)
        self.layer_norm_eps = float(layer_norm_eps)
        self.initializer_range = float(initializer_range)
        self.max_length = self.max_position_embeddings - self.pad_id - 1

        self.embeddings = RobertaEmbeddings(vocab_size, d_model, max_position_embeddings,
                                            type_vocab_size, pad_id, dropout, layer_norm_eps)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, intermediate_size, dropout, attention_dropout, layer_norm_eps)
            for _ in range(n_layers)
        )
        head_dropout = dropout if classifier_dropout is None else classifier_dropout
        self.head = ClassificationHead(d_model, n_outputs, head_dropout) if n_outputs else None
        self.reset_parameters()

    # ------------------------------------------------------------------ init
    def reset_parameters(self) -> None:
        """Hugging Face's scratch initialisation: N(0, 0.02) weights, zero biases and padding rows,
        LayerNorm weight 1 / bias 0."""
        std = self.initializer_range
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    m.weight.normal_(0.0, std)
                    if m.bias is not None:
                        m.bias.zero_()
                elif isinstance(m, nn.Embedding):
                    m.weight.normal_(0.0, std)
                    if m.padding_idx is not None:
                        m.weight[m.padding_idx].zero_()
                elif isinstance(m, nn.LayerNorm):
                    m.weight.fill_(1.0)
                    m.bias.zero_()

    def n_parameters(self, trainable_only: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # --------------------------------------------------------------- forward
    def _check_length(self, input_ids: torch.Tensor) -> None:
        t = input_ids.shape[1]
        if t <= self.max_length:
            return  # cheap path: no device sync
        n_real = int(input_ids.ne(self.pad_id).sum(dim=1).max())
        if n_real > self.max_length:
            raise ValueError(
                f"ChemBERTa: a sequence has {n_real} non-padding tokens, more than the "
                f"{self.max_length} that max_position_embeddings={self.max_position_embeddings} "
                f"allows with pad_id={self.pad_id}; truncate the input."
            )

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Final hidden states, shape (batch, T, d_model)."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, T), got shape {tuple(input_ids.shape)}")
        self._check_length(input_ids)
        if attention_mask is None:
            key_mask = input_ids.ne(self.pad_id)
        else:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask shape {tuple(attention_mask.shape)} does not match "
                                 f"input_ids shape {tuple(input_ids.shape)}")
            key_mask = attention_mask.bool() if attention_mask.dtype != torch.bool else attention_mask
        x = self.embeddings(input_ids)
        # Additive key-padding bias (batch, 1, 1, T) with the dtype's most negative value, as
        # Hugging Face does: an all-padding row softmaxes to uniform weights, never NaN.
        # Always built (no data-dependent branch, so no device sync and torch.compile-friendly).
        attn_bias = torch.zeros(key_mask.shape, dtype=x.dtype, device=x.device)
        attn_bias = attn_bias.masked_fill(~key_mask, torch.finfo(x.dtype).min)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, attn_bias)
        return x

    def forward(self, input_ids: torch.Tensor, conj_flags: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs (batch, n_outputs) from the first token.  ``conj_flags`` is ignored."""
        del conj_flags  # same signature as the Chem-GMNet model; RoBERTa has no use for it
        if self.head is None:
            raise RuntimeError("this ChemBERTa has no head (n_outputs=0); use encode()")
        return self.head(self.encode(input_ids, attention_mask))

    def pool(self, input_ids: torch.Tensor, conj_flags: torch.Tensor | None = None,
             attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The first ([CLS]) token's final state, (batch, d_model): what the head reads."""
        return self.encode(input_ids, attention_mask)[:, 0]

    def readout(self, z: torch.Tensor) -> torch.Tensor:
        """The head on pooled states (batch, d_model)."""
        if self.head is None:
            raise RuntimeError("this ChemBERTa has no head (n_outputs=0)")
        return self.head(z[:, None, :])

    # ------------------------------------------------------- Hugging Face I/O
    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True):
        """Load a Hugging Face RoBERTa state dict (``RobertaForSequenceClassification``,
        ``RobertaModel`` or ``RobertaForMaskedLM``).

        Keys that have no counterpart here by design (``lm_head.*``, ``pooler.*``, position and
        token-type id buffers, ``classifier.*`` when this module has no head) are skipped.  With
        ``strict=True`` every parameter of this module must be provided and every other key of
        ``state_dict`` must be one of those (a deeper encoder's extra layers are an error, not
        dropped); with ``strict=False`` missing ones (e.g. the classification head when loading a
        masked-LM checkpoint) keep their current values.  Nothing is copied unless every check
        passes.  Returns ``(missing, unexpected)`` key lists (names here / names in ``state_dict``).
        """
        own = self.state_dict()
        mapped, unexpected = {}, []
        for key, value in state_dict.items():
            new = hf_to_chemberta_key(key)
            if new is None or new not in own:
                unexpected.append(key)
                continue
            if tuple(value.shape) != tuple(own[new].shape):
                raise ValueError(f"shape mismatch for {key} -> {new}: "
                                 f"{tuple(value.shape)} vs {tuple(own[new].shape)}")
            mapped[new] = value
        missing = [k for k in own if k not in mapped]
        if strict and missing:
            hint = ("; pass n_outputs=0 for the encoder alone, or strict=False to keep a fresh head"
                    if all(k.startswith("head.") for k in missing) else "")
            raise KeyError(f"Hugging Face state dict lacks {missing}{hint}")
        unusable = [k for k in unexpected if not self._skipped_hf_key(k)]
        if strict and unusable:
            raise KeyError(f"Hugging Face state dict has {len(unusable)} weight(s) this {self.n_layers}-layer "
                           f"ChemBERTa has no place for: {unusable[:8]}{' ...' if len(unusable) > 8 else ''}")
        with torch.no_grad():
            params = dict(self.named_parameters())
            params.update(dict(self.named_buffers()))
            for k, v in mapped.items():
                params[k].copy_(v.to(dtype=params[k].dtype, device=params[k].device))
        return missing, unexpected

    def _skipped_hf_key(self, key: str) -> bool:
        """A Hugging Face RoBERTa key with no counterpart here by design (see load_hf_state_dict)."""
        key = key[len("roberta."):] if key.startswith("roberta.") else key
        return (key.startswith(("lm_head.", "pooler.")) or key in ("embeddings.position_ids", "embeddings.token_type_ids")
                or (self.head is None and key.startswith("classifier.")))

    @classmethod
    def from_hf(cls, model, n_outputs: int | None = None, strict: bool = True, **overrides) -> "ChemBERTa":
        """Build from a Hugging Face RoBERTa model (anything with ``.config`` and ``.state_dict()``).

        Shapes, pad id and dropouts come from ``model.config``; ``n_outputs`` defaults to
        ``config.num_labels``.  ``overrides`` replace constructor arguments (e.g. ``dropout``).
        """
        cfg = model.config
        if cfg.pad_token_id is None:  # positions are counted from it (RoBERTa's create_position_ids)
            raise ValueError("the Hugging Face config has pad_token_id=None; RoBERTa's positions need a padding id")
        hidden_dropout = cfg.hidden_dropout_prob
        kwargs = dict(
            vocab_size=cfg.vocab_size,
            n_outputs=cfg.num_labels if n_outputs is None else n_outputs,
            d_model=cfg.hidden_size,
            n_layers=cfg.num_hidden_layers,
            n_heads=cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size,
            max_position_embeddings=cfg.max_position_embeddings,
            type_vocab_size=cfg.type_vocab_size,
            dropout=hidden_dropout,
            attention_dropout=cfg.attention_probs_dropout_prob,
            pad_id=cfg.pad_token_id,
            layer_norm_eps=cfg.layer_norm_eps,
            initializer_range=getattr(cfg, "initializer_range", 0.02),
            classifier_dropout=getattr(cfg, "classifier_dropout", None),
        )
        act = getattr(cfg, "hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"only hidden_act='gelu' is supported, got {act!r}")
        if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        kwargs.update(overrides)
        net = cls(**kwargs)
        sd = model.state_dict()
        dtypes = {v.dtype for v in sd.values() if v.is_floating_point()}
        if len(dtypes) == 1:  # keep the source precision (e.g. a float64 reference model)
            net = net.to(dtype=dtypes.pop())
        net.load_hf_state_dict(sd, strict=strict)
        return net


class RobertaLMHead(nn.Module):
    """RoBERTa's masked-LM head: dense, GELU, LayerNorm, then the decoder whose weight is the
    word-embedding table (tied) with its own bias, as Hugging Face's ``RobertaLMHead``."""

    def __init__(self, word_embeddings: nn.Embedding, d_model: int, layer_norm_eps: float):
        super().__init__()
        vocab_size = word_embeddings.weight.shape[0]
        self.dense = nn.Linear(d_model, d_model)
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.decoder = nn.Linear(d_model, vocab_size)
        self.decoder.weight = word_embeddings.weight  # tied
        nn.init.zeros_(self.decoder.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(F.gelu(self.dense(hidden))))


class ChemBERTaForMaskedLM(nn.Module):
    """The baseline's encoder (a head-less :class:`ChemBERTa`, ``encoder``) with RoBERTa's masked-LM
    head (``lm_head``): Hugging Face's ``RobertaForMaskedLM`` in plain torch. After pretraining,
    ``encoder``'s weights are those of a property ``ChemBERTa`` minus its head."""

    tied_keys = {"lm_head.decoder.weight": "encoder.embeddings.word_embeddings.weight"}

    def __init__(self, vocab_size: int, d_model: int = 384, n_layers: int = 3, n_heads: int = 12,
                 intermediate_size: int = 464, max_position_embeddings: int = 515, type_vocab_size: int = 2,
                 dropout: float = 0.144, attention_dropout: float = 0.109, pad_id: int = 0,
                 layer_norm_eps: float = 1e-12, initializer_range: float = 0.02):
        super().__init__()
        self.encoder = ChemBERTa(vocab_size, 0, d_model, n_layers, n_heads, intermediate_size, max_position_embeddings,
                                 type_vocab_size, dropout, attention_dropout, pad_id, layer_norm_eps, initializer_range)
        self.lm_head = RobertaLMHead(self.encoder.embeddings.word_embeddings, d_model, layer_norm_eps)
        with torch.no_grad():  # Hugging Face's initialisation of the head
            self.lm_head.dense.weight.normal_(0.0, initializer_range)
            self.lm_head.dense.bias.zero_()

    def forward(self, input_ids, conj_flags=None, attention_mask=None):
        """Logits (B, T, V); ``conj_flags`` is ignored."""
        return self.lm_head(self.encoder.encode(input_ids, attention_mask))

    def masked_states(self, input_ids, conj_flags, attention_mask, labels):
        """Final states (M, d) and labels (M,) of the labelled (masked) positions only."""
        h = self.encoder.encode(input_ids, attention_mask)
        h, labels = h.reshape(-1, h.shape[-1]), labels.reshape(-1)
        keep = (labels != -100).nonzero().squeeze(1)
        return h.index_select(0, keep), labels.index_select(0, keep)

    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor]):
        """Load a Hugging Face ``RobertaForMaskedLM`` state dict (encoder and LM head); every
        parameter here must be provided, and nothing is copied unless all of them fit. Returns the
        keys of ``state_dict`` not used."""
        head = {f"lm_head.{name}": name for name in ("dense.weight", "dense.bias", "layer_norm.weight", "layer_norm.bias")}
        head.update({"lm_head.bias": "decoder.bias", "lm_head.decoder.bias": "decoder.bias"})
        own = dict(self.lm_head.named_parameters())
        # the head is checked first and copied last: the encoder's load copies only once its own
        # checks pass, so a failure anywhere leaves this module as it was
        for key in [k for k in state_dict if k in head]:
            if tuple(state_dict[key].shape) != tuple(own[head[key]].shape):
                raise ValueError(f"shape mismatch for {key}: {tuple(state_dict[key].shape)} vs {tuple(own[head[key]].shape)}")
        if "lm_head.decoder.weight" in state_dict:
            # tied to the word embeddings here (Hugging Face's default), so loaded with them; a
            # checkpoint trained untied (tie_word_embeddings=False) has a head this cannot hold
            embedding = next((v for k, v in state_dict.items() if k.endswith("embeddings.word_embeddings.weight")), None)
            if embedding is not None and not torch.equal(state_dict["lm_head.decoder.weight"], embedding):
                raise ValueError("lm_head.decoder.weight differs from the word embeddings (a checkpoint made "
                                 "with tie_word_embeddings=False): this masked-LM ties them, as "
                                 "RobertaForMaskedLM does by default, and cannot load an untied decoder")
        missing = sorted(set(own) - {head[k] for k in state_dict if k in head} - {"decoder.weight"})
        if missing:
            raise KeyError(f"Hugging Face state dict lacks {[f'lm_head.{name}' for name in missing]}")
        _, unexpected = self.encoder.load_hf_state_dict(state_dict, strict=True)
        with torch.no_grad():
            for key in [k for k in state_dict if k in head]:
                own[head[key]].copy_(state_dict[key].to(own[head[key]].dtype))
        return [k for k in unexpected if k not in head and k != "lm_head.decoder.weight"]


_LAYER_MAP = {
    "attention.self.query": "attention.query",
    "attention.self.key": "attention.key",
    "attention.self.value": "attention.value",
    "attention.output.dense": "attention.output",
    "attention.output.LayerNorm": "attention_norm",
    "intermediate.dense": "intermediate",
    "output.dense": "output",
    "output.LayerNorm": "output_norm",
}
_TOP_MAP = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.LayerNorm": "embeddings.layer_norm",
    "classifier.dense": "head.dense",
    "classifier.out_proj": "head.out_proj",
}


def hf_to_chemberta_key(key: str, n_layers: int | None = None) -> str | None:
    """Name in :class:`ChemBERTa` of a Hugging Face RoBERTa state-dict key, or None if it has none."""
    if key.startswith("roberta."):
        key = key[len("roberta."):]
    module, _, leaf = key.rpartition(".")
    if leaf in ("gamma", "beta"):  # very old checkpoints name LayerNorm parameters gamma/beta
        leaf = {"gamma": "weight", "beta": "bias"}[leaf]
    if leaf not in ("weight", "bias"):
        return None
    if module in _TOP_MAP:
        return f"{_TOP_MAP[module]}.{leaf}"
    if module.startswith("encoder.layer."):
        rest = module[len("encoder.layer."):]
        idx, _, sub = rest.partition(".")
        if not idx.isdigit() or sub not in _LAYER_MAP:
            return None
        if n_layers is not None and int(idx) >= n_layers:
            return None
        return f"layers.{idx}.{_LAYER_MAP[sub]}.{leaf}"
    return None
