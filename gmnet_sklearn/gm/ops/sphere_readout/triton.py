"""Fused Triton kernels for the Phi read-out: sum_b s_b W_g @ monomials(normalise(z_b)) (``impl="triton"``).

Why: the other forms materialise every monomial of every token, (G, n_monomials, N) per branch
(165 per token and group at k = 8, L = 3), write it to memory, read it back for the matmul, and
keep it for the backward. At large batches, where launches no longer matter, that traffic is the
likely cost of the read-outs of the attention, the SH-FFN and the SH-embedding (profiled on CPU,
the reference form's gathers, multiplies and scatter-adds are about half of a padded training
step; on an H100 this form was the faster one in inference and at large training batches, and
since the backward's rework on an H200 at batch 32 too: `cuda_auto_form`). Here a program takes one group,
a block of BN tokens and a block of CB output channels; it normalises its tokens' z in registers
and builds the monomials chunk by chunk (MC at a time) as products of at most L gathered
coordinates (a host-side table lists each monomial's variables, ``k`` standing for the constant 1),
feeding each chunk straight into `tl.dot` with the matching columns of W. Nothing monomial-wide
reaches memory.

Backward, two kernels. The input gradients: one program per (group, token block), channels looped
over; per monomial chunk, dM = W^T dOut (the gradient of the fused monomials), ds_b += sum(dM * M_b),
and dx_b via the product rule: each factor's coordinate gets dM times the product of the other
factors, gathered back onto the k coordinates with a one-hot `tl.dot`. For L <= 4 the chunk's L
factors are gathered once and the "others" are products of registers (the first kernel gathered
them again for every factor: L + L(L-1) gathers a chunk instead of L, and the backward took 4.4x
the forward on an H100), one branch at a time so that only one branch's factors are live. The
normalisation's backward then runs in registers. The weight gradient
dW = dOut M^T: one program per (group, channel block, monomial chunk, token slice), summing its
slice's token blocks in registers; the slices' partial sums are added by torch, so the weight
gradient is deterministic (the scales' gradient is still summed by atomics; ``WEIGHT_GRAD = "split"``; ``"atomic"`` is the first form: float32 atomics from every
token block of the input-gradient kernel, kept to be measured beside it). On an H100 at batch 1024
the two kernels take 20.2 ms a training step where the first form took 29.8 ms
(benchmarks/results/profile_step_cuda_h100_*.log), and masked-LM pretraining runs at 16,500-16,900
SMILES/s against 14,400 (pretrain_throughput_cuda_backward_highest.json, the forms interleaved).

Arithmetic is float32 (inputs of other dtypes are cast, gradients cast back) and every `tl.dot`
asks for IEEE precision unless PyTorch's float32 matmul precision allows TF32, as the DualSKA
kernel does. Reference: `naive.py` (the tests compare forward and backward, odd sizes, zero
vectors, one and two branches, with and without scales).
Tiles: the fastest of benchmarks/readout_tiles.py's settings on an H200 (`tiles` below).
A second form (`triton_gemm.py`) writes the monomials once and leaves the three matmuls to
cuBLAS; it ships (`FORM`), this one is kept beside it.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ... import functional as F
from ...triton import dot_precision, module_settings

__all__ = ["sphere_readout_triton", "SphereReadoutTriton", "INTERPRETED", "FORMS", "form", "BACKWARD_FORMS",
           "backward_form", "tiles"]


@triton.jit
def _monomial_chunk(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, L: tl.constexpr, SKIP: tl.constexpr):
    """(MC, BN): the monomials mm of the normalised tokens n, leaving out factor SKIP (-1: none)."""
    out = tl.full((mm.shape[0], n.shape[0]), 1.0, tl.float32)
    for j in tl.static_range(L):
        if j != SKIP:
            v = tl.load(IDX + mm * L + j, mask=mmask, other=k)
            real = v < k
            x = tl.load(Z + zg + v[:, None] * szk + n[None, :] * szn, mask=real[:, None] & nmask[None, :], other=0.0)
            out = out * tl.where(real[:, None], x.to(tl.float32) * inv[None, :], 1.0)
    return out


@triton.jit
def _variable(IDX, mm, mmask, k, L: tl.constexpr, j: tl.constexpr):
    """(MC,): factor j's coordinate of each monomial of the chunk, ``k`` where it has fewer factors."""
    if j < L:
        v = tl.load(IDX + mm * L + j, mask=mmask, other=k)
    else:
        v = tl.zeros(mm.shape, tl.int32) + k
    return v


