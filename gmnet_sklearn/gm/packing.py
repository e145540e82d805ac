"""Token packing: run the position-wise work of a padded batch on its real tokens only.

Everything in a Chem-GMNet block except the attention's pairwise part acts on each position
alone (LayerNorm, the q/k/p projections, the Phi read-outs, SH-FFN, dropout, residuals), and no
real token's output depends on a padded position (padded keys carry p = 0 and are masked, their
gates are transparent, pooling skips them). So those steps can run on the N real tokens of a
(B, T) batch, laid out as (N, ...), instead of on all B*T positions: on uniformly shuffled
batches, padded to their longest SMILES, that is about half the work (ESOL: 23 real tokens per
row of width 55). Only the attention's pairwise part needs the (B, T) layout; it is scattered
into it and gathered back out (`unpack`, `pack`, `pack_columns`).

The padded forward is the reference: the packed one gives the same real-token outputs and
gradients (tests/test_packing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TokenPacking:
    """Where the real tokens of a (B, T) batch sit in the packed (N, ...) layout.

    ``index`` (N,): flat positions b*T + t of the real tokens, in row-major order; ``batch`` (N,):
    the row (molecule) of each; ``lengths`` (B,): real tokens per row.
    """

    index: torch.Tensor
    batch: torch.Tensor
    lengths: torch.Tensor
    B: int
    T: int

    @classmethod
    def from_mask(cls, mask: torch.Tensor) -> "TokenPacking":
        """From a (B, T) mask, True at real tokens (any pattern, not only right padding)."""
        if mask.dim() != 2:
            raise ValueError(f"the padding mask must be (B, T), got shape {tuple(mask.shape)}")
        mask = mask.bool()
        B, T = mask.shape
        index = mask.reshape(-1).nonzero().squeeze(1)
        return cls(index=index, batch=torch.div(index, T, rounding_mode="floor"), lengths=mask.sum(1), B=B, T=T)

    @property
    def n_tokens(self) -> int:
        return int(self.index.numel())

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) -> (N, ...): the real tokens' rows."""
        return x.reshape(self.B * self.T, *x.shape[2:]).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, T, ...), zeros at padded positions."""
        full = x.new_zeros((self.B * self.T, *x.shape[1:]))
        return full.index_copy(0, self.index, x).view(self.B, self.T, *x.shape[1:])

    def pack_columns(self, x: torch.Tensor) -> torch.Tensor:
        """(..., B*T) -> (..., N): the feature-major layout of the read-outs."""
        return x.index_select(-1, self.index)

    def mean_pool(self, h: torch.Tensor) -> torch.Tensor:
        """Per-molecule mean of packed states (N, d): (B, d), zeros for rows with no tokens."""
        sums = h.new_zeros((self.B, h.shape[-1])).index_add(0, self.batch, h)
        return sums / self.lengths.clamp_min(1).to(h.dtype).unsqueeze(-1)
