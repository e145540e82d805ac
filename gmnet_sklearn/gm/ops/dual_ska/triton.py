"""Fused Triton kernels for both DualSKA branches (bidirectional Gated SFA and SKA).

Per (batch, head) and pair (t, s), with c = q^_t . k^_s and K_l = a_l P_l(c) (zonal kernel):

    y_t  = sum_s W_ts p_s,   W_ts = sum_l K_l E^l_ts,
           E^l_ts = 1/2 exp(C^l_t - C^l_s) (s < t), 1/2 exp(D^l_s - D^l_t) (s > t), 1 (s = t),
           C = inclusive cumsum of log_gamma over t, D = C - log_gamma;
    cv_t = sum_s softmax_s(S_ts) p_s,   S_ts = sum_l K_l / sqrt(D*) on real keys, the finite
           float32 minimum on padded keys (so an all-padding row averages its zero values).

Forward: one program per (query block, b*h) streams key blocks, computes the cosines with `tl.dot`
(k padded with zeros to >= 16), the normalised Gegenbauer recurrence in registers, the per-degree
decay weights from C and D (only the non-positive exponent is ever exponentiated), accumulates
y with `W @ p` and cv with an online (flash-style) softmax. Nothing (T x T) or D*-wide touches HBM;
it stores y, cv and the softmax row max m and 1/sum (two floats per row; 1/sum rather than a log-sum-
exp so all-padding rows, whose max is the float32 minimum, recompute exactly).

Backward recomputes every pair quantity from q, k, p, C, D and the row statistics in two kernels,
no atomics (deterministic):
  * query-major: dq_t = sum_s dc_ts k_s and the row sums of G^l_ts = dW_ts K_l E^l_ts (s != t);
  * key-major:   dk_s = sum_t dc_ts q_t, dp_s = sum_t (W_ts dy_t + alpha_ts dcv_t) and column sums of G.
Where one key block holds every key and FUSE_QUERIES is set (`TILE_RULES["one_key_block"]`, not
yet the default), the key-major kernel meets each query block once and also finishes dq and the row
sums, and the query-major one is not launched.
with dW_ts = dy_t . p_s, dS_ts = alpha_ts (dcv_t . p_s - dcv_t . cv_t) and
dc_ts = sum_l a_l P_l'(c) (dW_ts E^l_ts + dS_ts / sqrt(D*)). Then per position i
dC_i = sum_{s<i} G_is - sum_{t>i} G_ti and dD_i = sum_{t<i} G_ti - sum_{s>i} G_is, and torch maps
them back: dlog_gamma = revcumsum(dC + dD) - dD.

Arithmetic is float32 (inputs of other dtypes are cast; outputs and gradients are cast back), and
every `tl.dot` asks for IEEE float32 precision (no TF32) by default, so results match the float64
reference to ~1e-5 relative; under ``torch.set_float32_matmul_precision("high")`` they use TF32
tensor cores as torch's own matmuls then do (`gm.triton.dot_precision`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from functools import lru_cache

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from ... import functional as F
from ...triton import dot_precision, module_settings

__all__ = ["dual_ska_triton", "DualSKATriton", "INTERPRETED"]

# The masked-key score fill of naive.masked_softmax_attend (finite, so all-padding rows stay finite).
FLOAT32_MIN = tl.constexpr(float(torch.finfo(torch.float32).min))


# ------------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------------


@triton.jit
def _fwd_kernel(
    q_ptr, k_ptr, p_ptr, C_ptr, D_ptr, mask_ptr, consts_ptr,
    y_ptr, cv_ptr, m_ptr, linv_ptr,
    T, H, KDIM, scale,
    L: tl.constexpr, KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr,
):
    bh = tl.program_id(0)  # b*h on axis 0: grid axes 1 and 2 are capped at 65535 on CUDA
    pid_m = tl.program_id(1)
    b = bh // H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_k = tl.arange(0, KP)
    row_ok = offs_m < T
    vec = bh * T * KDIM
    dec = bh * (L + 1) * T
    io_m = (offs_m[:, None] * KDIM + offs_k[None, :]) + vec
    mk_m = row_ok[:, None] & (offs_k[None, :] < KDIM)
    q = tl.load(q_ptr + io_m, mask=mk_m, other=0.0)

    acc_y = tl.zeros((BM, KP), dtype=tl.float32)
    acc_c = tl.zeros((BM, KP), dtype=tl.float32)
    m_i = tl.full((BM,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BM,), dtype=tl.float32)

    for start_n in range(0, T, BN):
        offs_n = start_n + tl.arange(0, BN)
        col_ok = offs_n < T
        io_n = (offs_n[:, None] * KDIM + offs_k[None, :]) + vec
        mk_n = col_ok[:, None] & (offs_k[None, :] < KDIM)
        k = tl.load(k_ptr + io_n, mask=mk_n, other=0.0)
        p = tl.load(p_ptr + io_n, mask=mk_n, other=0.0)
        key_ok = tl.load(mask_ptr + b * T + offs_n, mask=col_ok, other=0) != 0

        c = tl.dot(q, tl.trans(k), input_precision=DOT)
        tm = offs_m[:, None]
        sn = offs_n[None, :]
        lower = sn < tm
        diag = sn == tm
        off_ok = row_ok[:, None] & col_ok[None, :] & (sn != tm)

        W = tl.zeros((BM, BN), dtype=tl.float32)
        Ks = tl.zeros((BM, BN), dtype=tl.float32)
        P_prev = tl.zeros((BM, BN), dtype=tl.float32)
        P = tl.full((BM, BN), 1.0, dtype=tl.float32)
        for l in tl.static_range(L + 1):
            a = tl.load(consts_ptr + l)
            Ct = tl.load(C_ptr + dec + l * T + offs_m, mask=row_ok, other=0.0)
            Dt = tl.load(D_ptr + dec + l * T + offs_m, mask=row_ok, other=0.0)
            Cs = tl.load(C_ptr + dec + l * T + offs_n, mask=col_ok, other=0.0)
            Ds = tl.load(D_ptr + dec + l * T + offs_n, mask=col_ok, other=0.0)
            expo = tl.where(lower, Ct[:, None] - Cs[None, :], Ds[None, :] - Dt[:, None])
            expo = tl.where(off_ok, expo, float("-inf"))
            E = tl.where(diag, 1.0, 0.5 * tl.exp(expo))
            K = a * P
            W += K * E
            Ks += K
            if l < L:  # advance the normalised Gegenbauer recurrence to degree l + 1
                if l == 0:
                    P_next = c
                else:
                    A = tl.load(consts_ptr + (L + 1) + 2 * l)
                    Bc = tl.load(consts_ptr + (L + 1) + 2 * l + 1)
                    P_next = A * c * P - Bc * P_prev
                P_prev = P
                P = P_next

        acc_y += tl.dot(W, p, input_precision=DOT)

        # the product cast back: triton.jit types the Python float `scale` float32, but torch.compile's
        # copy of these kernels passed it as float64 (an H100 run: tl.dot got fp64 and fp32 operands)
        S = tl.where(key_ok[None, :], (Ks * scale).to(tl.float32), FLOAT32_MIN)
        S = tl.where(col_ok[None, :], S, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(S, axis=1))
        corr = tl.exp(m_i - m_new)
        e = tl.exp(S - m_new[:, None])
        l_i = l_i * corr + tl.sum(e, axis=1)
        acc_c = acc_c * corr[:, None] + tl.dot(e, p, input_precision=DOT)
        m_i = m_new

    linv = 1.0 / l_i
    tl.store(y_ptr + io_m, acc_y, mask=mk_m)
    tl.store(cv_ptr + io_m, acc_c * linv[:, None], mask=mk_m)
    tl.store(m_ptr + bh * T + offs_m, m_i, mask=row_ok)
    tl.store(linv_ptr + bh * T + offs_m, linv, mask=row_ok)


@triton.jit
def _bwd_tile(
    q, k, p, dy, dcv, m_i, linv_i, delta_i, offs_m, offs_n, T, key_ok,
    C_ptr, D_ptr, consts_ptr, accF, accB, rowF, rowB, scale,
    L: tl.constexpr, LP: tl.constexpr, ROWS: tl.constexpr, BOTH: tl.constexpr, DOT: tl.constexpr,
):
    """Recompute one (query block x key block) tile and its backward pieces.

    Returns W (the SFA pair weights), alpha (softmax probabilities), dc (the cosine gradient) and
    the per-degree sums of G = dW K_l E_l over s < t (accF) and s > t (accB), over keys (ROWS) or
    over queries (columns); with BOTH (and not ROWS) also the sums over keys into rowF and rowB.
    """
    c = tl.dot(q, tl.trans(k), input_precision=DOT)
    dW = tl.dot(dy, tl.trans(p), input_precision=DOT)
    dA = tl.dot(dcv, tl.trans(p), input_precision=DOT)
    row_ok = offs_m < T
    col_ok = offs_n < T
    tm = offs_m[:, None]
    sn = offs_n[None, :]
    lower = sn < tm
    upper = sn > tm
    diag = sn == tm
    off_ok = row_ok[:, None] & col_ok[None, :] & (sn != tm)
    lcol = tl.arange(0, LP)[None, :]

    W = tl.zeros(c.shape, dtype=tl.float32)
    Ks = tl.zeros(c.shape, dtype=tl.float32)
    dK = tl.zeros(c.shape, dtype=tl.float32)  # sum_l a_l P_l'
    dKE = tl.zeros(c.shape, dtype=tl.float32)  # sum_l a_l P_l' E_l
    P_prev = tl.zeros(c.shape, dtype=tl.float32)
    P = tl.full(c.shape, 1.0, dtype=tl.float32)
    dP_prev = tl.zeros(c.shape, dtype=tl.float32)
    dP = tl.zeros(c.shape, dtype=tl.float32)
    for l in tl.static_range(L + 1):
        a = tl.load(consts_ptr + l)
        Ct = tl.load(C_ptr + l * T + offs_m, mask=row_ok, other=0.0)
        Dt = tl.load(D_ptr + l * T + offs_m, mask=row_ok, other=0.0)
        Cs = tl.load(C_ptr + l * T + offs_n, mask=col_ok, other=0.0)
        Ds = tl.load(D_ptr + l * T + offs_n, mask=col_ok, other=0.0)
        expo = tl.where(lower, Ct[:, None] - Cs[None, :], Ds[None, :] - Dt[:, None])
        expo = tl.where(off_ok, expo, float("-inf"))
        Eoff = 0.5 * tl.exp(expo)  # 0 on the diagonal and out of range
        E = tl.where(diag, 1.0, Eoff)
        K = a * P
        W += K * E
        Ks += K
        if l > 0:
            dK += a * dP
            dKE += a * dP * E
        G = dW * K * Eoff
        if ROWS:
            gF = tl.sum(tl.where(lower, G, 0.0), axis=1)
            gB = tl.sum(tl.where(upper, G, 0.0), axis=1)
            accF += tl.where(lcol == l, gF[:, None], 0.0)
            accB += tl.where(lcol == l, gB[:, None], 0.0)
        else:
            gF = tl.sum(tl.where(lower, G, 0.0), axis=0)
            gB = tl.sum(tl.where(upper, G, 0.0), axis=0)
            accF += tl.where(lcol == l, gF[:, None], 0.0)
            accB += tl.where(lcol == l, gB[:, None], 0.0)
            if BOTH:
                rF = tl.sum(tl.where(lower, G, 0.0), axis=1)
                rB = tl.sum(tl.where(upper, G, 0.0), axis=1)
                rowF += tl.where(lcol == l, rF[:, None], 0.0)
                rowB += tl.where(lcol == l, rB[:, None], 0.0)
        if l < L:
            if l == 0:
                P_next = c
                dP_next = tl.full(c.shape, 1.0, dtype=tl.float32)
            else:
                A = tl.load(consts_ptr + (L + 1) + 2 * l)
                Bc = tl.load(consts_ptr + (L + 1) + 2 * l + 1)
                P_next = A * c * P - Bc * P_prev
                dP_next = A * (P + c * dP) - Bc * dP_prev
            P_prev = P
            P = P_next
            dP_prev = dP
            dP = dP_next

    S = tl.where(key_ok[None, :], (Ks * scale).to(tl.float32), FLOAT32_MIN)  # float32: see _fwd_kernel
    S = tl.where(col_ok[None, :], S, float("-inf"))
    alpha = tl.exp(S - m_i[:, None]) * linv_i[:, None]
    dS = tl.where(key_ok[None, :], alpha * (dA - delta_i[:, None]), 0.0)
    dc = dW * dKE + (scale * dS).to(tl.float32) * dK
    return W, alpha, dc, accF, accB, rowF, rowB


@triton.jit
def _bwd_query_kernel(
    q_ptr, k_ptr, p_ptr, C_ptr, D_ptr, mask_ptr, consts_ptr,
    dy_ptr, dcv_ptr, m_ptr, linv_ptr, delta_ptr,
    dq_ptr, dCq_ptr, dDq_ptr,
    T, H, KDIM, scale,
    L: tl.constexpr, LP: tl.constexpr, KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr,
):
    bh = tl.program_id(0)  # b*h on axis 0: grid axes 1 and 2 are capped at 65535 on CUDA
    pid_m = tl.program_id(1)
    b = bh // H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_k = tl.arange(0, KP)
    row_ok = offs_m < T
    vec = bh * T * KDIM
    dec = bh * (L + 1) * T
    io_m = (offs_m[:, None] * KDIM + offs_k[None, :]) + vec
    mk_m = row_ok[:, None] & (offs_k[None, :] < KDIM)
    q = tl.load(q_ptr + io_m, mask=mk_m, other=0.0)
    dy = tl.load(dy_ptr + io_m, mask=mk_m, other=0.0)
    dcv = tl.load(dcv_ptr + io_m, mask=mk_m, other=0.0)
    m_i = tl.load(m_ptr + bh * T + offs_m, mask=row_ok, other=0.0)
    linv_i = tl.load(linv_ptr + bh * T + offs_m, mask=row_ok, other=0.0)
    delta_i = tl.load(delta_ptr + bh * T + offs_m, mask=row_ok, other=0.0)

    dq = tl.zeros((BM, KP), dtype=tl.float32)
    accF = tl.zeros((BM, LP), dtype=tl.float32)
    accB = tl.zeros((BM, LP), dtype=tl.float32)
    for start_n in range(0, T, BN):
        offs_n = start_n + tl.arange(0, BN)
        col_ok = offs_n < T
        io_n = (offs_n[:, None] * KDIM + offs_k[None, :]) + vec
        mk_n = col_ok[:, None] & (offs_k[None, :] < KDIM)
        k = tl.load(k_ptr + io_n, mask=mk_n, other=0.0)
        p = tl.load(p_ptr + io_n, mask=mk_n, other=0.0)
        key_ok = tl.load(mask_ptr + b * T + offs_n, mask=col_ok, other=0) != 0
        W, alpha, dc, accF, accB, _, _ = _bwd_tile(
            q, k, p, dy, dcv, m_i, linv_i, delta_i, offs_m, offs_n, T, key_ok,
            C_ptr + dec, D_ptr + dec, consts_ptr, accF, accB, accF, accB, scale, L, LP, True, False, DOT,
        )
        dq += tl.dot(dc, k, input_precision=DOT)

    tl.store(dq_ptr + io_m, dq, mask=mk_m)
    # Row sums: dC_t gets sum_{s<t} G_ts, dD_t gets -sum_{s>t} G_ts.
    lcol = tl.arange(0, LP)
    io_l = dec + lcol[None, :] * T + offs_m[:, None]
    mk_l = row_ok[:, None] & (lcol[None, :] < L + 1)
    tl.store(dCq_ptr + io_l, accF, mask=mk_l)
    tl.store(dDq_ptr + io_l, -accB, mask=mk_l)


@triton.jit
def _bwd_key_kernel(
    q_ptr, k_ptr, p_ptr, C_ptr, D_ptr, mask_ptr, consts_ptr,
    dy_ptr, dcv_ptr, m_ptr, linv_ptr, delta_ptr,
    dk_ptr, dp_ptr, dCk_ptr, dDk_ptr, dq_ptr, dCq_ptr, dDq_ptr,
    T, H, KDIM, scale,
    L: tl.constexpr, LP: tl.constexpr, KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DOT: tl.constexpr,
    WITH_QUERIES: tl.constexpr,
):
    # WITH_QUERIES (one key block holds every key, T <= BN): each query block's tile is met once,
    # so this program also finishes the query side (dq and the row sums of G) and the query-major
    # kernel is not launched: each tile is computed once instead of twice.
    bh = tl.program_id(0)
    pid_n = tl.program_id(1)
    b = bh // H
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, KP)
    col_ok = offs_n < T
    vec = bh * T * KDIM
    dec = bh * (L + 1) * T
    io_n = (offs_n[:, None] * KDIM + offs_k[None, :]) + vec
    mk_n = col_ok[:, None] & (offs_k[None, :] < KDIM)
    k = tl.load(k_ptr + io_n, mask=mk_n, other=0.0)
    p = tl.load(p_ptr + io_n, mask=mk_n, other=0.0)
    key_ok = tl.load(mask_ptr + b * T + offs_n, mask=col_ok, other=0) != 0

    dk = tl.zeros((BN, KP), dtype=tl.float32)
    dp = tl.zeros((BN, KP), dtype=tl.float32)
    accF = tl.zeros((BN, LP), dtype=tl.float32)
    accB = tl.zeros((BN, LP), dtype=tl.float32)
    for start_m in range(0, T, BM):
        offs_m = start_m + tl.arange(0, BM)
        row_ok = offs_m < T
        io_m = (offs_m[:, None] * KDIM + offs_k[None, :]) + vec
        mk_m = row_ok[:, None] & (offs_k[None, :] < KDIM)
        q = tl.load(q_ptr + io_m, mask=mk_m, other=0.0)
        dy = tl.load(dy_ptr + io_m, mask=mk_m, other=0.0)
        dcv = tl.load(dcv_ptr + io_m, mask=mk_m, other=0.0)
        m_i = tl.load(m_ptr + bh * T + offs_m, mask=row_ok, other=0.0)
        linv_i = tl.load(linv_ptr + bh * T + offs_m, mask=row_ok, other=0.0)
        delta_i = tl.load(delta_ptr + bh * T + offs_m, mask=row_ok, other=0.0)
        rowF = tl.zeros((BM, LP), dtype=tl.float32)
        rowB = tl.zeros((BM, LP), dtype=tl.float32)
        W, alpha, dc, accF, accB, rowF, rowB = _bwd_tile(
            q, k, p, dy, dcv, m_i, linv_i, delta_i, offs_m, offs_n, T, key_ok,
            C_ptr + dec, D_ptr + dec, consts_ptr, accF, accB, rowF, rowB, scale, L, LP, False, WITH_QUERIES, DOT,
        )
        dk += tl.dot(tl.trans(dc), q, input_precision=DOT)
        dp += tl.dot(tl.trans(W), dy, input_precision=DOT)
        dp += tl.dot(tl.trans(alpha), dcv, input_precision=DOT)
        if WITH_QUERIES:  # as the query-major kernel's end, for this query block
            tl.store(dq_ptr + io_m, tl.dot(dc, k, input_precision=DOT), mask=mk_m)
            lrow = tl.arange(0, LP)
            io_r = dec + lrow[None, :] * T + offs_m[:, None]
            mk_r = row_ok[:, None] & (lrow[None, :] < L + 1)
            tl.store(dCq_ptr + io_r, rowF, mask=mk_r)
            tl.store(dDq_ptr + io_r, -rowB, mask=mk_r)

    tl.store(dk_ptr + io_n, dk, mask=mk_n)
    tl.store(dp_ptr + io_n, dp, mask=mk_n)
    # Column sums: dC_s gets -sum_{t>s} G_ts, dD_s gets sum_{t<s} G_ts.
    lcol = tl.arange(0, LP)
    io_l = dec + lcol[None, :] * T + offs_n[:, None]
    mk_l = col_ok[:, None] & (lcol[None, :] < L + 1)
    tl.store(dCk_ptr + io_l, -accF, mask=mk_l)
    tl.store(dDk_ptr + io_l, accB, mask=mk_l)


# ------------------------------------------------------------------------------------------------
# Host side
# ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _constants_host(k: int, L: int) -> tuple[float, ...]:
    """[a_0..a_L] then, for each degree n = 0..L, the recurrence pair (alpha_n, beta_n)
    (`functional.gegenbauer_recurrence`)."""
    a = [float(x) for x in F.zonal_coefficients(k, L)]
    rec = []
    for alpha, beta in zip(*F.gegenbauer_recurrence(k, L)):
        rec += [alpha, beta]
    return tuple(a + rec)


_CONSTS: dict = {}


def _constants(k: int, L: int, device: torch.device) -> torch.Tensor:
    key = (k, L, str(device))
    if key not in _CONSTS:
        # a plain tensor even when first asked for under inference_mode (a predict before a fit):
        # it is saved for backward, which an inference tensor cannot be
        with torch.inference_mode(False):
            _CONSTS[key] = torch.tensor(_constants_host(k, L), dtype=torch.float32, device=device)
    return _CONSTS[key]


# Tiles, read at each launch (`tiles` sets them for a measurement). Up to ONE_KEY_BLOCK_MAX tokens
# every key fits one block (next_power_of_2(T), at least 16) and the queries go in blocks of
# QUERY_BLOCK; with FUSE_QUERIES the backward then computes each tile once, in the key-major kernel,
# where the two kernels compute it twice. Longer sequences take BLOCK x BLOCK tiles and both backward
# kernels. NUM_WARPS None: 4 up to 512 pairs a tile, 8 above. Register counts of cubins compiled
# offline for sm_90 and sm_80 (cuobjdump -res-usage, L = 3) chose the shipped tiles: 16x16 on 4 warps
# and 32x32 on 8 compile without spills on sm_90 (16 bytes of stack in one sm_80 kernel); 32x32 on 4
# warps and 64x64 spill. Not yet timed on a GPU, nor is TILE_RULES["one_key_block"]: at 42 tokens
# (the batch-1024 ESOL step profiled on an H200, where the attention took 39% of the device time)
# the shipped 32x32 tiles compute 4,096 pair slots per (batch row, head), twice in the backward; its
# 16x64 tiles (as many pairs a tile as 32x32) 3,072, once (1,764 are real pairs). The GPU session's
# `attention` phase times the rules side by side; the faster ships.
ONE_KEY_BLOCK_MAX = 16
QUERY_BLOCK = 16
BLOCK = 32
NUM_WARPS = None
FUSE_QUERIES = False
TILE_SETTINGS = ("ONE_KEY_BLOCK_MAX", "QUERY_BLOCK", "BLOCK", "NUM_WARPS", "FUSE_QUERIES")
#: Named rules (`tiles(**TILE_RULES[name])`): the shipped one first.
TILE_RULES = {
    "shipped": {"ONE_KEY_BLOCK_MAX": 16, "QUERY_BLOCK": 16, "BLOCK": 32, "NUM_WARPS": None, "FUSE_QUERIES": False},
    "one_key_block": {"ONE_KEY_BLOCK_MAX": 64, "QUERY_BLOCK": 16, "FUSE_QUERIES": True},
}


@contextmanager
def tiles(**settings):
    """Kernels launched inside use these tile settings (names in TILE_SETTINGS)."""
    with module_settings(globals(), TILE_SETTINGS, settings, _check_tile_setting):
        yield


def _check_tile_setting(name: str, value) -> None:
    """Refused here, not when Triton compiles on the GPU."""
    if name in ("QUERY_BLOCK", "BLOCK"):
        _check_block(name, value)
    elif name == "ONE_KEY_BLOCK_MAX" and not (_is_int(value) and value >= 0):
        raise ValueError(f"ONE_KEY_BLOCK_MAX must be an int >= 0, got {value!r}")
    elif name == "NUM_WARPS" and not (value is None or (_is_int(value) and value in (1, 2, 4, 8, 16, 32))):
        raise ValueError(f"NUM_WARPS must be None or a power of two up to 32, got {value!r}")
    elif name == "FUSE_QUERIES" and not isinstance(value, bool):
        raise ValueError(f"FUSE_QUERIES must be True or False, got {value!r}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_block(name: str, block: int) -> None:
    if not _is_int(block) or block < 16 or block & (block - 1):
        raise ValueError(f"{name} must be a power of two >= 16, got {block!r}")


def _config(T: int, block: int | None) -> tuple[int, int, int]:
    """(BM, BN, num_warps) for sequences of T tokens; ``block`` sets both blocks (tests)."""
    if block is not None:
        _check_block("block", block)
        BM = BN = block
    elif T <= ONE_KEY_BLOCK_MAX:
        BM, BN = QUERY_BLOCK, max(16, triton.next_power_of_2(T))
    else:
        BM = BN = BLOCK
    return BM, BN, NUM_WARPS or (4 if BM * BN <= 512 else 8)


# triton.jit reads TRITON_INTERPRET when the kernels above are defined: this says which they are.
INTERPRETED = type(_fwd_kernel).__name__ == "InterpretedFunction"


def _check_device(x: torch.Tensor) -> None:
    if not (x.is_cuda or INTERPRETED):
        raise RuntimeError(
            "dual_ska_triton needs CUDA tensors, or TRITON_INTERPRET=1 (set before importing "
            "gmnet_sklearn.gm.ops.dual_ska.triton) to run the Triton interpreter on CPU tensors"
        )


class DualSKATriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, p, log_gamma, mask, L, block=None):
        B, H, T, kdim = q.shape
        dtypes = (q.dtype, k.dtype, p.dtype, log_gamma.dtype)
        f32 = lambda x: x.detach().to(torch.float32).contiguous()  # noqa: E731
        q32, k32, p32 = f32(q), f32(k), f32(p)
        lg = log_gamma.detach().to(torch.float32)
        C = lg.cumsum(2)
        D = C - lg
        Ct = C.transpose(-1, -2).contiguous()  # (B, H, L+1, T): per-degree rows are contiguous
        Dt = D.transpose(-1, -2).contiguous()
        mask_i = mask.to(device=q.device, dtype=torch.int32).contiguous()
        consts = _constants(kdim, L, q.device)
        scale = 1.0 / math.sqrt(F.harmonic_dim(kdim, L))
        KP = max(16, triton.next_power_of_2(kdim))
        BM, BN, num_warps = _config(T, block)
        dot = dot_precision()  # the backward keeps the forward's

        y = torch.empty_like(q32)
        cv = torch.empty_like(q32)
        m = torch.empty(B, H, T, dtype=torch.float32, device=q.device)
        linv = torch.empty_like(m)
        if B * H * T:
            grid = (B * H, triton.cdiv(T, BM))
            _fwd_kernel[grid](
                q32, k32, p32, Ct, Dt, mask_i, consts, y, cv, m, linv,
                T, H, kdim, scale, L=L, KP=KP, BM=BM, BN=BN, DOT=dot, num_warps=num_warps,
            )
        ctx.save_for_backward(q32, k32, p32, Ct, Dt, mask_i, consts, cv, m, linv)
        ctx.meta = (L, scale, KP, BM, BN, num_warps, dtypes, dot, FUSE_QUERIES)  # the backward keeps the forward's tiles
        return y.to(q.dtype), cv.to(q.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy, dcv):
        q, k, p, Ct, Dt, mask_i, consts, cv, m, linv = ctx.saved_tensors
        L, scale, KP, BM, BN, num_warps, dtypes, dot, fuse_queries = ctx.meta
        B, H, T, kdim = q.shape
        dy = torch.zeros_like(q) if dy is None else dy.to(torch.float32).contiguous()
        dcv = torch.zeros_like(q) if dcv is None else dcv.to(torch.float32).contiguous()
        delta = (dcv * cv).sum(-1).contiguous()  # (B, H, T): dcv_t . cv_t, as in flash attention
        LP = max(2, triton.next_power_of_2(L + 1))

        dq, dk, dp = torch.empty_like(q), torch.empty_like(k), torch.empty_like(p)
        dCq, dDq = torch.empty_like(Ct), torch.empty_like(Dt)
        dCk, dDk = torch.empty_like(Ct), torch.empty_like(Dt)
        if B * H * T:
            common = (T, H, kdim, scale)
            meta = dict(L=L, LP=LP, KP=KP, BM=BM, BN=BN, DOT=dot, num_warps=num_warps)
            with_queries = fuse_queries and T <= BN  # one key block: each tile is met once
            if not with_queries:
                _bwd_query_kernel[(B * H, triton.cdiv(T, BM))](
                    q, k, p, Ct, Dt, mask_i, consts, dy, dcv, m, linv, delta, dq, dCq, dDq, *common, **meta
                )
            _bwd_key_kernel[(B * H, triton.cdiv(T, BN))](
                q, k, p, Ct, Dt, mask_i, consts, dy, dcv, m, linv, delta, dk, dp, dCk, dDk, dq, dCq, dDq,
                *common, **meta, WITH_QUERIES=with_queries,
            )
        dC = (dCq + dCk).transpose(-1, -2)  # (B, H, T, L+1)
        dD = (dDq + dDk).transpose(-1, -2)
        # C = cumsum(lg) and D = C - lg: dlg_r = sum_{t >= r} (dC_t + dD_t) - dD_r.
        dCD = dC + dD
        dlg = dCD.flip(2).cumsum(2).flip(2) - dD
        tq, tk, tp, tg = dtypes
        return dq.to(tq), dk.to(tk), dp.to(tp), dlg.to(tg), None, None, None


# Opaque to torch.compile: Dynamo traced into this function and failed on the kernel launch with
# symbolic shapes (an H200, 2026-11-30: "'SymNodeVariable' object has no attribute 'value'"), and
# Inductor cannot fuse into a hand-written kernel anyway; what it can fuse is the work around it.
@torch.compiler.disable
def dual_ska_triton(q, k, p, log_gamma, mask, L: int, block: int | None = None):
    """Both DualSKA branch outputs from one fused Triton pass: (y_sfa, cv), each (B, H, T, k).

    q, k: (B, H, T, k) unit directions; p: (B, H, T, k) value positions, zero at padding;
    log_gamma: (B, H, T, L+1) log decay gates (<= 0; 0 at padding); mask: (B, T) bool, True on
    real tokens. Equals ``bidir_sfa_parallel(q, k, p, log_gamma, L)`` and
    ``ska_zonal(q, k, p, mask, L)``, forward and backward (w.r.t. q, k, p and log_gamma), in float32.
    ``block`` overrides the query/key block size (a power of two >= 16; for tests).
    """
    if q.dim() != 4 or k.shape != q.shape or p.shape != q.shape:
        raise ValueError(f"q, k, p must share one (B, H, T, k) shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(p.shape)}")
    B, H, T, _ = q.shape
    if log_gamma.shape != (B, H, T, L + 1):
        raise ValueError(f"log_gamma must be {(B, H, T, L + 1)}, got {tuple(log_gamma.shape)}")
    if mask.shape != (B, T):
        raise ValueError(f"mask must be {(B, T)}, got {tuple(mask.shape)}")
    _check_device(q)
    return DualSKATriton.apply(q, k, p, log_gamma, mask, L, block)
