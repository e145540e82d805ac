"""Stateless spherical-harmonic primitives on S^{k-1} (docs/math.md section 1).

Phi(x) is built as a fixed coefficient matrix over monomials: for each degree l, a rational basis
of harmonic homogeneous polynomials (from the classical x_1-recurrence, so it is canonical and
identical on every machine) is orthonormalised in L2(S^{k-1}) with exact monomial integrals and a
Cholesky factor. Phi(x) = A @ monomials(x) is then linear in the monomials, which lets modules fold
A into their trainable weights at run time without changing the parameterisation (`HarmonicMap`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Union

import numpy as np
import torch
from scipy import special

__all__ = [
    "n_harmonics",
    "harmonic_dim",
    "degree_index",
    "sphere_area",
    "gegenbauer",
    "gegenbauer_normalised",
    "zonal_coefficients",
    "HarmonicBasis",
    "harmonic_basis",
    "monomials",
    "phi",
    "HarmonicMap",
    "sh_coefficients",
    "normalise",
    "funk_hecke",
    "zonal_activation",
]


def _check_kL(k: int, L: int) -> None:
    if not isinstance(k, (int, np.integer)) or k < 3:
        raise ValueError(f"sphere dimension k must be an integer >= 3, got {k!r}")
    if not isinstance(L, (int, np.integer)) or L < 0:
        raise ValueError(f"harmonic degree L must be an integer >= 0, got {L!r}")


def n_harmonics(k: int, l: int) -> int:
    """N(k, l): dimension of the degree-l harmonics on S^{k-1}."""
    if l < 0:
        return 0
    if l == 0:
        return 1
    if l == 1:
        return k
    return math.comb(k + l - 1, l) - math.comb(k + l - 3, l - 2)


def harmonic_dim(k: int, L: int) -> int:
    """D* = sum_{l<=L} N(k, l)."""
    return sum(n_harmonics(k, l) for l in range(L + 1))


def degree_index(k: int, L: int) -> np.ndarray:
    """deg(m) for each of the D* features, in Phi's order (stacked by degree)."""
    return np.concatenate([np.full(n_harmonics(k, l), l, dtype=np.int64) for l in range(L + 1)])


def sphere_area(k: int) -> float:
    """|S^{k-1}| = 2 pi^{k/2} / Gamma(k/2)."""
    return 2.0 * math.pi ** (k / 2) / math.gamma(k / 2)


def zonal_coefficients(k: int, L: int) -> np.ndarray:
    """a_l = N(k, l) / |S^{k-1}|, so that Phi_l(x).Phi_l(y) = a_l P_l(x.y) (addition theorem)."""
    area = sphere_area(k)
    return np.array([n_harmonics(k, l) / area for l in range(L + 1)], dtype=np.float64)


def gegenbauer(l: int, lam: float, t):
    """Unnormalised Gegenbauer polynomial C_l^lam(t) (numpy or torch input)."""
    prev, cur = t * 0 + 1.0, 2.0 * lam * t
    if l == 0:
        return prev
    for n in range(1, l):
        prev, cur = cur, (2.0 * (n + lam) * t * cur - (n + 2.0 * lam - 1.0) * prev) / (n + 1)
    return cur


def gegenbauer_normalised(L: int, k: int, t):
    """P_0..P_L with P_l = C_l^lam / C_l^lam(1), lam = (k-2)/2, stacked on a new last axis.

    The normalised three-term recurrence P_{n+1} = (2(n+lam) t P_n - n P_{n-1}) / (n + 2 lam)
    keeps every value in [-1, 1] on [-1, 1], so it is stable in float32.
    """
    lam = (k - 2) / 2.0
    is_torch = isinstance(t, torch.Tensor)
    polys = [t * 0 + 1.0]
    if L >= 1:
        polys.append(t)  # C_1(t)/C_1(1) = t
    for n in range(1, L):
        polys.append((2.0 * (n + lam) * t * polys[n] - n * polys[n - 1]) / (n + 2.0 * lam))
    return torch.stack(polys, dim=-1) if is_torch else np.stack(polys, axis=-1)


