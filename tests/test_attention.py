"""Each attention branch's fast (parallel, zonal) form against its reference, and Theorem 1."""

import pytest
import torch

from gmnet_sklearn.gm import functional as F
from gmnet_sklearn.gm.cpu import cpu_kernels_available
from gmnet_sklearn.gm.attention import ATTENTION_VARIANTS, make_attention
from gmnet_sklearn.gm.ops.dual_ska import (bidir_sfa_parallel, bidir_sfa_scan, decay_weights, sfa_parallel, sfa_scan,
                                           ska_features, ska_zonal)

torch.set_default_dtype(torch.float32)


def branch_inputs(B=3, H=2, T=9, k=5, L=3, seed=0, lengths=None):
    g = torch.Generator().manual_seed(seed)
    # Raw (off-sphere) leaves: the branches get normalise(q), as in the model, because the zonal
    # and feature forms agree on the sphere but not in their radial derivatives.
    q = torch.randn(B, H, T, k, generator=g, dtype=torch.float64)
    kk = torch.randn(B, H, T, k, generator=g, dtype=torch.float64)
    p = torch.randn(B, H, T, k, generator=g, dtype=torch.float64)
    mask = torch.ones(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths or []):
        mask[b, n:] = False
    p = p * mask[:, None, :, None]
    log_gamma = torch.nn.functional.logsigmoid(torch.randn(B, H, T, L + 1, generator=g, dtype=torch.float64) + 1.5)
    log_gamma = log_gamma * mask[:, None, :, None]
    for t in (q, kk, p, log_gamma):
        t.requires_grad_(True)
    return q, kk, p, log_gamma, mask


def on_sphere(f):
    return lambda q, k, *rest: f(F.normalise(q), F.normalise(k), *rest)


def assert_same_with_grads(f_fast, f_ref, inputs):
    f_fast, f_ref = on_sphere(f_fast), on_sphere(f_ref)
    out_fast, out_ref = f_fast(*inputs), f_ref(*inputs)
    torch.testing.assert_close(out_fast, out_ref, atol=1e-11, rtol=1e-9)
    w = torch.randn_like(out_ref)
    diff = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    # allow_unused: at L = 0 the kernel is constant, so q gets no gradient in either form.
    g_fast = torch.autograd.grad((out_fast * w).sum(), diff, allow_unused=True, materialize_grads=True)
    g_ref = torch.autograd.grad((out_ref * w).sum(), diff, allow_unused=True, materialize_grads=True)
    for a, b in zip(g_fast, g_ref):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("direct", [False, True])  # the factorised form, and the direct one long rows and captures take
@pytest.mark.parametrize("T,lengths", [(1, None), (7, None), (13, [13, 5, 1])])
@pytest.mark.parametrize("L", [0, 2, 3])
def test_sfa_parallel_equals_scan(T, lengths, L, direct, monkeypatch):
    if direct:
        from gmnet_sklearn.gm.ops.dual_ska import zonal

        monkeypatch.setattr(zonal, "_FACTOR_MAX_SPAN", -1.0)  # every span is past it
    q, k, p, lg, mask = branch_inputs(T=T, L=L, lengths=lengths)
    assert_same_with_grads(lambda *a: sfa_parallel(*a, L, causal=True), lambda *a: sfa_scan(*a, L), (q, k, p, lg))
    assert_same_with_grads(lambda *a: bidir_sfa_parallel(*a, L), lambda *a: bidir_sfa_scan(*a, L), (q, k, p, lg))


@pytest.mark.parametrize("T,lengths", [(1, None), (11, [11, 4, 2])])
@pytest.mark.parametrize("k,L", [(3, 4), (8, 3), (5, 0)])  # L = 0: a constant score, uniform attention
def test_ska_zonal_equals_features(T, lengths, k, L):
    q, kk, p, _, mask = branch_inputs(T=T, k=k, L=L, lengths=lengths)
    assert_same_with_grads(lambda q, kk, p: ska_zonal(q, kk, p, mask, L), lambda q, kk, p: ska_features(q, kk, p, mask, L), (q, kk, p))


def test_decay_weights_are_path_products():
    B, H, T, L = 2, 3, 6, 2
    lg = torch.nn.functional.logsigmoid(torch.randn(B, H, T, L + 1, dtype=torch.float64))
    gamma = lg.exp()
    W = decay_weights(lg, causal=False)
    Wc = decay_weights(lg, causal=True)
    for t in range(T):
        for s in range(T):
            fwd = gamma[:, :, s + 1 : t + 1].prod(2) if s <= t else torch.zeros(B, H, L + 1, dtype=lg.dtype)
            bwd = gamma[:, :, t:s].prod(2) if s >= t else torch.zeros(B, H, L + 1, dtype=lg.dtype)
            torch.testing.assert_close(W[..., t, s], 0.5 * (fwd + bwd))
            torch.testing.assert_close(Wc[..., t, s], fwd)


def make_layer(name, d=24, H=3, k=5, L=3):
    torch.manual_seed(0)
    return make_attention(name, d_model=d, n_heads=H, k=k, L=L).double()