@triton.jit
def _factor(Z, zg, szk, szn, n, nmask, inv, v, k):
    """(MC, BN): the normalised coordinate v of the tokens n, 1 where v is ``k`` (no factor)."""
    real = v < k
    x = tl.load(Z + zg + v[:, None] * szk + n[None, :] * szn, mask=real[:, None] & nmask[None, :], other=0.0)
    return tl.where(real[:, None], x.to(tl.float32) * inv[None, :], 1.0)


@triton.jit
def _scale(S, g, NB: tl.constexpr, b: tl.constexpr):
    """Branch b's scale of group g (the wrapper passes ones when the read-out has no scales)."""
    return tl.load(S + g * NB + b).to(tl.float32)


@triton.jit
def _inverse_norms(Z, zg, szk, szn, kk, n, nmask, k, eps):
    z = tl.load(Z + zg + kk[:, None] * szk + n[None, :] * szn, mask=(kk < k)[:, None] & nmask[None, :], other=0.0)
    z = z.to(tl.float32)
    r = tl.maximum(tl.sqrt(tl.sum(z * z, 0)), eps).to(tl.float32)  # (torch.compile may pass eps as float64)
    return z, r, 1.0 / r


@triton.jit
def _readout_fwd_kernel(W, Z0, Z1, S, IDX, OUT, N, C, NM, k, eps,
                        swg, swc, swm, s0g, s0k, s0n, s1g, s1k, s1n, sog, soc, son,
                        NB: tl.constexpr, L: tl.constexpr, KP: tl.constexpr,
                        CB: tl.constexpr, MC: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr):
    g = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    cc = tl.program_id(2) * CB + tl.arange(0, CB)
    nmask, cmask = n < N, cc < C
    kk = tl.arange(0, KP)
    _, _, inv0 = _inverse_norms(Z0, g * s0g, s0k, s0n, kk, n, nmask, k, eps)
    inv1 = inv0
    if NB == 2:
        _, _, inv1 = _inverse_norms(Z1, g * s1g, s1k, s1n, kk, n, nmask, k, eps)
    sc0 = _scale(S, g, NB, 0)
    sc1 = _scale(S, g, NB, NB - 1)
    acc = tl.zeros((CB, BN), tl.float32)
    for m0 in range(0, NM, MC):
        mm = m0 + tl.arange(0, MC)
        mmask = mm < NM
        M = sc0 * _monomial_chunk(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, L, -1)
        if NB == 2:
            M += sc1 * _monomial_chunk(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, L, -1)
        w = tl.load(W + g * swg + cc[:, None] * swc + mm[None, :] * swm, mask=cmask[:, None] & mmask[None, :], other=0.0)
        acc += tl.dot(w.to(tl.float32), M, input_precision=DOT)
    tl.store(OUT + g * sog + cc[:, None] * soc + n[None, :] * son, acc, mask=cmask[:, None] & nmask[None, :])


@triton.jit
def _branch_grad(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, kk, dM, L: tl.constexpr, DOT: tl.constexpr):
    """sum over the chunk's monomials of dM * d(monomial)/dx, onto the k coordinates: (KP, BN)."""
    dx = tl.zeros((kk.shape[0], n.shape[0]), tl.float32)
    for j in tl.static_range(L):
        v = tl.load(IDX + mm * L + j, mask=mmask, other=k)
        others = _monomial_chunk(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, L, j)
        contrib = tl.where((v < k)[:, None], dM * others, 0.0)
        onehot = (kk[:, None] == v[None, :]).to(tl.float32)  # (KP, MC)
        dx += tl.dot(onehot, contrib, input_precision=DOT)
    return dx


