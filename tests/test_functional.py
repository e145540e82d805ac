"""Math identities of the spherical-harmonic primitives (docs/math.md section 1)."""

import math

import numpy as np
import pytest
import torch
from scipy import special

from gmnet_sklearn.gm import functional as F
from gmnet_sklearn.gm.harmonic_map import HarmonicMap
from gmnet_sklearn.gm.ops.sphere_readout import sphere_readout
from gmnet_sklearn.gm.cpu import cpu_kernels_available

CASES = [(3, 4), (4, 3), (5, 2), (8, 3), (10, 2)]


def random_sphere(n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return F.normalise(torch.randn(n, k, generator=g, dtype=torch.float64))


def test_dimensions():
    assert [F.n_harmonics(8, l) for l in range(4)] == [1, 8, 35, 112]
    assert F.harmonic_dim(8, 3) == 156
    assert F.n_harmonics(3, 5) == 11  # 2l + 1 on S^2
    for k, L in CASES:
        b = F.harmonic_basis(k, L)
        assert b.coeffs.shape == (F.harmonic_dim(k, L), math.comb(k + L, L))  # all monomials of degree <= L
        assert list(np.bincount(F.degree_index(k, L))) == [F.n_harmonics(k, l) for l in range(L + 1)]
    assert F.sphere_area(3) == pytest.approx(4 * math.pi)
    with pytest.raises(ValueError, match="k must be"):
        F.harmonic_basis(2, 3)
    with pytest.raises(ValueError, match="L must be"):
        F.harmonic_basis(5, -1)


@pytest.mark.parametrize("k", [3, 4, 8, 11])
def test_gegenbauer_matches_scipy(k):
    t = np.linspace(-1, 1, 101)
    lam = (k - 2) / 2
    P = F.gegenbauer_normalised(6, k, t)
    for l in range(7):
        ref = special.eval_gegenbauer(l, lam, t) / special.eval_gegenbauer(l, lam, 1.0)
        np.testing.assert_allclose(P[:, l], ref, atol=1e-12)
        np.testing.assert_allclose(F.gegenbauer(l, lam, t), special.eval_gegenbauer(l, lam, t), atol=1e-10)


@pytest.mark.parametrize("k,L", CASES + [(3, 0), (6, 5)])
def test_addition_theorem(k, L):
    x, y = random_sphere(500, k, 1), random_sphere(500, k, 2)
    px, py = F.phi(x, L), F.phi(y, L)
    deg = torch.as_tensor(F.degree_index(k, L))
    P = F.gegenbauer_normalised(L, k, (x * y).sum(-1))
    for l in range(L + 1):
        lhs = (px[:, deg == l] * py[:, deg == l]).sum(-1)
        rhs = F.n_harmonics(k, l) / F.sphere_area(k) * P[:, l]
        torch.testing.assert_close(lhs, rhs, atol=1e-12, rtol=1e-10)


def sphere_product_quadrature(k, degree):
    """Exact product rule on S^{k-1} for polynomials up to `degree` (hyperspherical coordinates)."""
    n = degree // 2 + 2
    axes, weights = [], []
    for i in range(k - 2):  # polar angles, weight (1 - t^2)^{(k - 3 - i) / 2}
        a = (k - 3 - i) / 2
        t, w = special.roots_jacobi(n, a, a)
        axes.append(t)
        weights.append(w)
    m = degree + 2
    phis = 2 * np.pi * np.arange(m) / m
    wts = np.ones(1)
    coords = np.ones((1, 0))
    sinprod = np.ones(1)
    for t, w in zip(axes, weights):
        coords = np.concatenate([np.repeat(coords, len(t), 0), np.outer(sinprod, t).reshape(-1, 1)], axis=1)
        sinprod = np.outer(sinprod, np.sqrt(1 - t**2)).reshape(-1)
        wts = np.outer(wts, w).reshape(-1)
    last = np.stack([np.cos(phis), np.sin(phis)], axis=1)
    coords = np.concatenate([np.repeat(coords, m, 0), (sinprod[:, None, None] * last[None]).reshape(-1, 2)], axis=1)
    wts = np.repeat(wts, m) * (2 * np.pi / m)
    return torch.as_tensor(coords), torch.as_tensor(wts)


@pytest.mark.parametrize("k,L", [(3, 4), (4, 3), (5, 3), (6, 2)])
def test_orthonormal_exact_quadrature(k, L):
    x, w = sphere_product_quadrature(k, 2 * L)
    assert torch.allclose(x.norm(dim=1), torch.ones(len(x), dtype=x.dtype))
    assert w.sum().item() == pytest.approx(F.sphere_area(k), rel=1e-12)
    Y = F.phi(x, L)
    gram = Y.T @ (w[:, None] * Y)
    torch.testing.assert_close(gram, torch.eye(Y.shape[1], dtype=gram.dtype), atol=1e-11, rtol=0)


def test_orthonormal_monte_carlo_k8():
    n = 400_000
    x = random_sphere(n, 8, 3)
    Y = F.phi(x, 3)
    gram = Y.T @ Y * (F.sphere_area(8) / n)
    err = (gram - torch.eye(156, dtype=gram.dtype)).abs().max().item()
    assert err < 0.05  # Monte-Carlo error ~ 1/sqrt(n) times the features' scale


@pytest.mark.parametrize("k,L", [(3, 4), (8, 3), (10, 3)])
def test_harmonic_laplacian_zero(k, L):
    # Phi = A @ monomials is a homogeneous harmonic polynomial off the sphere too.
    x = torch.randn(6, k, dtype=torch.float64, requires_grad=True)
    Y = F.phi(x, L)
    lap = torch.zeros_like(Y)
    for m in range(Y.shape[1]):
        (g,) = torch.autograd.grad(Y[:, m].sum(), x, create_graph=True)
        for i in range(k):
            (h,) = torch.autograd.grad(g[:, i].sum(), x, retain_graph=True)
            lap[:, m] += h[:, i]
    assert lap.abs().max().item() < 1e-9
    # ... and not trivially: the features themselves are of order 1.
    assert Y[:, 1:].abs().max().item() > 0.1


@pytest.mark.parametrize("k,L", [(3, 3), (8, 3)])
def test_rotation_acts_orthogonally_per_degree(k, L):
    q, _ = torch.linalg.qr(torch.randn(k, k, dtype=torch.float64, generator=torch.Generator().manual_seed(5)))
    x = random_sphere(2000, k, 6)
    Y, Yr = F.phi(x, L), F.phi(x @ q.T, L)
    deg = torch.as_tensor(F.degree_index(k, L))
    for l in range(L + 1):
        a, b = Y[:, deg == l], Yr[:, deg == l]
        D = torch.linalg.lstsq(a, b).solution  # b = a D
        torch.testing.assert_close(a @ D, b, atol=1e-10, rtol=0)
        torch.testing.assert_close(D.T @ D, torch.eye(D.shape[0], dtype=D.dtype), atol=1e-9, rtol=0)
    # A rotation mixes features only within a degree: the full Gram of rotated features is kept.
    torch.testing.assert_close(Yr @ Yr.T, Y @ Y.T, atol=1e-10, rtol=0)


@pytest.mark.parametrize("k,L", [(3, 4), (8, 3), (10, 4)])
def test_schoenberg_kernels_psd(k, L):
    x = random_sphere(300, k, 7)
    cos = (x @ x.T).clamp(-1, 1)
    P = F.gegenbauer_normalised(L, k, cos)
    for coeffs in (F.zonal_coefficients(k, L), np.abs(F.funk_hecke("gelu", k, L)) * F.zonal_coefficients(k, L)):
        K = P @ torch.as_tensor(coeffs)
        assert torch.linalg.eigvalsh(K).min().item() > -1e-9 * K.abs().max().item()
    # Zonal identity: the Gram of Phi features equals the polynomial kernel.
    Y = F.phi(x, L)
    torch.testing.assert_close(Y @ Y.T, P @ torch.as_tensor(F.zonal_coefficients(k, L)), atol=1e-11, rtol=0)


@pytest.mark.parametrize("name,fn", [("gelu", lambda t: 0.5 * t * (1 + special.erf(t / math.sqrt(2)))),
                                     ("relu", lambda t: np.maximum(t, 0)), ("tanh", np.tanh)])
@pytest.mark.parametrize("k", [3, 8])
def test_funk_hecke_rebuilds_activation(name, fn, k):
    # Error in the sphere's own norm, L2 with weight (1 - t^2)^{(k-3)/2}: the truncated Funk-Hecke
    # series is the best degree-L approximation there, so the error can only fall as L grows.
    a = (k - 3) / 2
    t, w = special.roots_jacobi(3000, a, a)
    interior = np.linspace(-0.8, 0.8, 161)
    errors, sup = [], []
    for L in (1, 2, 4, 8, 16):
        lam = F.funk_hecke(name, k, L, n_quad=2000)
        coeffs = F.zonal_coefficients(k, L) * lam
        approx = F.gegenbauer_normalised(L, k, t) @ coeffs
        errors.append(np.sqrt(np.sum(w * (approx - fn(t)) ** 2) / np.sum(w)))
        sup.append(np.abs(F.gegenbauer_normalised(L, k, interior) @ coeffs - fn(interior)).max())
    assert all(b <= a + 1e-12 for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.05 * errors[0], errors
    assert sup[-1] < (2e-2 if name == "relu" else 1e-5), sup


def test_funk_hecke_through_phi():
    k, L = 5, 6
    u, v = random_sphere(200, k, 8), random_sphere(200, k, 9)
    lam = torch.as_tensor(F.funk_hecke("tanh", k, L))[torch.as_tensor(F.degree_index(k, L))]
    lhs = (F.phi(u, L) * lam * F.phi(v, L)).sum(-1)
    torch.testing.assert_close(lhs, torch.tanh((u * v).sum(-1)), atol=2e-3, rtol=0)


def test_funk_hecke_polynomial_exact():
    # A quadratic is reproduced exactly at L = 2 (Gauss-Jacobi is exact for it).
    k = 7
    t = np.linspace(-1, 1, 11)
    lam = F.funk_hecke("quadratic", k, 2)
    np.testing.assert_allclose(F.gegenbauer_normalised(2, k, t) @ (F.zonal_coefficients(k, 2) * lam), t**2, atol=1e-12)
    with pytest.raises(ValueError, match="unknown zonal activation"):
        F.funk_hecke("swishy", 8, 3)


def test_normalise_zero_vector_is_finite():
    z = torch.zeros(3, 8, requires_grad=True)
    out = F.phi(F.normalise(z), 3)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(z.grad).all()


def test_basis_is_deterministic_and_cached():
    a = F.harmonic_basis(8, 3).coeffs
    F.harmonic_basis.cache_clear()
    b = F.harmonic_basis(8, 3).coeffs
    np.testing.assert_array_equal(a, b)


def _readout_reference(weight, zs, scales):
    """Plain autograd: explicit monomials of the normalised inputs, then a batched matmul."""
    L = F._degree_of(zs[0].shape[1], weight.shape[-1])
    out = 0
    for b, z in enumerate(zs):
        m = F.monomials(F.normalise(z.transpose(1, 2)), L).transpose(1, 2)  # (G, n_mono, N)
        s = 1.0 if scales is None else scales[b][:, None, None]
        out = out + s * (weight @ m)
    return out


READOUT_IMPLS = ["torch", "gather", pytest.param("cpu", marks=pytest.mark.skipif(
    not cpu_kernels_available(), reason="CPU extension could not be built"))]


@pytest.mark.parametrize("impl", READOUT_IMPLS)
@pytest.mark.parametrize("k,L", [(3, 0), (3, 1), (3, 4), (8, 3), (5, 2)])
@pytest.mark.parametrize("n_branches,scaled", [(1, False), (2, True), (1, True)])
@pytest.mark.parametrize("G,c,N", [(2, 3, 7), (3, 10, 37)])  # odd N; c and N off the kernel's blocks of 8 and 16
def test_sphere_readout_matches_reference_with_gradients(impl, k, L, n_branches, scaled, G, c, N):
    g = torch.Generator().manual_seed(k * 10 + L)
    n_mono = F.harmonic_basis(k, L).n_monomials
    weight = torch.randn(G, c, n_mono, dtype=torch.float64, generator=g, requires_grad=True)
    zs = [torch.randn(G, k, N, dtype=torch.float64, generator=g).mul(2.0).requires_grad_() for _ in range(n_branches)]
    scales = [torch.rand(G, dtype=torch.float64, generator=g).requires_grad_() for _ in zs] if scaled else None
    fast = sphere_readout(weight, zs, scales, impl=impl)
    ref = _readout_reference(weight, zs, scales)
    torch.testing.assert_close(fast, ref, atol=1e-12, rtol=1e-12)
    inputs = [weight, *zs, *(scales or [])]
    gout = torch.randn_like(ref)
    g_ref = torch.autograd.grad(ref, inputs, gout, allow_unused=True)  # L = 0 does not depend on z
    for a, b, x in zip(torch.autograd.grad(fast, inputs, gout), g_ref, inputs):
        torch.testing.assert_close(a, torch.zeros_like(x) if b is None else b, atol=1e-11, rtol=1e-10)
    if k <= 5 and N < 10:
        assert torch.autograd.gradcheck(
            lambda w, *args: sphere_readout(w, args[:n_branches], args[n_branches:] or None, impl=impl), tuple(inputs))


@pytest.mark.parametrize("impl", READOUT_IMPLS)
def test_sphere_readout_float32_matches_float64(impl):
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(12, 32, 165, dtype=torch.float64, generator=g, requires_grad=True)
    zs = [torch.randn(12, 8, 50, dtype=torch.float64, generator=g).requires_grad_() for _ in range(2)]
    scales = [torch.rand(12, dtype=torch.float64, generator=g).requires_grad_() for _ in zs]
    ref = sphere_readout(weight, zs, scales, impl="torch")
    leaves32 = [t.detach().float().requires_grad_() for t in (weight, *zs, *scales)]
    out32 = sphere_readout(leaves32[0], leaves32[1:3], leaves32[3:], impl=impl)
    torch.testing.assert_close(out32.double(), ref, atol=1e-4, rtol=1e-4)
    gout = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    g64 = torch.autograd.grad(ref, [weight, *zs, *scales], gout)
    g32 = torch.autograd.grad(out32, leaves32, gout.float())
    for a, b in zip(g32, g64):
        torch.testing.assert_close(a.double(), b, atol=1e-4 * (1 + b.abs().max().item()), rtol=1e-3)


@pytest.mark.parametrize("impl", ["auto", *READOUT_IMPLS])  # "auto": the CPU extension where it is available
def test_sphere_readout_zero_vectors_have_finite_gradients(impl):
    # Padded positions reach the read-outs as zero vectors (e.g. the attention's padded rows).
    weight = torch.randn(1, 4, F.harmonic_basis(8, 3).n_monomials, dtype=torch.float64, requires_grad=True)
    z = torch.zeros(1, 8, 5, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        z[0, :, 1] = torch.randn(8, dtype=torch.float64)  # one real vector among zeros
    out = sphere_readout(weight, [z], impl=impl)
    out.square().sum().backward()
    assert torch.isfinite(z.grad).all() and torch.isfinite(weight.grad).all()
    ref_z = z.detach().clone().requires_grad_()
    ref_w = weight.detach().clone().requires_grad_()
    ref = _readout_reference(ref_w, [ref_z], None)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(z.grad, ref_z.grad, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(weight.grad, ref_w.grad, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("k,L", [(3, 0), (3, 4), (8, 3), (5, 2)])
def test_harmonic_map_is_phi(k, L):
    sh = HarmonicMap(k, L).double()
    z = torch.randn(7, k, dtype=torch.float64)
    torch.testing.assert_close(sh(z), F.phi(F.normalise(z), L), atol=1e-12, rtol=0)
    w, b = torch.randn(5, sh.dim, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    torch.testing.assert_close(sh.readout(z[None, :, :].expand(2, 7, k), w, b)[1],
                               F.phi(F.normalise(z), L) @ w.T + b, atol=1e-12, rtol=0)


@pytest.mark.parametrize("impl", READOUT_IMPLS)
def test_sphere_readout_frozen_weight_and_inference(impl):
    # Without a weight gradient the CPU kernel does not keep the fused monomials; input
    # gradients and no-grad outputs are unchanged.
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(2, 5, 165, dtype=torch.float64, generator=g)
    z = torch.randn(2, 8, 19, dtype=torch.float64, generator=g, requires_grad=True)
    out = sphere_readout(weight, [z], impl=impl)
    ref = _readout_reference(weight, [z], None)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
    gout = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    torch.testing.assert_close(torch.autograd.grad(out, z, gout)[0], torch.autograd.grad(ref, z, gout)[0], atol=1e-11, rtol=1e-10)
    with torch.inference_mode():
        torch.testing.assert_close(sphere_readout(weight, [z.detach()], impl=impl), ref.detach(), atol=1e-12, rtol=1e-12)


def test_cached_plans_first_built_in_inference_mode_still_train():
    """A predict (torch.inference_mode) before any fit must not leave inference tensors in the
    cached monomial plan: a later backward through phi saves them."""
    F._torch_plan.cache_clear()
    x = torch.nn.functional.normalize(torch.randn(5, 4, dtype=torch.float64), dim=-1)
    with torch.inference_mode():
        F.phi(x, 3)
    leaf = x.clone().requires_grad_(True)
    F.phi(leaf, 3).sum().backward()
    assert leaf.grad is not None and torch.isfinite(leaf.grad).all()


def test_the_harmonic_maps_float64_master_survives_dtype_round_trips():
    """Found in review: .float() cast the float64 coefficient table too, so a model made float32
    and then float64 again read Phi through rounded coefficients."""
    import torch

    from gmnet_sklearn.gm.harmonic_linear import SHFFN

    m = SHFFN(16, 8, 3)
    m.float()
    m.double()
    exact = torch.as_tensor(F.harmonic_basis(8, 3).coeffs, dtype=torch.float64)
    assert m.sh.coeffs.dtype == torch.float64 and torch.equal(m.sh.coeffs, exact)


def test_moving_the_harmonic_map_keeps_its_coefficient_tensor():
    """A move that changes no dtype keeps the buffer (a CUDA graph captured before reads it)."""
    from gmnet_sklearn.gm.harmonic_map import HarmonicMap

    m = HarmonicMap(8, 3)
    before = m.coeffs
    m.to("cpu")
    m.share_memory()
    assert m.coeffs.data_ptr() == before.data_ptr() and m.coeffs.is_shared()