# --------------------------------------------------------------------------------------------
# Exact orthonormal harmonic basis over monomials
# --------------------------------------------------------------------------------------------


def _exponents(k: int, l: int) -> list[tuple[int, ...]]:
    """All exponent tuples of total degree l in k variables, in a fixed (lexicographic) order."""
    if k == 1:
        return [(l,)]
    out = []
    for first in range(l, -1, -1):
        out.extend((first, *rest) for rest in _exponents(k - 1, l - first))
    return out


def _sphere_monomial_gram(exps: np.ndarray) -> np.ndarray:
    """Vectorised Gram matrix of monomials in L2(S^{k-1}): entry (i, j) integrates x^(e_i + e_j)."""
    total = exps[:, None, :] + exps[None, :, :]
    k = exps.shape[1]
    even = np.all(total % 2 == 0, axis=-1)
    log = np.log(2.0) + special.gammaln((total + 1) / 2).sum(-1) - special.gammaln((total.sum(-1) + k) / 2)
    return np.where(even, np.exp(log), 0.0)


def _harmonic_polynomials(k: int, l: int) -> list[dict[tuple[int, ...], float]]:
    """A canonical basis of the degree-l harmonic homogeneous polynomials in k variables.

    Write p = sum_j x_1^j f_j(x') with x' = (x_2..x_k). Delta p = 0 iff
    f_{j+2} = -Delta' f_j / ((j+2)(j+1)), so p is fixed by f_0 (degree l) and f_1 (degree l-1),
    which are free: one basis element per monomial of f_0 or f_1 (count = N(k, l)).
    """

    def laplacian(poly):
        out: dict[tuple[int, ...], float] = {}
        for exp, c in poly.items():
            for i, e in enumerate(exp):
                if e >= 2:
                    new = exp[:i] + (e - 2,) + exp[i + 1 :]
                    out[new] = out.get(new, 0.0) + c * e * (e - 1)
        return out

    basis = []
    for start in (0, 1):
        if l - start < 0:
            continue
        for beta in _exponents(k - 1, l - start):
            poly: dict[tuple[int, ...], float] = {}
            f, j = {beta: 1.0}, start
            while f and j <= l:
                for exp, c in f.items():
                    poly[(j, *exp)] = poly.get((j, *exp), 0.0) + c
                f = {e: -c / ((j + 2) * (j + 1)) for e, c in laplacian(f).items() if c != 0.0}
                j += 2
            basis.append(poly)
    return basis


@dataclass(frozen=True)
class HarmonicBasis:
    """Phi = coeffs @ monomials(x), cached per (k, L); all arrays float64/int64 numpy."""

    k: int
    L: int
    dim: int  # D*
    n_monomials: int
    degrees: np.ndarray  # (D*,) degree of each feature
    exponents: tuple  # exponent tuple of each monomial, degrees 0..L concatenated
    monomial_degrees: np.ndarray  # (n_monomials,)
    parent: np.ndarray  # (n_monomials,) index of the degree-(l-1) monomial this one extends
    variable: np.ndarray  # (n_monomials,) the variable it is multiplied by
    coeffs: np.ndarray  # (D*, n_monomials), block diagonal by degree