# "cpu": the fused C++ kernel (DualSKA; the other variants run their eager forms for it).
_CPU_KERNEL = pytest.param("cpu", marks=pytest.mark.skipif(not cpu_kernels_available(),
                                                           reason="fused CPU kernel could not be built"))


@pytest.mark.parametrize("name", sorted(ATTENTION_VARIANTS))
@pytest.mark.parametrize("fast_impl", ["parallel", _CPU_KERNEL])
def test_module_fast_equals_reference_padded(name, fast_impl):
    layer = make_layer(name)
    B, T = 3, 9
    x = torch.randn(B, T, 24, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 6:] = False
    mask[2, 1:] = False
    conj = torch.randint(0, 2, (B, T))
    fast, ref = layer(x, conj, mask, impl=fast_impl), layer(x, conj, mask, impl="reference")
    # Outputs at padded query positions are unused: the CPU kernel may leave them zero, the eager
    # forms compute them like the reference.
    torch.testing.assert_close(fast[mask], ref[mask], atol=1e-11, rtol=1e-9)
    if fast_impl == "parallel":
        torch.testing.assert_close(fast, ref, atol=1e-11, rtol=1e-9)
    params = [x, *layer.parameters()]
    g1 = torch.autograd.grad(fast[mask].sum(), params)
    g2 = torch.autograd.grad(ref[mask].sum(), params)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


FAST_AND_REFERENCE = ["parallel", "reference", _CPU_KERNEL]


@pytest.mark.parametrize("name", sorted(ATTENTION_VARIANTS))
@pytest.mark.parametrize("impl", FAST_AND_REFERENCE)
def test_padding_does_not_change_outputs(name, impl):
    layer = make_layer(name)
    x = torch.randn(1, 7, 24, dtype=torch.float64)
    conj = torch.tensor([[0, 1, 1, 0, 1, 0, 0]])
    base = layer(x, conj, torch.ones(1, 7, dtype=torch.bool), impl)
    xp = torch.cat([x, 100 * torch.randn(1, 4, 24, dtype=torch.float64)], 1)  # junk under the padding
    conjp = torch.cat([conj, torch.ones(1, 4, dtype=torch.long)], 1)
    maskp = torch.tensor([[True] * 7 + [False] * 4])
    torch.testing.assert_close(layer(xp, conjp, maskp, impl)[:, :7], base, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", sorted(ATTENTION_VARIANTS))
def test_no_nan_for_zero_vectors_and_all_padding(name):
    layer = make_layer(name).float()
    x = torch.zeros(2, 5, 24, requires_grad=True)
    mask = torch.tensor([[True] * 5, [False] * 5])
    for impl in ("parallel", "reference", "auto"):  # "auto": the fused CPU kernel where it builds
        out = layer(x, torch.zeros(2, 5, dtype=torch.long), mask, impl)
        (g,) = torch.autograd.grad(out.sum(), x)
        assert torch.isfinite(out).all() and torch.isfinite(g).all()


def test_conjugation_flag_shifts_decay():
    layer = make_layer("bidir_sfa")
    mask = torch.ones(1, 4, dtype=torch.bool)
    lg0 = layer.log_gates(torch.zeros(1, 4, dtype=torch.long), mask)
    lg1 = layer.log_gates(torch.ones(1, 4, dtype=torch.long), mask)
    assert (lg1 > lg0).all()  # conjugated tokens keep memory longer (shift +1)
    assert not any(n == "conj_shift" for n, _ in layer.named_parameters())
    gamma = layer.gamma_logit.detach().sigmoid()
    assert gamma.min().item() == pytest.approx(0.5, abs=0.01)
    assert gamma.max().item() == pytest.approx(1 - 1 / 32, abs=0.01)


# ---- Theorem 1 and its corollary -----------------------------------------------------------


def test_multipole_identity_unit_decay():
    q, k, p, lg, _ = branch_inputs(B=2, H=2, T=8, k=6, L=3)
    q, k = F.normalise(q), F.normalise(k)
    zero = torch.zeros_like(lg)
    expected = torch.einsum("bhtm,bhtc->bhmc", F.phi(k, 3), p)
    for reverse in (False, True):
        _, M = sfa_scan(q, k, p, zero, 3, reverse=reverse, return_state=True)
        torch.testing.assert_close(M, expected, atol=1e-12, rtol=0)


def test_windowed_multipole_identity_with_gates():
    L = 3
    q, k, p, lg, _ = branch_inputs(B=2, H=2, T=8, k=6, L=L)
    q, k = F.normalise(q), F.normalise(k)
    deg = torch.as_tensor(F.degree_index(6, L))
    gamma = lg.exp()[..., deg]  # (B, H, T, D*)
    T = q.shape[2]
    phik = F.phi(k, L)
    fwd = sum(gamma[:, :, t + 1 :].prod(2)[..., None] * phik[:, :, t, :, None] * p[:, :, t, None, :] for t in range(T))
    bwd = sum(gamma[:, :, :t].prod(2)[..., None] * phik[:, :, t, :, None] * p[:, :, t, None, :] for t in range(T))
    _, Mf = sfa_scan(q, k, p, lg, L, return_state=True)
    _, Mb = sfa_scan(q, k, p, lg, L, reverse=True, return_state=True)
    torch.testing.assert_close(Mf, fwd, atol=1e-12, rtol=0)
    torch.testing.assert_close(Mb, bwd, atol=1e-12, rtol=0)


@pytest.mark.parametrize("T,bias", [(60, 1.5), (180, 0.0), (180, -3.0)])
def test_long_sequences_strong_decay_finite_and_exact(T, bias):
    # Spans of cumulative log-gates from ~20 (factorised path) to ~600 (direct path): float32
    # forward and gradients stay finite and equal the float64 reference.
    q, k, p, _, _ = branch_inputs(B=2, H=2, T=T, k=8, L=3)
    g = torch.Generator().manual_seed(3)
    lg = torch.nn.functional.logsigmoid(torch.randn(2, 2, T, 4, generator=g, dtype=torch.float64) + bias)
    lg.requires_grad_(True)
    inputs32 = [t.detach().float().requires_grad_(True) for t in (q, k, p, lg)]
    f = on_sphere(lambda *a: bidir_sfa_parallel(*a, 3))
    out32, out64 = f(*inputs32), f(q, k, p, lg)
    w = torch.randn_like(out64)
    g32 = torch.autograd.grad((out32 * w.float()).sum(), inputs32)
    g64 = torch.autograd.grad((out64 * w).sum(), (q, k, p, lg))
    assert torch.isfinite(out32).all() and all(torch.isfinite(t).all() for t in g32)
    torch.testing.assert_close(out32.double(), out64, atol=2e-4, rtol=1e-3)
    for a, b in zip(g32, g64):
        torch.testing.assert_close(a.double(), b, atol=2e-3 * b.abs().max().item(), rtol=1e-2)


def test_dual_ska_fast_path_shares_zonal_terms(monkeypatch):
    # DualSKA's parallel path computes the pair cosines' zonal terms once for both branches.
    import gmnet_sklearn.gm.ops.dual_ska as dual

    calls = []
    original = dual.zonal_terms
    monkeypatch.setattr(dual, "zonal_terms", lambda *a: calls.append(1) or original(*a))
    layer = make_layer("dual_ska")
    layer(torch.randn(2, 5, 24, dtype=torch.float64), torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.bool),
          impl="parallel")
    assert len(calls) == 1


