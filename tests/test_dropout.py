"""Chem-GMNet's dropout (gm/dropout.py): the counter-based CPU mask against its NumPy reference.

The kernel's keep mask must equal `keep_mask_reference` element for element (forward and
backward), have the right keep rate without correlation between the neighbours that share one
hash, repeat under torch.manual_seed, and the module must behave as nn.Dropout elsewhere.
"""

import numpy as np
import pytest
import torch
from torch import nn

from gmnet_sklearn.gm import cpu as cpu_kernels
from gmnet_sklearn.gm.dropout import Dropout
from gmnet_sklearn.gm.ops.dropout import dropout_cpu, dropout_threshold, keep_mask_reference

needs_kernel = pytest.mark.skipif(not cpu_kernels.cpu_kernels_available(), reason="fused CPU kernel could not be built")


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(1,), (15,), (16,), (17,), (3, 7, 5), (64, 384)])
@pytest.mark.parametrize("p", [0.144, 0.5, 0.9])
def test_kernel_mask_equals_reference_forward_and_backward(dtype, shape, p):
    seed = 2**62 + 12345  # high bits in use
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    y = dropout_cpu(x, p, seed=seed)
    keep = torch.from_numpy(keep_mask_reference(x.numel(), p, seed)).view(shape)
    scale = 1.0 / (1.0 - p)
    assert torch.equal(y.detach(), torch.where(keep, x.detach() * scale, torch.zeros((), dtype=dtype)))
    g = torch.randn(shape, dtype=dtype)
    y.backward(g)
    assert torch.equal(x.grad, torch.where(keep, g * scale, torch.zeros((), dtype=dtype)))


@needs_kernel
def test_kernel_takes_non_contiguous_input_row_major():
    x = torch.randn(40, 30).t()
    keep = torch.from_numpy(keep_mask_reference(x.numel(), 0.3, 7)).view(30, 40)
    assert torch.equal(dropout_cpu(x, 0.3, seed=7) != 0, keep & (x != 0))


def test_reference_keep_rate_and_neighbour_independence():
    n, p = 2_000_000, 0.144
    keep = keep_mask_reference(n, p, seed=3)
    sd = np.sqrt(p * (1 - p) / n)
    assert abs(keep.mean() - (1 - p)) < 5 * sd
    pairs = keep.reshape(-1, 2)  # the two halves of one hash
    both = pairs.all(1).mean()
    assert abs(both - (1 - p) ** 2) < 5 * np.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / (n // 2))
    shifted = (keep[1:-1:2] & keep[2::2]).mean()  # neighbours from consecutive hashes
    assert abs(shifted - (1 - p) ** 2) < 5 * np.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / (n // 2))
    other = keep_mask_reference(n, p, seed=4)
    assert abs((keep & other).mean() - (1 - p) ** 2) < 5 * np.sqrt((1 - p) ** 2 / n)  # seeds independent


def test_threshold_resolution():
    assert dropout_threshold(0.0) == 0
    assert dropout_threshold(0.5) == 2**31
    assert dropout_threshold(1.0 - 1e-12) == 2**32 - 1  # stays in the kernel's range


@needs_kernel
def test_module_repeats_under_manual_seed_and_draws_fresh_masks():
    drop = Dropout(0.25).train()
    x = torch.ones(1000)
    torch.manual_seed(0)
    a, b = drop(x), drop(x)
    torch.manual_seed(0)
    assert torch.equal(drop(x), a) and torch.equal(drop(x), b)
    assert not torch.equal(a, b)
    assert set(torch.unique(a).tolist()) == {0.0, torch.tensor(1.0 / 0.75).item()}


def test_module_is_nn_dropout_in_eval_and_without_kernels():
    drop = Dropout(0.3)
    assert isinstance(drop, nn.Dropout) and drop.p == 0.3
    x = torch.randn(50, 20)
    assert torch.equal(drop.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    drop.train()
    with cpu_kernels.kernels_disabled():
        assert not cpu_kernels.cpu_kernels_available()
        torch.manual_seed(1)
        ours = drop(x)
    torch.manual_seed(1)
    assert torch.equal(ours, nn.Dropout(0.3).train()(x))  # torch's own draws


@needs_kernel
def test_kernel_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dropout_cpu(torch.ones(3), 1.0)
    with pytest.raises(ValueError, match="float32/float64"):
        dropout_cpu(torch.ones(3, dtype=torch.float16), 0.1)


@needs_kernel
def test_backward_uses_the_forward_kernels_even_when_disabled_in_between():
    x = torch.randn(64, requires_grad=True)
    y = dropout_cpu(x, 0.4, seed=9)
    with cpu_kernels.kernels_disabled():
        y.sum().backward()
    assert torch.equal(x.grad != 0, y.detach() != 0)