@lru_cache(maxsize=64)
def harmonic_basis(k: int, L: int) -> HarmonicBasis:
    _check_kL(k, L)
    exponents: list[tuple[int, ...]] = []
    offsets = []
    for l in range(L + 1):
        offsets.append(len(exponents))
        exponents.extend(_exponents(k, l))
    position = {e: i for i, e in enumerate(exponents)}
    # Each degree-l monomial = (degree l-1 monomial) * x_var, var = its first nonzero exponent.
    parent = np.zeros(len(exponents), dtype=np.int64)
    variable = np.zeros(len(exponents), dtype=np.int64)
    for i, e in enumerate(exponents):
        if sum(e) == 0:
            continue
        var = next(j for j, a in enumerate(e) if a > 0)
        variable[i] = var
        parent[i] = position[e[:var] + (e[var] - 1,) + e[var + 1 :]]

    dim = harmonic_dim(k, L)
    coeffs = np.zeros((dim, len(exponents)))
    row = 0
    for l in range(L + 1):
        local = _exponents(k, l)
        loc_index = {e: i for i, e in enumerate(local)}
        B = np.zeros((len(local), n_harmonics(k, l)))
        for col, poly in enumerate(_harmonic_polynomials(k, l)):
            for exp, c in poly.items():
                B[loc_index[exp], col] = c
        # Exact L2(S^{k-1}) Gram matrix of the local monomials.
        S = _sphere_monomial_gram(np.array(local, dtype=np.int64))
        G = B.T @ S @ B
        chol = np.linalg.cholesky(G)
        A = np.linalg.solve(chol, B.T)  # rows orthonormal: A S A^T = I
        coeffs[row : row + A.shape[0], offsets[l] : offsets[l] + len(local)] = A
        row += A.shape[0]
    return HarmonicBasis(
        k=k,
        L=L,
        dim=dim,
        n_monomials=len(exponents),
        degrees=degree_index(k, L),
        exponents=tuple(exponents),
        monomial_degrees=np.array([sum(e) for e in exponents], dtype=np.int64),
        parent=parent,
        variable=variable,
        coeffs=coeffs,
    )


@lru_cache(maxsize=256)
def _torch_plan(k: int, L: int, device: torch.device, dtype: torch.dtype):
    basis = harmonic_basis(k, L)
    per_degree = []
    for l in range(1, L + 1):
        sel = np.nonzero(basis.monomial_degrees == l)[0]
        prev_start = int(np.nonzero(basis.monomial_degrees == l - 1)[0][0])
        per_degree.append(
            (
                torch.as_tensor(basis.parent[sel] - prev_start, device=device),
                torch.as_tensor(basis.variable[sel], device=device),
            )
        )
    coeffs = torch.as_tensor(basis.coeffs, dtype=dtype, device=device)
    return per_degree, coeffs


def monomials(x: torch.Tensor, L: int) -> torch.Tensor:
    """All monomials of degree 0..L of the last axis of x, in HarmonicBasis order: (..., n_mono)."""
    k = x.shape[-1]
    per_degree, _ = _torch_plan(k, L, x.device, x.dtype)
    blocks = [torch.ones_like(x[..., :1])]
    for parent, variable in per_degree:
        blocks.append(blocks[-1].index_select(-1, parent) * x.index_select(-1, variable))
    return torch.cat(blocks, dim=-1)