def test_sfa_parallel_reads_nothing_on_the_host_while_a_cuda_graph_is_captured(monkeypatch):
    # the span check reads a value on the host, which capture forbids: captured, the direct form
    # runs without it (the capture itself needs a GPU: tests/test_cuda_graphs.py)
    import gmnet_sklearn.gm.ops.dual_ska.zonal as zonal

    q, k, p, lg, _ = branch_inputs(T=7, k=5, L=3)
    q, k = F.normalise(q), F.normalise(k)
    direct = []
    monkeypatch.setattr(zonal, "decay_weights", lambda *a: direct.append(1) or decay_weights(*a))
    expected = sfa_parallel(q, k, p, lg, 3, causal=False)
    assert not direct  # a short, mild sequence: the factorised form
    monkeypatch.setattr(zonal, "_capturing", lambda x: True)
    monkeypatch.setattr(torch.Tensor, "__float__", lambda self: pytest.fail("a host read while capturing"))
    got = sfa_parallel(q, k, p, lg, 3, causal=False)
    assert direct
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_sfa_parallel_keeps_float32_gradients_finite_for_a_short_row_with_strong_decay():
    """Padding gates are transparent, so a row shorter than half the batch length has its whole
    decay before the mid position: centred there, the factors reached exp(span) and float32
    gradients overflowed. Centred on the value range, each factor stays within exp(span / 2)."""
    B, H, T, k, L = 2, 1, 64, 8, 3
    g = torch.Generator().manual_seed(0)
    q, kk, p = (torch.randn(B, H, T, k, generator=g) for _ in range(3))
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[0, 20:] = False  # a 20-token row beside a full one
    p = p * mask[:, None, :, None]
    lg = torch.full((B, H, T, L + 1), -3.975) * mask[:, None, :, None]  # row 0's span: 79.5, under the factor limit
    lg[1] = -0.5  # row 1: a mild decay
    inputs = [t.clone().requires_grad_(True) for t in (q, kk, p, lg)]
    out = on_sphere(lambda *a: bidir_sfa_parallel(*a, L))(*inputs)
    w = 1e5 * torch.randn(out.shape, generator=g)  # large, to show the margin
    grads = torch.autograd.grad((out * w).sum(), inputs)
    assert all(torch.isfinite(t).all() for t in grads)
    ref_inputs = [t.detach().double().requires_grad_(True) for t in (q, kk, p, lg)]
    ref = on_sphere(lambda *a: bidir_sfa_scan(*a, L))(*ref_inputs)
    ref_grads = torch.autograd.grad((ref * w.double()).sum(), ref_inputs)
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a.double(), b, rtol=1e-3, atol=1e-3 * float(b.abs().max()))