@triton.jit
def _branch_factors(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, L: tl.constexpr):
    """The chunk's variables and factors (at most four: L <= 4), each gathered once."""
    v0 = _variable(IDX, mm, mmask, k, L, 0)
    v1 = _variable(IDX, mm, mmask, k, L, 1)
    v2 = _variable(IDX, mm, mmask, k, L, 2)
    v3 = _variable(IDX, mm, mmask, k, L, 3)
    f0 = _factor(Z, zg, szk, szn, n, nmask, inv, v0, k)
    f1 = _factor(Z, zg, szk, szn, n, nmask, inv, v1, k)
    f2 = _factor(Z, zg, szk, szn, n, nmask, inv, v2, k)
    f3 = _factor(Z, zg, szk, szn, n, nmask, inv, v3, k)
    return v0, v1, v2, v3, f0, f1, f2, f3


@triton.jit
def _onehot_grad(v, others, dM, kk, k, DOT: tl.constexpr):
    contrib = tl.where((v < k)[:, None], dM * others, 0.0)
    onehot = (kk[:, None] == v[None, :]).to(tl.float32)  # (KP, MC)
    return tl.dot(onehot, contrib, input_precision=DOT)


@triton.jit
def _branch_grad_factors(v0, v1, v2, v3, f0, f1, f2, f3, dM, kk, k, L: tl.constexpr, DOT: tl.constexpr):
    """`_branch_grad` from factors already in registers: the product of the others is f_i f_j f_l."""
    dx = _onehot_grad(v0, f1 * f2 * f3, dM, kk, k, DOT)
    if L > 1:
        dx += _onehot_grad(v1, f0 * f2 * f3, dM, kk, k, DOT)
    if L > 2:
        dx += _onehot_grad(v2, f0 * f1 * f3, dM, kk, k, DOT)
    if L > 3:
        dx += _onehot_grad(v3, f0 * f1 * f2, dM, kk, k, DOT)
    return dx


@triton.jit
def _branch_backward(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, kk, dM, sc, M_built,
                     L: tl.constexpr, DOT: tl.constexpr, REUSE: tl.constexpr, BUILT: tl.constexpr):
    """One branch's share of a monomial chunk's backward: (dM * M_b, sc_b * dx_b). With REUSE the
    factors are gathered once; else M_b is rebuilt (or is M_built, when BUILT: the atomic form
    built it before the channel loop) and the factors gathered per factor."""
    if REUSE:
        v0, v1, v2, v3, f0, f1, f2, f3 = _branch_factors(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, L)
        Mb = f0 * f1 * f2 * f3
        dx = _branch_grad_factors(v0, v1, v2, v3, f0, f1, f2, f3, dM, kk, k, L, DOT)
    else:
        Mb = M_built
        if not BUILT:
            Mb = _monomial_chunk(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, L, -1)
        dx = _branch_grad(Z, zg, szk, szn, n, nmask, inv, IDX, mm, mmask, k, kk, dM, L, DOT)
    return dM * Mb, sc * dx


@triton.jit
def _normalise_backward(dx, z, r, inv, eps):
    """Through x = z / max(|z|, eps): the tangential part over |z|, or dx / eps where clamped."""
    x = z * inv[None, :]
    radial = tl.sum(dx * x, 0)
    return tl.where((r > eps)[None, :], (dx - x * radial[None, :]) * inv[None, :], (dx / eps).to(tl.float32))


@triton.jit
def _store_branch_grads(DZ, DS_SLOT, g, k, N, kk, n, nmask, dx, z, r, inv, eps, ds, HAS_SCALE: tl.constexpr):
    """A branch's dz of the token block (through the normalisation; DZ contiguous (G, k, N)) and its
    share of ds (added at DS_SLOT)."""
    zmask = (kk < k)[:, None] & nmask[None, :]
    tl.store(DZ + (g * k + kk[:, None]) * N + n[None, :], _normalise_backward(dx, z, r, inv, eps), mask=zmask)
    if HAS_SCALE:
        tl.atomic_add(DS_SLOT, tl.sum(ds))


