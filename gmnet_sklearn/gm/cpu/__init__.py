"""Optional fused C++ kernels for CPU (compiled on first use with PyTorch's JIT extension builder).

DESIGN.md section 5: eager PyTorch spends the attention step on memory-bound passes over
(B, H, T, T) tensors; a fused kernel keeps every pair in registers. The kernel needs a C++ compiler
(and ninja) at first use; without them, or with ``GMNET_CPU_KERNELS=0``, `cpu_kernels_available()`
is False and the models use the eager fast path, which computes the same function.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path

import numpy as np
import torch

from .. import functional as F

__all__ = ["cpu_kernels_available", "dual_ska_cpu", "load_dual_ska"]

_log = logging.getLogger(__name__)
_SOURCE = Path(__file__).with_name("dual_ska.cpp")
_LANES = 8
_lock = threading.Lock()
_module = None
_failed: str | None = None


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


def load_dual_ska():
    """The compiled extension module, building it once per machine; None when it cannot be built."""
    global _module, _failed
    if _module is not None or _failed is not None or not _enabled():
        return _module
    with _lock:
        if _module is None and _failed is None:
            try:
                from torch.utils.cpp_extension import load

                _log.info("building the fused DualSKA CPU kernel (once per machine)")
                _module = load(
                    name=f"gmnet_dual_ska_{_cpu_tag()}",
                    sources=[str(_SOURCE)],
                    extra_cflags=["-O3", "-march=native"],
                    verbose=False,
                )
            except Exception as exc:  # no compiler, no ninja, read-only cache, ...
                _failed = f"{type(exc).__name__}: {exc}"
                _log.warning("fused CPU kernel unavailable, using the eager path (%s)", _failed.splitlines()[0])
    return _module


def cpu_kernels_available() -> bool:
    return load_dual_ska() is not None


def _coefficients(k: int, L: int) -> tuple[list, list, list, float]:
    a = F.zonal_coefficients(k, L).tolist()
    lam = (k - 2) / 2.0
    alpha = [0.0] + [2.0 * (n + lam) / (n + 2.0 * lam) for n in range(1, L + 1)]
    beta = [0.0] + [n / (n + 2.0 * lam) for n in range(1, L + 1)]
    return a, alpha, beta, 1.0 / float(np.sqrt(F.harmonic_dim(k, L)))


def _block(x: torch.Tensor) -> torch.Tensor:
    """(R, T, c) rows -> (R / 8, T, c, 8), rows zero-padded to a multiple of 8 lanes."""
    R = x.shape[0]
    pad = (-R) % _LANES
    if pad:
        x = torch.cat([x, x.new_zeros(pad, *x.shape[1:])], 0)
    return x.view(-1, _LANES, *x.shape[1:]).movedim(1, -1).contiguous()


def _unblock(x: torch.Tensor, R: int) -> torch.Tensor:
    return x.movedim(-1, 1).reshape(-1, *x.shape[1:-1])[:R]


class _DualSKACPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, p, log_gamma, mask, L):
        ext = load_dual_ska()
        B, H, T, kd = q.shape
        R = B * H
        coeffs = _coefficients(kd, L)
        qb, kb, pb = (_block(x.reshape(R, T, kd)) for x in (q, k, p))
        gb = _block(log_gamma.exp().reshape(R, T, L + 1))
        mb = _block(mask[:, None, :, None].expand(B, H, T, 1).reshape(R, T, 1).to(q.dtype))[:, :, 0]
        y, cv = ext.forward(qb, kb, pb, gb, mb, *coeffs)
        ctx.save_for_backward(qb, kb, pb, gb, mb, cv)
        ctx.meta = (B, H, T, kd, L, coeffs)
        return _unblock(y, R).view(B, H, T, kd), _unblock(cv, R).view(B, H, T, kd)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gy, gcv):
        B, H, T, kd, L, coeffs = ctx.meta
        R = B * H
        qb, kb, pb, gb, mb, cv = ctx.saved_tensors
        gy = torch.zeros(B, H, T, kd, dtype=qb.dtype) if gy is None else gy
        gcv = torch.zeros(B, H, T, kd, dtype=qb.dtype) if gcv is None else gcv
        gyb, gcb = (_block(g.reshape(R, T, kd)) for g in (gy, gcv))
        gq, gk, gp, glg = load_dual_ska().backward(qb, kb, pb, gb, mb, cv, gyb, gcb, *coeffs)
        shape = (B, H, T, kd)
        return (_unblock(gq, R).view(shape), _unblock(gk, R).view(shape), _unblock(gp, R).view(shape),
                _unblock(glg, R).view(B, H, T, L + 1), None, None)


def dual_ska_cpu(q, k, p, log_gamma, mask, L: int):
    """Both DualSKA branches through the fused CPU kernel: (y_sfa, cv), each (B, H, T, k).

    Same contract as `attention.gated_sfa.sfa_parallel(..., causal=False)` and
    `attention.ska.ska_zonal`: q, k on the sphere, p zero and log-gates zero at padding.
    """
    if load_dual_ska() is None:
        raise RuntimeError(f"the fused CPU kernel is not available: {_failed or 'disabled by GMNET_CPU_KERNELS=0'}")
    return _DualSKACPU.apply(q, k, p, log_gamma, mask.bool(), L)