def sh_coefficients(k: int, L: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """The (D*, n_monomials) matrix A with Phi(x) = A @ monomials(x) (cached per device/dtype)."""
    return _torch_plan(k, L, torch.device(device or "cpu"), dtype)[1]


def phi(x: torch.Tensor, L: int) -> torch.Tensor:
    """Orthonormal hyperspherical harmonics of degree 0..L at unit vectors x: (..., k) -> (..., D*).

    x must already lie on the sphere (use `normalise`); off the sphere this returns the
    homogeneous harmonic polynomials, which is what folding into linear maps relies on.
    """
    k = x.shape[-1]
    return monomials(x, L) @ sh_coefficients(k, L, x.device, x.dtype).T


@lru_cache(maxsize=64)
def _suffix_starts(k: int, L: int) -> tuple[tuple[int, ...], ...]:
    """For each degree l >= 1 and variable v: where, among the degree-(l-1) monomials, those in
    variables >= v begin. In HarmonicBasis order they form a suffix, and the degree-l monomials
    are exactly concat_v(x_v * suffix_v) (v = the monomial's first variable)."""
    out = []
    for l in range(1, L + 1):
        prev = _exponents(k, l - 1)
        out.append(tuple(next((i for i, e in enumerate(prev) if not any(e[:v])), len(prev)) for v in range(k)))
    return tuple(out)


@lru_cache(maxsize=64)
def _derivative_plan(k: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """d m_j / d x_v = e_{j,v} m_{j - e_v}: for each variable v and each monomial i of degree < L,
    the index of j = i + e_v and its exponent of v, flattened (k * n_{<L},) in (v, i) order."""
    basis = harmonic_basis(k, L)
    position = {e: i for i, e in enumerate(basis.exponents)}
    lower = [e for e in basis.exponents if sum(e) < L]
    index = np.zeros((k, len(lower)), dtype=np.int64)
    mult = np.zeros((k, len(lower)))
    for v in range(k):
        for i, e in enumerate(lower):
            j = e[:v] + (e[v] + 1,) + e[v + 1 :]
            index[v, i], mult[v, i] = position[j], j[v]
    return torch.as_tensor(index.reshape(-1)), torch.as_tensor(mult.reshape(-1))


def _cpu_extension(*tensors: torch.Tensor):
    """The compiled CPU kernels when every tensor is a CPU float tensor, else None."""
    if not all(t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) for t in tensors):
        return None
    from .cpu import load_extension  # lazy: gm.cpu imports this module

    return load_extension()


def _fill_monomials(x: torch.Tensor, starts, n_monomials: int) -> torch.Tensor:
    """x (G, k, N) -> every monomial of degree <= L, (G, n_monomials, N), HarmonicBasis order.

    Each degree-l block is concat_v x_v * (suffix of the degree-(l-1) block), written in place
    into one buffer: contiguous slices, no gathers and no concatenation copies.
    """
    G, k, N = x.shape
    m = x.new_empty(G, n_monomials, N)
    m[:, 0] = 1
    if len(starts):
        m[:, 1 : 1 + k] = x
    prev, size, cur = 1, k, 1 + k
    for st in starts[1:]:
        pos = cur
        for v, s in enumerate(st):
            n = size - s
            torch.mul(x[:, v : v + 1], m[:, prev + s : prev + size], out=m[:, pos : pos + n])
            pos += n
        prev, size, cur = cur, pos - cur, pos
    return m


def _monomial_backward(grad: torch.Tensor, x: torch.Tensor, m: torch.Tensor, starts) -> torch.Tensor:
    """Reverse of `_fill_monomials`: d(loss)/dx (G, k, N) from d(loss)/d(monomials) (G, n_mono, N).

    Walks the degrees downwards; each (degree, variable) block costs one dot over rows (into
    dx_v) and one fused multiply-add (into the parent degree's gradient), on contiguous slices.
    """
    G, k, N = x.shape
    if len(starts) == 0:
        return torch.zeros_like(x)
    sizes = [math.comb(k + l - 1, l) for l in range(len(starts) + 1)]
    offsets = np.cumsum([0, *sizes]).tolist()
    lower = grad[:, : offsets[-2]].clone()  # degree < L rows accumulate from the degree above
    gx = torch.zeros_like(x)
    for l in range(len(starts), 1, -1):
        top = grad if l == len(starts) else lower
        prev0, prev_size, pos = offsets[l - 1], sizes[l - 1], offsets[l]
        for v, st in enumerate(starts[l - 1]):
            n = prev_size - st
            gv = top[:, pos : pos + n]
            pos += n
            gx[:, v] += torch.linalg.vecdot(gv, m[:, prev0 + st : prev0 + prev_size], dim=1)
            lower[:, prev0 + st : prev0 + prev_size].addcmul_(x[:, v : v + 1], gv)
    return gx.add_(lower[:, 1 : 1 + k] if len(starts) > 1 else grad[:, 1 : 1 + k])


@lru_cache(maxsize=64)
def _starts_lists(starts: tuple) -> list:
    return [list(st) for st in starts]


def _normalise_fm(z: torch.Tensor, eps: float):
    # sqrt of a sum of squares: linalg.vector_norm over a strided middle axis is ~50x slower.
    r = z.square().sum(1, keepdim=True).sqrt_().clamp_min_(eps)
    return (z / r).contiguous(), r


def _normalise_fm_backward(g_x: torch.Tensor, x: torch.Tensor, r: torch.Tensor, eps: float) -> torch.Tensor:
    # Through x = z / max(|z|, eps): tangential part / |z|, or plain 1/eps where clamped.
    radial = (g_x * x).sum(1, keepdim=True)
    return torch.where(r > eps, (g_x - x * radial) / r, g_x / eps)


class _SphereReadout(torch.autograd.Function):
    """sum_b s_b W @ monomials(normalise(z_b)) with a hand-written backward (see `sphere_readout`).

    Two implementations of the same function: the CPU extension (`gm/cpu/sphere_readout.cpp`,
    monomials built per chunk in cache, only the branch-fused monomials stored) and torch (all
    monomials stored, batched matmuls, the monomial tree walked back with fused slice ops).
    """

    @staticmethod
    def forward(ctx, starts, eps, use_ext, weight, *inputs):
        n = len(inputs) // 2
        zs, scales = inputs[:n], inputs[n:]
        xs, rs = zip(*(_normalise_fm(z, eps) for z in zs))
        ctx.starts, ctx.eps, ctx.n, ctx.use_ext = starts, eps, n, use_ext
        ctx.has_scale = [s is not None for s in scales]
        if use_ext:
            from .cpu import load_extension

            scale_t = (torch.stack([weight.new_ones(weight.shape[0]) if s is None else s for s in scales])
                       if any(ctx.has_scale) else weight.new_zeros(0))
            # The fused monomials are only needed for the weight gradient.
            ctx.ext = load_extension()  # the backward uses the same module
            out, fused = ctx.ext.sphere_readout_forward(weight.contiguous(), list(xs), scale_t,
                                                                  _starts_lists(starts), ctx.needs_input_grad[3])
            ctx.save_for_backward(weight, scale_t, fused, *xs, *rs)
            return out
        out, ms = None, []
        for x, s in zip(xs, scales):
            m = _fill_monomials(x, starts, weight.shape[-1])
            w = weight if s is None else weight * s[:, None, None]
            out = torch.bmm(w, m) if out is None else out.baddbmm_(w, m)
            ms.append(m)
        ctx.save_for_backward(weight, *xs, *rs, *ms, *[s for s in scales if s is not None])
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        n = ctx.n
        grad = grad.contiguous()
        if ctx.use_ext:
            weight, scale_t, fused, *rest = ctx.saved_tensors
            xs, rs = rest[:n], rest[n:]
            # The fused monomials carry the scales; stored only when the weight needs a gradient.
            N = grad.shape[-1]  # the stored monomials are padded to whole chunks
            g_weight = torch.bmm(grad, fused[..., :N].transpose(1, 2)) if ctx.needs_input_grad[3] else None
            G, k, _ = xs[0].shape
            index, mult = _derivative_plan(k, len(ctx.starts))
            res = ctx.ext.sphere_readout_backward(weight.transpose(1, 2).contiguous(), list(xs), scale_t,
                                                            _starts_lists(ctx.starts), grad, index, mult)
            g_xs, g_scale_t = res[:n], res[n]
            g_zs = [_normalise_fm_backward(g, x, r, ctx.eps) for g, x, r in zip(g_xs, xs, rs)]
            g_scales = [g_scale_t[b] if has else None for b, has in enumerate(ctx.has_scale)]
            return (None, None, None, g_weight, *g_zs, *g_scales)
        saved = ctx.saved_tensors
        weight, xs, rs, ms = saved[0], saved[1 : 1 + n], saved[1 + n : 1 + 2 * n], saved[1 + 2 * n : 1 + 3 * n]
        it = iter(saved[1 + 3 * n :])
        scales = [next(it) if has else None for has in ctx.has_scale]
        # d(loss)/d(monomials) before the branch scales: one matmul shared by every branch.
        g_mono = torch.bmm(weight.transpose(1, 2), grad)  # (G, n_mono, N)
        g_weight, g_zs, g_scales = None, [], []
        for x, r, m, s in zip(xs, rs, ms, scales):
            g_w = torch.bmm(grad, m.transpose(1, 2))  # (G, c, n_mono)
            g_x = _monomial_backward(g_mono, x, m, ctx.starts)
            if s is None:
                g_weight = g_w if g_weight is None else g_weight + g_w
                g_scales.append(None)
            else:
                g_weight = g_w * s[:, None, None] if g_weight is None else g_weight.addcmul_(g_w, s[:, None, None])
                g_scales.append((g_w * weight).sum((1, 2)))
                g_x = g_x * s[:, None, None]
            g_zs.append(_normalise_fm_backward(g_x, x, r, ctx.eps))
        return (None, None, None, g_weight, *g_zs, *g_scales)


def sphere_readout(weight: torch.Tensor, zs, scales=None, eps: float = 1e-6, impl: str = "auto") -> torch.Tensor:
    """sum_b scales_b * weight @ monomials(normalise(z_b)), per group: (G, c, N).

    weight (G, c, n_monomials) is a read-out already composed with the harmonic coefficients
    (W A), zs are raw vectors (G, k, N) and scales optional per-group factors (G,) (DualSKA's
    fusion weights). ``impl``: "auto" (CUDA tensors: gather; CPU float tensors: the CPU
    extension when it is available, else torch), "cpu", "torch" or "gather" (see
    `_readout_gather`). `monomials` + autograd is the reference (tests compare every
    implementation with it, forward and backward).
    """
    G, c, n_mono = weight.shape
    k = zs[0].shape[1]
    L = _degree_of(k, n_mono)
    scales = list(scales) if scales is not None else [None] * len(zs)
    if len(scales) != len(zs):
        raise ValueError(f"got {len(zs)} inputs but {len(scales)} scales")
    if impl not in ("auto", "cpu", "torch", "gather"):
        raise ValueError(f"impl must be 'auto', 'cpu', 'torch' or 'gather', got {impl!r}")
    # (L = 0 reads no direction: the constant needs no gather, and the torch form gives its zero gradients.)
    if L > 0 and (impl == "gather" or (impl == "auto" and weight.is_cuda)):
        return _readout_gather(weight, zs, scales, eps, L)
    use_ext = impl == "cpu" or (impl == "auto" and _cpu_extension(weight, *zs) is not None)
    if use_ext and _cpu_extension(weight) is None:
        raise RuntimeError("the CPU extension is not available for these tensors (CPU float tensors and a built extension needed)")
    return _SphereReadout.apply(_suffix_starts(k, L), eps, use_ext, weight, *zs, *scales)


def _readout_gather(weight, zs, scales, eps: float, L: int) -> torch.Tensor:
    """`sphere_readout` as a few whole-tensor ops and autograd: per branch, the monomials of each
    degree gathered from the degree below (`monomials`: two index_selects and a multiply), the
    branches fused in monomial space (Phi is linear in them), one batched matmul. On a GPU, at
    these sizes every op is a kernel launch and launches, not arithmetic, set the time: the
    slice-wise "torch" form runs several times more of them."""
    fused = None
    for z, s in zip(zs, scales):
        m = monomials(normalise(z.transpose(1, 2), eps), L)  # (G, N, n_mono)
        if s is not None:
            m = m * s[:, None, None]
        fused = m if fused is None else fused + m
    return torch.bmm(weight, fused.transpose(1, 2))


def _degree_of(k: int, n_monomials: int) -> int:
    L, total = 0, 1
    while total < n_monomials:
        L += 1
        total += math.comb(k + L - 1, L)
    if total != n_monomials:
        raise ValueError(f"{n_monomials} is not the number of monomials of degree <= L in {k} variables")
    return L


class HarmonicMap(torch.nn.Module):
    """Phi on S^{k-1} with its fixed coefficient table held as a (non-persistent) buffer.

    Read-outs weight @ Phi(z) run through `sphere_readout` with the coefficient table A folded
    into the weight (Phi is linear in the monomials). The buffer follows ``.to()``/``.double()``;
    no global cache is touched in forward.
    """

    def __init__(self, k: int, L: int):
        super().__init__()
        _check_kL(k, L)
        self.k, self.L = k, L
        basis = harmonic_basis(k, L)
        self.dim, self.n_monomials = basis.dim, basis.n_monomials
        # float64 master (cast on use) so a .double() model keeps Phi exact.
        self.register_buffer("coeffs", torch.as_tensor(basis.coeffs, dtype=torch.float64), persistent=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Phi(normalise(z)) (..., D*)."""
        return self.readout(z, torch.eye(self.dim, dtype=z.dtype, device=z.device))

    def readout(self, z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """weight @ Phi(normalise(z)) + bias for z (..., k) and weight (out, D*): (..., out)."""
        lead = z.shape[:-1]
        folded = (weight @ self.coeffs.to(weight.dtype))[None]  # (1, out, n_mono)
        out = sphere_readout(folded, [z.reshape(-1, self.k).T[None]])[0].T
        out = out.reshape(*lead, weight.shape[0])
        return out if bias is None else out + bias


def normalise(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / max(|x|, eps): zero vectors map to zero instead of NaN (and have finite gradients)."""
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


# --------------------------------------------------------------------------------------------
# Funk-Hecke
# --------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "gelu": lambda t: 0.5 * t * (1.0 + special.erf(t / math.sqrt(2.0))),
    "relu": lambda t: np.maximum(t, 0.0),
    "silu": lambda t: t * special.expit(t),
    "tanh": np.tanh,
    "quadratic": lambda t: t * t,
    "identity": lambda t: t,
}

Activation = Union[str, Callable[[np.ndarray], np.ndarray]]


def zonal_activation(sigma: Activation) -> Callable[[np.ndarray], np.ndarray]:
    """Resolve an activation name or callable (numpy float64 in, out)."""
    if callable(sigma):
        return sigma
    try:
        return _ACTIVATIONS[str(sigma).lower()]
    except KeyError:
        raise ValueError(f"unknown zonal activation {sigma!r}; choose one of {sorted(_ACTIVATIONS)} or pass a callable") from None


def funk_hecke(sigma: Activation, k: int, L: int, n_quad: int = 512) -> np.ndarray:
    """Funk-Hecke eigenvalues lambda_l = |S^{k-2}| int_{-1}^{1} sigma(t) P_l(t) (1-t^2)^{(k-3)/2} dt.

    Gauss-Jacobi quadrature with alpha = beta = (k-3)/2 integrates the weight exactly, so the
    rule is exact for polynomial sigma and converges fast for smooth ones. Then
    sigma(u.v) ~= sum_l a_l lambda_l P_l(u.v) = sum_m lambda_{deg m} Phi_m(u) Phi_m(v).
    """
    _check_kL(k, L)
    f = zonal_activation(sigma)
    a = (k - 3) / 2.0
    nodes, weights = special.roots_jacobi(n_quad, a, a)
    P = gegenbauer_normalised(L, k, nodes)  # (n_quad, L+1)
    values = np.asarray(f(nodes), dtype=np.float64)
    return sphere_area(k - 1) * (weights * values) @ P