@triton.jit
def _readout_bwd_kernel(W, Z0, Z1, S, IDX, DOUT, DW, DZ0, DZ1, DS, N, C, NM, k, eps,
                        swg, swc, swm, s0g, s0k, s0n, s1g, s1k, s1n, sdg, sdc, sdn,
                        NB: tl.constexpr, HAS_SCALE: tl.constexpr, L: tl.constexpr, KP: tl.constexpr,
                        CB: tl.constexpr, MC: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr,
                        REUSE: tl.constexpr, DW_ATOMIC: tl.constexpr):
    """dz (and ds) of one (group, token block); dW too, by atomics, when DW_ATOMIC."""
    g = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    nmask = n < N
    kk = tl.arange(0, KP)
    z0, r0, inv0 = _inverse_norms(Z0, g * s0g, s0k, s0n, kk, n, nmask, k, eps)
    z1, r1, inv1 = z0, r0, inv0
    if NB == 2:
        z1, r1, inv1 = _inverse_norms(Z1, g * s1g, s1k, s1n, kk, n, nmask, k, eps)
    sc0 = _scale(S, g, NB, 0)
    sc1 = _scale(S, g, NB, NB - 1)
    dx0 = tl.zeros((KP, BN), tl.float32)
    dx1 = tl.zeros((KP, BN), tl.float32)
    ds0 = tl.zeros((MC, BN), tl.float32)  # summed at the end: a loop-carried tensor, not a scalar
    ds1 = tl.zeros((MC, BN), tl.float32)
    for m0 in range(0, NM, MC):
        mm = m0 + tl.arange(0, MC)
        mmask = mm < NM
        M0 = tl.zeros((MC, BN), tl.float32)
        M1 = M0
        if DW_ATOMIC:  # dW needs the fused monomials inside the channel loop: built first (the first kernel's order)
            M0 = _monomial_chunk(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, L, -1)
            M = sc0 * M0
            if NB == 2:
                M1 = _monomial_chunk(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, L, -1)
                M += sc1 * M1
        dM = tl.zeros((MC, BN), tl.float32)
        for c0 in range(0, C, CB):
            cc = c0 + tl.arange(0, CB)
            cmask = cc < C
            dout = tl.load(DOUT + g * sdg + cc[:, None] * sdc + n[None, :] * sdn,
                           mask=cmask[:, None] & nmask[None, :], other=0.0).to(tl.float32)
            w = tl.load(W + g * swg + cc[:, None] * swc + mm[None, :] * swm,
                        mask=cmask[:, None] & mmask[None, :], other=0.0).to(tl.float32)
            dM += tl.dot(tl.trans(w), dout, input_precision=DOT)
            if DW_ATOMIC:
                dw = tl.dot(dout, tl.trans(M), input_precision=DOT)  # (CB, MC)
                tl.atomic_add(DW + (g * C + cc[:, None]) * NM + mm[None, :], dw, mask=cmask[:, None] & mmask[None, :])
        # then one branch at a time (fewer tiles live at once: the factors of one branch)
        ds, dx = _branch_backward(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, kk, dM, sc0, M0,
                                  L, DOT, REUSE, DW_ATOMIC)
        ds0 += ds
        dx0 += dx
        if NB == 2:
            ds, dx = _branch_backward(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, kk, dM, sc1, M1,
                                      L, DOT, REUSE, DW_ATOMIC)
            ds1 += ds
            dx1 += dx
    _store_branch_grads(DZ0, DS + g * NB, g, k, N, kk, n, nmask, dx0, z0, r0, inv0, eps, ds0, HAS_SCALE)
    if NB == 2:
        _store_branch_grads(DZ1, DS + g * NB + 1, g, k, N, kk, n, nmask, dx1, z1, r1, inv1, eps, ds1, HAS_SCALE)


