"""Masked-language-model heads for Chem-GMNet pretraining.

``"sphere"`` (:class:`SphereLMHead`), factored through the sphere:
logits_v = sum_l w_l P_l(z^ . P^_v) + b_v: the hidden state is mapped to a direction z^ on
S^{k-1} and scored against every token's embedding direction P^_v through a per-degree Gegenbauer
kernel (the zonal identity makes this O(V k), never O(V D*)). It shares P with the SH-Embedding.

``"linear"`` (:class:`LinearLMHead`, the default): RoBERTa's head (dense, GELU, LayerNorm, a
Linear(d, V) decoder), as the ChemBERTa baseline has. Why it is the default: the sphere head
scores 591 tokens through an 8-dimensional direction and 4 degree weights, and learns slowly; on
MOSES at the library's shape (pretrain's seed 0, lr 5e-4, batch 256) the sphere head's held-out
masked-LM loss after 250 steps was 5.21 (masked-token accuracy 0.21), the linear head's 1.51
(0.52; DEVELOPERS.md "Pretraining"). Only the encoder is kept for fine-tuning, so the head is a
pretraining choice and both families then learn through the same kind of head.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as torch_F

from . import functional as F
from .transformer import GMNetEncoder

#: The initial head's logit at z = P_v (the kernel's peak): large enough for confident predictions
#: early on, small enough that an untrained model scores about log V (6.7 against 6.4 at the
#: paper's shape with DeepChem's 591 tokens; 1 gives 6.4 but learns slowly, 10 gives 8.0).
LOGIT_SCALE = 5.0


class SphereLMHead(nn.Module):
    def __init__(self, embedding_directions: nn.Parameter, d_model: int, L: int):
        super().__init__()
        vocab_size, k = embedding_directions.shape
        self.k, self.L = k, L
        self.P = embedding_directions  # tied with the SH-Embedding's token directions
        self.dense = nn.Linear(d_model, d_model)
        self.layer_norm = nn.LayerNorm(d_model)
        self.to_sphere = nn.Linear(d_model, k, bias=False)
        # Start as the plain Gegenbauer kernel Phi(z).Phi(P_v), normalised to LOGIT_SCALE at z = P_v:
        # logits start within +-5 and the masked-LM loss near log V whatever k and L. (The kernel's
        # own scale, sum_l N(k, l) / |S^{k-1}|, is 4.8 at k = 8, L = 3; ten times that started the
        # paper's shape at a loss of 32 against log 591 = 6.4.) The degree weights are trained.
        a = F.zonal_coefficients(k, L)
        self.degree_weight = nn.Parameter(torch.as_tensor(a / a.sum() * LOGIT_SCALE, dtype=torch.float32))
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm(torch_F.gelu(self.dense(hidden)))
        z = F.normalise(self.to_sphere(h))
        cos = z @ F.normalise(self.P).T  # (..., V)
        return F.gegenbauer_normalised(self.L, self.k, cos) @ self.degree_weight + self.bias


class LinearLMHead(nn.Module):
    """RoBERTa's masked-LM head: dense -> GELU -> LayerNorm -> Linear(d, V) (weights N(0, 0.02), as
    RoBERTa initialises them; the untrained model scores about log V). Not the baseline's
    ``baselines.chemberta.RobertaLMHead``: that one ties its decoder to a (V, d) word-embedding
    table, which Chem-GMNet (tokens as directions on S^{k-1}) does not have."""

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.layer_norm = nn.LayerNorm(d_model)
        self.decoder = nn.Linear(d_model, vocab_size)
        with torch.no_grad():
            for layer in (self.dense, self.decoder):
                layer.weight.normal_(0.0, 0.02)
                layer.bias.zero_()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(torch_F.gelu(self.dense(hidden))))


LM_HEADS = ("linear", "sphere")


class GMNetForMaskedLM(nn.Module):
    """Encoder + LM head (``lm_head``: "linear" or "sphere"); ``encoder`` can be copied into a
    ``GMNet`` after pretraining."""

    def __init__(self, vocab_size: int, k: int = 8, L: int = 3, d_model: int = 384, n_layers: int = 3,
                 n_heads: int = 12, dropout: float = 0.144, attention: str = "dual_ska", activation="gelu",
                 adaptive: bool = False, conj_shift: float = 1.0, pad_id: int = 0, lm_head: str = "linear"):
        super().__init__()
        if lm_head not in LM_HEADS:
            raise ValueError(f"lm_head must be one of {LM_HEADS}, got {lm_head!r}")
        self.encoder = GMNetEncoder(vocab_size, k, L, d_model, n_layers, n_heads, dropout, attention, activation,
                                    adaptive, conj_shift, pad_id=pad_id)
        if lm_head == "sphere":
            self.lm_head = SphereLMHead(self.encoder.embedding.P, d_model, L)
            # the head scores against the embedding's directions: one tensor, stored once
            self.tied_keys = {"lm_head.P": "encoder.embedding.P"}
        else:
            self.lm_head = LinearLMHead(d_model, vocab_size)
            self.tied_keys = {}

    def forward(self, input_ids, conj_flags=None, attention_mask=None, labels=None):
        """Logits (B, T, V); with ``labels`` (-100 = ignore) returns (loss, logits)."""
        logits = self.lm_head(self.encoder(input_ids, conj_flags, attention_mask))
        if labels is None:
            return logits
        loss = torch_F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return loss, logits

    def masked_states(self, input_ids, conj_flags, attention_mask, labels):
        """Final states (M, d) and labels (M,) of the M labelled (masked) positions only: the
        head then scores M rows, not B x T. On CPU the encoder runs on the real tokens only."""
        if input_ids.device.type == "cpu":
            h, packing = self.encoder.forward_packed(input_ids, conj_flags, attention_mask)
            labels = packing.pack(labels)
        else:
            h = self.encoder(input_ids, conj_flags, attention_mask)
            h, labels = h.reshape(-1, h.shape[-1]), labels.reshape(-1)
        keep = (labels != -100).nonzero().squeeze(1)
        return h.index_select(0, keep), labels.index_select(0, keep)
