"""Losses with missing labels (NaN) masked out, as in DeepChem's w = 0 convention."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class MaskedMSELoss(nn.Module):
    """Mean squared error over the observed (non-NaN) targets only."""

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        target = target.to(pred.dtype).reshape(pred.shape)
        observed = ~torch.isnan(target)
        diff = torch.where(observed, pred - torch.nan_to_num(target), torch.zeros_like(pred))
        return diff.pow(2).sum() / observed.sum().clamp_min(1)


class MaskedBCEWithLogitsLoss(nn.Module):
    """Multi-task binary cross-entropy over the observed labels only."""

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        target = target.to(logits.dtype).reshape(logits.shape)
        observed = ~torch.isnan(target)
        loss = F.binary_cross_entropy_with_logits(logits, torch.nan_to_num(target), reduction="none")
        return torch.where(observed, loss, torch.zeros_like(loss)).sum() / observed.sum().clamp_min(1)


class CrossEntropyLoss(nn.CrossEntropyLoss):
    """Single-task classification with C logits (2 for binary, as in the chemberta3 protocol)."""

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(logits, target.long().reshape(-1))