@triton.jit
def _readout_bwd_weight_kernel(Z0, Z1, S, IDX, DOUT, PART, N, C, NM, k, eps, TPS, NMB,
                               s0g, s0k, s0n, s1g, s1k, s1n, sdg, sdc, sdn,
                               NB: tl.constexpr, L: tl.constexpr, KP: tl.constexpr,
                               CB: tl.constexpr, MC: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr):
    """PART[slice, g, c, m] = sum over the slice's tokens of dOut[g, c, n] M[g, m, n]: one program per
    (group, channel block x monomial chunk, token slice of TPS tokens)."""
    g = tl.program_id(0)
    cc = (tl.program_id(1) // NMB) * CB + tl.arange(0, CB)
    mm = (tl.program_id(1) % NMB) * MC + tl.arange(0, MC)
    sl = tl.program_id(2)
    cmask, mmask = cc < C, mm < NM
    kk = tl.arange(0, KP)
    sc0 = _scale(S, g, NB, 0)
    sc1 = _scale(S, g, NB, NB - 1)
    stop = tl.minimum(N, (sl + 1) * TPS)
    acc = tl.zeros((CB, MC), tl.float32)
    for n0 in range(sl * TPS, stop, BN):
        n = n0 + tl.arange(0, BN)
        nmask = n < stop
        _, _, inv0 = _inverse_norms(Z0, g * s0g, s0k, s0n, kk, n, nmask, k, eps)
        M = sc0 * _monomial_chunk(Z0, g * s0g, s0k, s0n, n, nmask, inv0, IDX, mm, mmask, k, L, -1)
        if NB == 2:
            _, _, inv1 = _inverse_norms(Z1, g * s1g, s1k, s1n, kk, n, nmask, k, eps)
            M += sc1 * _monomial_chunk(Z1, g * s1g, s1k, s1n, n, nmask, inv1, IDX, mm, mmask, k, L, -1)
        dout = tl.load(DOUT + g * sdg + cc[:, None] * sdc + n[None, :] * sdn,
                       mask=cmask[:, None] & nmask[None, :], other=0.0).to(tl.float32)
        acc += tl.dot(dout, tl.trans(M), input_precision=DOT)
    tl.store(PART + ((sl * tl.num_programs(0) + g) * C + cc[:, None]) * NM + mm[None, :], acc,
             mask=cmask[:, None] & mmask[None, :])


@lru_cache(maxsize=None)
def _variables_host(k: int, L: int) -> tuple[int, ...]:
    """Each monomial's variables in HarmonicBasis order, L per monomial, ``k`` for "no variable"."""
    out = []
    for degree in range(L + 1):
        for exps in F._exponents(k, degree):
            vs = [v for v, e in enumerate(exps) for _ in range(e)]
            out.extend(vs + [k] * (L - len(vs)))
    return tuple(out)


_TABLES: dict = {}


def _variables(k: int, L: int, device: torch.device) -> torch.Tensor:
    key = (k, L, str(device))
    if key not in _TABLES:
        # a plain tensor even when first asked for under inference_mode (a predict before a fit):
        # it is saved for backward, which an inference tensor cannot be
        with torch.inference_mode(False):
            _TABLES[key] = torch.tensor(_variables_host(k, L), dtype=torch.int32, device=device)
    return _TABLES[key]


# triton.jit reads TRITON_INTERPRET when the kernels above are defined: this says which they are.
INTERPRETED = type(_readout_fwd_kernel).__name__ == "InterpretedFunction"

# Tiles: monomials per chunk, tokens per block, most channels per block, warps per program (None:
# Triton's default), and the programs per SM the weight kernel's token slices aim for. Read at
# each launch, so `tiles` can set them for a measurement (benchmarks/readout_tiles.py on a GPU).
# MC 16 (32 before): the fused form's read-out calls of a masked-LM step at batch 1024, forward and
# backward, in 33.8 ms instead of 57.7 on an H200 (benchmarks/results/readout_tiles_cuda_h200.json;
# of the other settings, one at a time, only 8 weight programs per SM was faster, by 3%, and not
# beside MC 16). The gemm form's monomial and dz kernels take the same MC and BN.
MC, BN = 16, 32
CB_MAX = 128
NUM_WARPS = None
WEIGHT_PROGRAMS_PER_SM = 4
TILE_SETTINGS = ("MC", "BN", "CB_MAX", "NUM_WARPS", "WEIGHT_PROGRAMS_PER_SM")


@contextmanager
def tiles(**settings):
    """Kernels launched inside use these tile settings (names in TILE_SETTINGS)."""
    with module_settings(globals(), TILE_SETTINGS, settings):
        yield


def _launch_options() -> dict:
    return {} if NUM_WARPS is None else {"num_warps": NUM_WARPS}


# The backward's forms (module docstring), set here to measure one beside the other
# (benchmarks.pretrain_throughput --readout-backward): the factors gathered once (L <= 4; else
# gathered per factor as the first kernel did), and the weight gradient from its own kernel
# ("split") or by atomics.
REUSE_FACTORS = True
WEIGHT_GRAD = "split"
BACKWARD_FORMS = {"reuse-split": (True, "split"), "reuse-atomic": (True, "atomic"),
                  "gather-split": (False, "split"), "gather-atomic": (False, "atomic")}  # the shipped one first


@contextmanager
def backward_form(name: str):
    """Backwards run inside take the form ``name`` of BACKWARD_FORMS ("gather-atomic": the first kernel)."""
    global REUSE_FACTORS, WEIGHT_GRAD
    before = REUSE_FACTORS, WEIGHT_GRAD
    REUSE_FACTORS, WEIGHT_GRAD = BACKWARD_FORMS[name]
    try:
        yield
    finally:
        REUSE_FACTORS, WEIGHT_GRAD = before


# The read-out's forms: "fused" (the kernels above, nothing monomial-wide in memory) or "gemm"
# (triton_gemm.py: the monomials written once by a kernel, the matmuls on cuBLAS), set here to
# measure one beside the other (benchmarks.pretrain_throughput --readout-form). "gemm" ships: on
# an H200, interleaved with the fused form at the tiles above, masked-LM pretraining at batch 1024
# ran at 22,300 vs 18,700 SMILES/s (float32) and 22,800 vs 20,700 (TF32), and a batch-32 training
# step on CUDA graphs at 11,800 vs 9,800 mol/s on ESOL, 9,800 vs 8,000 on Lipophilicity
# (benchmarks/results/*_forms_mc16*_h200.json).
FORM = "gemm"
FORMS = ("fused", "gemm")


@contextmanager
def form(name: str):
    """Triton read-outs run inside take the form ``name`` of FORMS."""
    global FORM
    if name not in FORMS:
        raise ValueError(f"unknown read-out form {name!r}; known: {FORMS}")
    before, FORM = FORM, name
    try:
        yield
    finally:
        FORM = before


def _token_slices(G: int, programs: int, N: int, device: torch.device) -> int:
    """How many token slices the weight kernel cuts N into: enough programs to fill the device,
    each slice at least a few token blocks (under the interpreter: every block its own slice, so
    tests with small N still sum several partials)."""
    blocks = triton.cdiv(N, BN)
    if INTERPRETED or device.type != "cuda":
        return blocks
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(triton.cdiv(blocks, 4), triton.cdiv(WEIGHT_PROGRAMS_PER_SM * sms, G * programs)))


