"""Optional fused C++ kernels for CPU (compiled on first use with PyTorch's JIT extension builder).

docs/architecture.md, performance notes: eager PyTorch spends the attention step on memory-bound passes over
(B, H, T, T) tensors; a fused kernel keeps every pair in registers (`dual_ska.cpp`). The Phi
read-out builds its monomials per chunk of tokens in cache and multiplies them there
(`sphere_readout.cpp`, used by `functional.sphere_readout`). The build needs a C++ compiler
(and ninja) at first use; without them, or with ``GMNET_CPU_KERNELS=0``, `cpu_kernels_available()`
is False and the models use the eager fast path, which computes the same function.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .. import functional as F

__all__ = ["cpu_kernels_available", "dropout_cpu", "dual_ska_cpu", "dual_ska_cpu_fm", "dual_ska_supported",
           "kernels_disabled", "load_extension"]

# Limits of the DualSKA kernel's fixed-size arrays (dual_ska.cpp: MAXL, and the per-row buffers).
MAX_K, MAX_L = 64, 8

_log = logging.getLogger(__name__)
_SOURCE = Path(__file__).with_name("extension.cpp")  # includes dual_ska.cpp, sphere_readout.cpp, dropout.cpp
_lock = threading.Lock()
_module = None
_failed: str | None = None
_disabled = 0  # depth of `kernels_disabled` blocks


def _enabled() -> bool:
    return os.environ.get("GMNET_CPU_KERNELS", "1").strip().lower() not in ("0", "false", "off", "no")


def _cpu_tag() -> str:
    """Builds use -march=native, so the build folder is keyed by the CPU's feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next((line for line in text.splitlines() if line.startswith("flags")), text[:200])
    except OSError:
        import platform

        flags = platform.processor() or platform.machine()
    return hashlib.sha1(flags.encode()).hexdigest()[:10]


@contextmanager
def kernels_disabled():
    """Within the block the kernels count as unavailable, so the models take the pure-PyTorch
    path of a machine without a compiler (benchmarks time both paths in one process)."""
    global _disabled
    _disabled += 1
    try:
        yield
    finally:
        _disabled -= 1


def load_extension():
    """The compiled extension module (gm/cpu/extension.cpp), built once per machine; None when it
    cannot be built or is disabled (``GMNET_CPU_KERNELS=0``, `kernels_disabled`)."""
    global _module, _failed
    if _disabled:
        return None
    if _module is not None or _failed is not None or not _enabled():
        return _module
    with _lock:
        if _module is None and _failed is None:
            try:
                from torch.utils.cpp_extension import load

                _log.info("building the fused CPU kernels (once per machine)")
                _module = load(
                    name=f"gmnet_cpu_kernels_{_cpu_tag()}",
                    sources=[str(_SOURCE)],
                    # -fopenmp: at::parallel_for is OpenMP in torch's CPU builds; without the flag
                    # the kernels' parallel loops would silently run on one thread.
                    extra_cflags=["-O3", "-march=native", "-fopenmp"],
                    extra_ldflags=["-fopenmp"],
                    verbose=False,
                )
            except Exception as exc:  # no compiler, no ninja, read-only cache, ...
                _failed = f"{type(exc).__name__}: {exc}"
                _log.warning("fused CPU kernel unavailable, using the eager path (%s)", _failed.splitlines()[0])
    return _module


def cpu_kernels_available() -> bool:
    return load_extension() is not None


def dual_ska_supported(k: int, L: int) -> bool:
    """Shapes the DualSKA kernel takes (others run the eager path)."""
    return k <= MAX_K and L <= MAX_L


@lru_cache(maxsize=64)  # once per shape, not per forward
def _coefficients(k: int, L: int) -> tuple[tuple, tuple, tuple, float]:
    a = tuple(F.zonal_coefficients(k, L).tolist())
    lam = (k - 2) / 2.0
    alpha = (0.0, *(2.0 * (n + lam) / (n + 2.0 * lam) for n in range(1, L + 1)))
    beta = (0.0, *(n / (n + 2.0 * lam) for n in range(1, L + 1)))
    return a, alpha, beta, 1.0 / float(np.sqrt(F.harmonic_dim(k, L)))


