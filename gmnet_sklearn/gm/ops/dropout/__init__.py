"""The dropout op and its one dispatch.

Forms: `naive` ("reference": the kernel's counter-based mask in NumPy, applied by autograd; the
same tensor as "cpu" for the same seed), torch's own dropout ("parallel") and `cpu` (the C++
kernel). "auto" runs the kernel for training-mode dropout of CPU float tensors when it builds
(not in place), else torch's.
"""

from __future__ import annotations

import torch
from torch.nn import functional as torch_F

from ... import cpu as cpu_extension
from ..impl import check_impl, resolve_auto
from .cpu import dropout_cpu
from .naive import dropout_reference, dropout_threshold, keep_mask_reference

__all__ = ["dropout", "select", "dropout_cpu", "dropout_reference", "dropout_threshold", "keep_mask_reference"]


def select(impl: str, x: torch.Tensor, p: float, training: bool, inplace: bool) -> str:
    """The form that runs: "cpu", "reference" or "parallel" (also every no-op: eval, p = 0)."""
    impl = resolve_auto("dropout", check_impl(impl))
    if impl == "triton":
        raise ValueError("dropout has no Triton form (impl: 'auto', 'reference', 'parallel' or 'cpu')")
    if not (training and 0.0 < p < 1.0):
        return "parallel"
    if impl == "auto":
        cpu_float = x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
        return "cpu" if not inplace and cpu_float and cpu_extension.cpu_kernels_available() else "parallel"
    return impl


def dropout(x: torch.Tensor, p: float, training: bool = True, inplace: bool = False, impl: str = "auto") -> torch.Tensor:
    """``torch.nn.functional.dropout``'s contract in a `select`ed form ("cpu" and "reference"
    draw their seed from torch's global generator and never write in place)."""
    form = select(impl, x, p, training, inplace)
    if form == "cpu":
        return dropout_cpu(x, p)
    if form == "reference":
        return dropout_reference(x, p)
    return torch_F.dropout(x, p, training, inplace)
