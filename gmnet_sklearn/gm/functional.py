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
    "gegenbauer_recurrence",
    "zonal_coefficients",
    "HarmonicBasis",
    "harmonic_basis",
    "monomials",
    "phi",
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


def _gegenbauer_terms(k: int, n: int) -> tuple[float, int, float]:
    """(2(n+lam), n, n+2lam), lam = (k-2)/2: P_{n+1} = (2(n+lam) t P_n - n P_{n-1}) / (n + 2 lam).

    The one source of the recurrence's coefficients: `gegenbauer_normalised` divides last (its
    arithmetic, and so every stored eigenvalue, stays as it was), `gegenbauer_recurrence` first.
    """
    lam = (k - 2) / 2.0
    return 2.0 * (n + lam), n, n + 2.0 * lam


def gegenbauer_normalised(L: int, k: int, t):
    """P_0..P_L with P_l = C_l^lam / C_l^lam(1), lam = (k-2)/2, stacked on a new last axis.

    The normalised three-term recurrence P_{n+1} = (2(n+lam) t P_n - n P_{n-1}) / (n + 2 lam)
    keeps every value in [-1, 1] on [-1, 1], so it is stable in float32.
    """
    is_torch = isinstance(t, torch.Tensor)
    polys = [t * 0 + 1.0]
    if L >= 1:
        polys.append(t)  # C_1(t)/C_1(1) = t
    for n in range(1, L):
        two_n_lam, n_, n_2lam = _gegenbauer_terms(k, n)
        polys.append((two_n_lam * t * polys[n] - n_ * polys[n - 1]) / n_2lam)
    return torch.stack(polys, dim=-1) if is_torch else np.stack(polys, axis=-1)


@lru_cache(maxsize=64)
def gegenbauer_recurrence(k: int, L: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(alpha, beta), each indexed n = 0..L: P_{n+1}(t) = alpha_n t P_n(t) - beta_n P_{n-1}(t).

    The form the zonal kernels evaluate (eager, C++ and Triton alike), with
    alpha_n = 2(n+lam)/(n+2lam) and beta_n = n/(n+2lam) (alpha_0 = 1, beta_0 = 0: P_1 = t).
    """
    terms = [_gegenbauer_terms(k, n) for n in range(L + 1)]
    return tuple(a / c for a, _, c in terms), tuple(b / c for _, b, c in terms)


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
    # Cached tensors must be plain ones even when first asked for under torch.inference_mode
    # (a predict before a fit): inference tensors cannot be saved for a later backward.
    with torch.inference_mode(False):
        return _build_torch_plan(k, L, device, dtype)


def _build_torch_plan(k: int, L: int, device: torch.device, dtype: torch.dtype):
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


def _degree_of(k: int, n_monomials: int) -> int:
    L, total = 0, 1
    while total < n_monomials:
        L += 1
        total += math.comb(k + L - 1, L)
    if total != n_monomials:
        raise ValueError(f"{n_monomials} is not the number of monomials of degree <= L in {k} variables")
    return L


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
    try:
        with torch.device("cpu"):  # (a callable's own torch tensors are real even while a model is built on meta)
            values = np.asarray(f(nodes), dtype=np.float64)
    except Exception as exc:
        if not callable(sigma):
            raise
        raise TypeError(f"activation={sigma!r}: a callable activation takes and returns numpy float64 arrays (the "
                        f"quadrature nodes of its Funk-Hecke eigenvalues); it raised {type(exc).__name__}: {exc}") from exc
    if values.shape != nodes.shape:
        raise ValueError(f"activation={sigma!r} returned shape {values.shape} for an array of shape {nodes.shape}: "
                         "it must apply elementwise")
    return sphere_area(k - 1) * (weights * values) @ P