class _DualSKACPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkp, log_gamma, mask, L, eps):
        args = (*_coefficients(qkp.shape[-1], L), eps)
        ctx.ext = load_extension()  # the backward uses the same module
        y, cv = ctx.ext.dual_ska_forward(qkp, log_gamma, mask, *args)
        ctx.save_for_backward(qkp, log_gamma, mask, cv)
        ctx.args = args
        return y, cv

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy, gcv):
        qkp, log_gamma, mask, cv = ctx.saved_tensors
        gy = torch.zeros_like(cv) if gy is None else gy.contiguous()
        gcv = torch.zeros_like(cv) if gcv is None else gcv.contiguous()
        g_qkp, g_lg = ctx.ext.dual_ska_backward(qkp, log_gamma, mask, cv, gy, gcv, *ctx.args)
        return g_qkp, g_lg, None, None, None


def _check_available():
    if load_extension() is None:
        raise RuntimeError(f"the fused CPU kernel is not available: {_failed or 'disabled by GMNET_CPU_KERNELS=0'}")


def dual_ska_cpu_fm(qkp: torch.Tensor, log_gamma: torch.Tensor, mask: torch.Tensor, L: int, eps: float = 1e-6):
    """Both DualSKA branches from the raw projections, in the layouts the module already has.

    qkp (B, T, 3, H, k): the fused q/k/p projection before normalising q, k and masking p (the
    kernel does both, and their backward); log_gamma (B, H, T, L+1), zero at padding; mask (B, T).
    Returns y_sfa and cv, each (H, k, B*T): the feature-major layout of the Phi read-out. Outputs
    at padded query positions are not used by the model and may differ from the references' (the
    kernel skips positions that are padding for a whole SIMD block of rows, leaving them zero).
    """
    _check_available()
    if qkp.device.type != "cpu" or qkp.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the CPU kernel takes float32/float64 CPU tensors, got {qkp.dtype} on {qkp.device}")
    return _DualSKACPU.apply(qkp.contiguous(), log_gamma.to(qkp.dtype).contiguous(), mask.bool().contiguous(), L, eps)


def dual_ska_cpu(q, k, p, log_gamma, mask, L: int, eps: float = 1e-6):
    """(y_sfa, cv), each (B, H, T, k), from q, k, p (B, H, T, k) (q, k raw: normalised inside).

    Equal to `attention.bidir_sfa.bidir_sfa_parallel(normalise(q), normalise(k), p, ...)` and
    `attention.ska.ska_zonal(...)` with p zeroed at padding. For tests and direct use; the module
    calls `dual_ska_cpu_fm` on its projection directly.
    """
    _check_available()
    B, H, T, kd = q.shape
    qkp = torch.stack([q, k, p], 0).permute(1, 3, 0, 2, 4)  # (B, T, 3, H, k)
    y, cv = dual_ska_cpu_fm(qkp, log_gamma, mask, L, eps)
    return tuple(o.view(H, kd, B, T).permute(2, 0, 3, 1) for o in (y, cv))


class _DropoutCPU(torch.autograd.Function):
    # The mask is never stored: the backward recomputes it from the seed (with the module the
    # forward used, even if the kernels are disabled in between).
    @staticmethod
    def forward(ctx, x, seed, threshold, scale):
        ctx.ext, ctx.args = load_extension(), (seed, threshold, scale)
        return ctx.ext.dropout_apply(x, seed, threshold, scale)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return ctx.ext.dropout_apply(grad, *ctx.args), None, None, None


def dropout_threshold(p: float) -> int:
    """The 32-bit draw below which an element is dropped: round(p * 2^32), at most 2^32 - 1."""
    return min(int(round(float(p) * 2.0**32)), 2**32 - 1)


def dropout_cpu(x: torch.Tensor, p: float, seed: int | None = None) -> torch.Tensor:
    """Training-mode dropout, x * keep / (1 - p), with the counter-based mask of `dropout.cpp`.

    ``seed`` (0 <= seed < 2^63) fixes the mask; by default it is drawn from torch's global
    generator, so ``torch.manual_seed`` makes runs repeatable as with ``nn.Dropout``. The mask of
    element i (row-major) is `gm.dropout.keep_mask_reference(numel, p, seed)[i]`.
    """
    _check_available()
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the CPU kernel takes float32/float64 CPU tensors, got {x.dtype} on {x.device}")
    if seed is None:
        seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    return _DropoutCPU.apply(x, int(seed), dropout_threshold(p), 1.0 / (1.0 - p))
