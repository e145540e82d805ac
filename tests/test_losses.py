"""The losses that mask missing labels (NaN): a missing cell adds neither loss nor gradient, and
the mean is over the observed cells only (DeepChem's w = 0)."""

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from gmnet_sklearn.estimators.losses import MaskedBCEWithLogitsLoss, MaskedMSELoss


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    pred = torch.randn(7, 3, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.randn(7, 3, generator=g, dtype=torch.float64)
    target[[0, 2, 5], [1, 1, 2]] = float("nan")
    target[4] = float("nan")  # a row without any label
    return pred, target


@pytest.mark.parametrize("loss_cls, reference", [
    (MaskedMSELoss, lambda p, t: (p - t) ** 2),
    (MaskedBCEWithLogitsLoss, lambda p, t: F.binary_cross_entropy_with_logits(p, t, reduction="none")),
])
def test_missing_labels_add_no_loss_and_no_gradient(loss_cls, reference):
    pred, target = _data()
    if loss_cls is MaskedBCEWithLogitsLoss:
        target = torch.where(torch.isnan(target), target, (target > 0).double())
    observed = ~torch.isnan(target)
    loss = loss_cls()(pred, target)
    expected = reference(pred[observed], target[observed]).mean()  # over the observed cells only
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert torch.isfinite(pred.grad).all()
    assert (pred.grad[~observed] == 0).all() and (pred.grad[observed] != 0).all()
    # changing a prediction where the label is missing changes nothing
    moved = pred.detach().clone()
    moved[~observed] += 100.0
    torch.testing.assert_close(loss_cls()(moved, target), expected.detach())


@pytest.mark.parametrize("loss_cls", [MaskedMSELoss, MaskedBCEWithLogitsLoss])
def test_a_batch_without_labels_has_zero_loss_not_nan(loss_cls):
    pred = torch.randn(4, 2, requires_grad=True)
    loss = loss_cls()(pred, torch.full((4, 2), float("nan")))
    assert loss.item() == 0.0
    loss.backward()
    assert (pred.grad == 0).all()


def test_a_one_task_target_is_read_in_the_predictions_shape():
    pred = torch.tensor([[0.5], [1.0], [2.0]])
    target = np.array([1.0, np.nan, 0.0])  # (n,) for a (n, 1) output
    loss = MaskedMSELoss()(pred, torch.as_tensor(target))
    assert loss.item() == pytest.approx(((0.5 - 1.0) ** 2 + 2.0 ** 2) / 2)