def _blocks(C: int) -> int:
    return min(CB_MAX, max(16, triton.next_power_of_2(C)))


class SphereReadoutTriton(torch.autograd.Function):
    """Forward and backward of `sphere_readout` as the fused kernels above (float32 inside)."""

    @staticmethod
    def forward(ctx, L, eps, weight, *inputs):
        nb = len(inputs) // 2
        zs, scales = inputs[:nb], inputs[nb:]
        has_scale = scales[0] is not None
        G, C, NM = weight.shape
        k, N = zs[0].shape[1], zs[0].shape[2]
        w32 = weight.detach().to(torch.float32)
        z32 = [z.detach().to(torch.float32) for z in zs]
        z1 = z32[1] if nb == 2 else z32[0]
        s = (torch.stack([t.detach().to(torch.float32) for t in scales], 1).contiguous() if has_scale
             else w32.new_ones(G, nb))  # the kernels always read a scale
        table = _variables(k, L, weight.device)
        out = torch.empty(G, C, N, dtype=torch.float32, device=weight.device)
        KP, CB = max(16, triton.next_power_of_2(k)), _blocks(C)
        dot = dot_precision()  # the backward keeps the forward's
        if G * C * N:
            grid = (G, triton.cdiv(N, BN), triton.cdiv(C, CB))
            _readout_fwd_kernel[grid](w32, z32[0], z1, s, table, out, N, C, NM, k, eps,
                              *w32.stride(), *z32[0].stride(), *z1.stride(), *out.stride(),
                              NB=nb, L=L, KP=KP, CB=CB, MC=MC, BN=BN, DOT=dot, **_launch_options())
        ctx.save_for_backward(w32, *z32, s, table)
        ctx.meta = (L, eps, nb, has_scale, KP, CB, weight.dtype, [z.dtype for z in zs],
                    [t.dtype for t in scales] if has_scale else None, dot)
        return out.to(weight.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        L, eps, nb, has_scale, KP, CB, w_dtype, z_dtypes, s_dtypes, dot = ctx.meta
        saved = ctx.saved_tensors
        w32, z32, s, table = saved[0], saved[1 : 1 + nb], saved[1 + nb], saved[2 + nb]
        z1 = z32[1] if nb == 2 else z32[0]
        G, C, NM = w32.shape
        k, N = z32[0].shape[1], z32[0].shape[2]
        dout = grad.to(torch.float32)
        atomic = WEIGHT_GRAD == "atomic"
        if WEIGHT_GRAD not in ("split", "atomic"):
            raise ValueError(f"WEIGHT_GRAD is 'split' or 'atomic', got {WEIGHT_GRAD!r}")
        alloc = torch.empty if G * C * N else torch.zeros  # no channels: no kernel, zero gradients
        dz = [alloc(G, k, N, dtype=torch.float32, device=w32.device) for _ in range(nb)]
        ds = torch.zeros(G, nb, dtype=torch.float32, device=w32.device)
        # contiguous (G, C, NM): the kernels index it so
        dw = torch.zeros(G, C, NM, dtype=torch.float32, device=w32.device) if atomic or not G * C * N else None
        if G * C * N:
            _readout_bwd_kernel[(G, triton.cdiv(N, BN))](
                w32, z32[0], z1, s, table, dout, dw if atomic else dz[0], dz[0], dz[-1], ds, N, C, NM, k, eps,
                *w32.stride(), *z32[0].stride(), *z1.stride(), *dout.stride(),
                NB=nb, HAS_SCALE=has_scale, L=L, KP=KP, CB=CB, MC=MC, BN=BN, DOT=dot,
                REUSE=REUSE_FACTORS and L <= 4, DW_ATOMIC=atomic, **_launch_options())
            if not atomic:
                nmb = triton.cdiv(NM, MC)
                programs = triton.cdiv(C, CB) * nmb
                slices = _token_slices(G, programs, N, w32.device)
                tps = triton.cdiv(triton.cdiv(N, slices), BN) * BN
                slices = triton.cdiv(N, tps)
                part = torch.empty(slices, G, C, NM, dtype=torch.float32, device=w32.device)
                _readout_bwd_weight_kernel[(G, programs, slices)](
                    z32[0], z1, s, table, dout, part, N, C, NM, k, eps, tps, nmb,
                    *z32[0].stride(), *z1.stride(), *dout.stride(),
                    NB=nb, L=L, KP=KP, CB=CB, MC=MC, BN=BN, DOT=dot, **_launch_options())
                dw = part.sum(0)  # the slices' partial sums, added in a fixed order
        g_scales = [ds[:, b].to(s_dtypes[b]) for b in range(nb)] if has_scale else [None] * nb
        return (None, None, dw.to(w_dtype), *[d.to(t) for d, t in zip(dz, z_dtypes)], *g_scales)


@torch.compiler.disable  # opaque to torch.compile, as `dual_ska_triton` (its comment says why)
def sphere_readout_triton(weight, zs, scales, eps: float, L: int) -> torch.Tensor:
    """`sphere_readout` (weight (G, c, n_mono), one or two zs (G, k, N), optional scales (G,)) from
    the fused kernels: (G, c, N)."""
    if len(zs) not in (1, 2):
        raise ValueError(f"the Triton read-out takes one or two branches, got {len(zs)}")
    if not (weight.is_cuda or INTERPRETED):
        raise RuntimeError("sphere_readout_triton needs CUDA tensors, or TRITON_INTERPRET=1 (set before importing "
                           "gmnet_sklearn.gm.ops.sphere_readout.triton) to run the interpreter on CPU tensors")
    if triton.cdiv(zs[0].shape[-1], BN) > 65535:  # the token blocks' grid axis (`MAX_TRITON_TOKENS`)
        raise ValueError(f"the Triton read-out takes at most {65535 * BN} tokens a call, got {zs[0].shape[-1]}: "
                         "split the batch, or impl='reference'")
    scales = list(scales)
    if any(s is None for s in scales) and not all(s is None for s in scales):
        raise ValueError("give a scale for every branch or for none")
    if FORM == "gemm":
        from .triton_gemm import SphereReadoutTritonGemm  # (it imports this module's kernels)

        return SphereReadoutTritonGemm.apply(L, eps, weight, *zs, *scales)
    return SphereReadoutTriton.apply(L, eps, weight, *zs, *scales)
