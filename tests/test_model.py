"""The full Chem-GMNet: parameter counts (docs/architecture.md), read-outs, training smoke test."""

import copy

import pytest
import torch

from gmnet_sklearn.gm import GMNet, GMNetForMaskedLM, functional as F
from gmnet_sklearn.gm.cpu import cpu_kernels_available
from gmnet_sklearn.gm.embedding import SHEmbedding

PARAMS = {
    (6, 2): 1_688_513, (6, 3): 1_871_699, (6, 4): 2_256_350,
    (8, 2): 1_786_526, (8, 3): 2_196_818, (8, 4): 3_061_970,
    (10, 2): 1_899_191, (10, 3): 2_668_457, (10, 4): 4_401_392,
}


def count(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


@pytest.mark.parametrize("kL,expected", sorted(PARAMS.items()))
def test_parameter_counts_match_paper(kL, expected):
    k, L = kL
    assert count(GMNet(591, 2, k=k, L=L)) == expected


def test_per_module_breakdown_k8_L3():
    m = GMNet(591, 2)
    enc = m.encoder
    assert count(enc.embedding) == 216_732
    assert all(count(layer.attn) + count(layer.ln_attn) == 546_108 for layer in enc.layers)
    assert all(count(layer.ffn) + count(layer.ln_ffn) == 64_128 for layer in enc.layers)
    assert sum(count(layer) for layer in enc.layers) == 3 * (546_108 + 64_128)
    assert count(enc.ln_f) == 768
    assert count(m.dense) + count(m.out_proj) == 148_610
    assert m.n_parameters() == 2_196_818


def test_variants_and_adaptive():
    base = count(GMNet(591, 2, attention="bidir_sfa"))
    assert base == 2_196_818 - 3 * 12  # no fusion vector
    assert count(GMNet(591, 2, attention="gated_sfa")) == base
    assert count(GMNet(591, 2, attention="ska")) == base - 3 * 12 * 4  # no decay logits
    assert count(GMNet(591, 2, adaptive=True)) == 2_196_818 + 3 * 4
    with pytest.raises(ValueError, match="unknown attention"):
        GMNet(591, 2, attention="softmax")


def tiny(**kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=30, n_outputs=2, k=4, L=2, d_model=32, n_layers=2, n_heads=4, dropout=0.0)
    cfg.update(kw)
    return GMNet(**cfg)


def batch(B=4, T=9, vocab=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 6:] = False
    mask[3, 2:] = False
    ids[~mask] = 0
    conj = torch.randint(0, 2, (B, T), generator=g) * mask
    return ids, conj, mask


def test_forward_shape_and_impls_agree():
    m = tiny().double().eval()
    ids, conj, mask = batch()
    out = m(ids, conj, mask)
    assert out.shape == (4, 2)
    torch.testing.assert_close(out, m(ids, conj, mask, impl="reference"), atol=1e-11, rtol=0)
    # mask and conj default from the ids
    torch.testing.assert_close(m(ids, conj), out)


def test_cpu_autocast_bf16_forward_runs_and_is_close():
    # CPU autocast hands the C++ kernels bf16 projections (they take float32/float64) and the read-outs
    # bf16 inputs beside float32 weights (the eager form's in-place matmuls need one dtype): "auto"
    # runs the eager attention and the reference read-out there
    m = tiny().eval()
    ids, conj, mask = batch()
    with torch.no_grad():
        full = m(ids, conj, mask)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = m(ids, conj, mask)
    assert torch.isfinite(half).all()
    torch.testing.assert_close(half.float(), full, atol=2e-2, rtol=2e-2)  # measured about 4e-3; outputs span about 0.3
    # and a model cast to bf16 whole: the C++ kernels take float32/float64 only, the eager forms run
    with torch.no_grad():
        cast = copy.deepcopy(m).to(torch.bfloat16)(ids, conj, mask)
    assert cast.dtype == torch.bfloat16
    torch.testing.assert_close(cast.float(), full, atol=2e-2, rtol=2e-2)


def test_embedding_and_ffn_fast_equal_reference():
    m = tiny().double()
    ids, _, _ = batch()
    emb = m.encoder.embedding
    torch.testing.assert_close(emb(ids), emb.reference(ids), atol=1e-12, rtol=0)
    # Gradients too: the forward computes each distinct id's row once (CPU) and scatters it.
    w = torch.randn(*ids.shape, emb.d_model, dtype=torch.float64)
    grads = []
    for form in (emb, emb.reference):
        emb.zero_grad()
        (form(ids) * w).sum().backward()
        grads.append([p.grad.clone() for p in emb.parameters()])
    for fast, ref in zip(*grads):
        torch.testing.assert_close(fast, ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(emb.rows()[ids], emb(ids), atol=1e-12, rtol=0)  # the GPU form
    # the SH-FFN, forward and backward, also with the learnt per-degree scales (adaptive=True)
    from gmnet_sklearn.gm.harmonic_linear import SHFFN

    adaptive = SHFFN(32, 8, 3, adaptive=True).double()
    assert isinstance(adaptive.lam, torch.nn.Parameter)
    for ffn in (m.encoder.layers[0].ffn, adaptive):
        x = torch.randn(3, 5, 32, dtype=torch.float64)
        w = torch.randn(3, 5, 32, dtype=torch.float64)
        grads = []
        for form in (ffn, ffn.reference):
            ffn.zero_grad()
            xg = x.clone().requires_grad_(True)
            out = form(xg)
            (out * w).sum().backward()
            grads.append([out.detach(), xg.grad] + [p.grad.clone() for p in ffn.parameters()])
        for fast, ref in zip(*grads):
            torch.testing.assert_close(fast, ref, atol=1e-12, rtol=0)


def test_embedding_gradients_repeat_bitwise_with_two_threads():
    # Repeated token ids must not make the backward thread-order dependent (plain indexing's
    # backward accumulated them with atomics on CPU: seeded multi-threaded fits did not repeat).
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        emb = SHEmbedding(40, 384, 8, 3).eval()
        ids = torch.randint(1, 40, (32, 55), generator=torch.Generator().manual_seed(1))
        w = torch.randn(32, 55, 384, generator=torch.Generator().manual_seed(2))

        def grads():
            emb.zero_grad()
            (emb(ids) * w).sum().backward()
            return torch.cat([p.grad.flatten() for p in emb.parameters()])

        first = grads()
        for _ in range(8):
            assert torch.equal(grads(), first)
    finally:
        torch.set_num_threads(threads)


def test_padding_and_all_padding_rows():
    m = tiny().eval()
    ids, conj, mask = batch()
    out = m(ids, conj, mask)
    alone = m(ids[3:4, :2], conj[3:4, :2], mask[3:4, :2])
    torch.testing.assert_close(alone, out[3:4], atol=1e-5, rtol=0)
    mask[2] = False
    ids[2] = 0
    out2 = m(ids, conj, mask)
    assert torch.isfinite(out2).all()


def test_multipole_readout_shapes_and_unit_decay_identity():
    m = tiny().double()
    ids, conj, mask = batch()
    moments = m.multipole_moments(ids, conj, mask)
    D = F.harmonic_dim(4, 2)
    assert moments["mean"].shape == (4, 2, 4, D, 4)
    torch.testing.assert_close(moments["mean"], 0.5 * (moments["forward"] + moments["backward"]))
    # Unit decay: every terminal state is sum_t Phi(k^_t) p_t^T (Theorem 1) for layer 0.
    with torch.no_grad():
        for layer in m.encoder.layers:
            layer.attn.gamma_logit.fill_(60.0)  # sigmoid = 1 to float64 precision
    moments = m.multipole_moments(ids, conj, mask)
    attn = m.encoder.layers[0].attn
    x = m.encoder.layers[0].ln_attn(m.encoder.embedding(ids))
    _, k, p = attn.project(x, mask)
    expected = torch.einsum("bhtm,bhtc->bhmc", F.phi(k, 2), p)
    torch.testing.assert_close(moments["forward"][:, 0], expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(moments["backward"][:, 0], expected, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="no Gated-SFA"):
        tiny(attention="ska").multipole_moments(ids, conj, mask)


def test_overfits_tiny_regression_set():
    torch.manual_seed(0)
    m = tiny(n_outputs=1)
    ids, conj, mask = batch(B=16, T=10, seed=1)
    y = torch.randn(16, 1, generator=torch.Generator().manual_seed(2))
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(ids, conj, mask), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])


@pytest.mark.parametrize("lm_head", ["linear", "sphere"])
def test_masked_lm_head(lm_head):
    torch.manual_seed(0)
    lm = GMNetForMaskedLM(30, k=4, L=2, d_model=32, n_layers=1, n_heads=4, lm_head=lm_head)
    ids, conj, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    loss, logits = lm(ids, conj, mask, labels=labels)
    assert logits.shape == (4, 9, 30) and torch.isfinite(loss)
    loss.backward()
    grad = lm.encoder.embedding.P.grad  # the token directions learn from the masked positions
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("fast", ["parallel", pytest.param("cpu", marks=pytest.mark.skipif(
    not cpu_kernels_available(), reason="fused CPU kernel could not be built"))])
def test_training_trajectory_fast_equals_reference_float64(fast, pack):
    # Same seed, batches and dropout masks: Adam steps through the fast forms (eager zonal, or
    # the fused CPU kernel) and through the references give the same losses and weights (exact
    # arithmetic up to float64 rounding). Both run padded, or both packed (gm/packing.py), so
    # that dropout draws its masks over the same layout.
    ids, conj, mask = batch(B=8, T=11, seed=3)
    y = torch.randn(8, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    trajectories = {}
    for impl in (fast, "reference"):
        torch.manual_seed(0)
        m = tiny(n_outputs=1, dropout=0.1).double()
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        losses = []
        for _ in range(8):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(ids, conj, mask, impl=impl, pack=pack), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        trajectories[impl] = (losses, torch.cat([p.detach().flatten() for p in m.parameters()]))
    (la, pa), (lb, pb) = trajectories[fast], trajectories["reference"]
    assert max(abs(a - b) for a, b in zip(la, lb)) < 1e-10
    torch.testing.assert_close(pa, pb, atol=1e-9, rtol=0)
    assert la[-1] < la[0]


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
@pytest.mark.parametrize("cfg", [dict(k=4, L=2), dict(k=8, L=3, d_model=48, n_heads=4)], ids=["k4L2", "k8L3"])
def test_cuda_model_matches_cpu_reference(cfg):
    # The whole model as the estimators run it on a GPU (impl="auto": the Triton kernel when Triton
    # is installed, else the eager zonal forms; padded layout), float32, against the float64
    # reference forms on CPU with the same weights: outputs and every parameter's gradient.
    m = tiny(n_outputs=3, **cfg).eval()  # eval: no dropout, so both sides compute one function
    ids, conj, mask = batch(B=5, T=13, seed=7)
    mask[4, :] = False  # an all-padding row
    ids[~mask] = 0
    conj = conj * mask
    w = torch.randn(5, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    results = {}
    for device, dtype, impl in (("cuda", torch.float32, "auto"), ("cpu", torch.float64, "reference")):
        mm = copy.deepcopy(m).to(device=device, dtype=dtype)
        out = mm(ids.to(device), conj.to(device), mask.to(device), impl=impl)
        (out.double().cpu() * w).sum().backward()
        results[device] = (out.detach().double().cpu(), {n: p.grad.double().cpu() for n, p in mm.named_parameters()})
    (out_gpu, g_gpu), (out_ref, g_ref) = results["cuda"], results["cpu"]
    assert torch.isfinite(out_gpu).all()
    rel = lambda a, b: ((a - b).norm() / b.norm().clamp_min(1e-30)).item()  # noqa: E731
    assert rel(out_gpu, out_ref) < 1e-5, rel(out_gpu, out_ref)
    bad = {n: rel(g_gpu[n], g_ref[n]) for n in g_ref if g_ref[n].norm() > 0 and rel(g_gpu[n], g_ref[n]) > 1e-4}
    assert not bad, bad
    assert all(g_gpu[n].abs().max() == 0 for n in g_ref if g_ref[n].norm() == 0)


@needs_cuda
def test_cuda_training_steps_match_cpu():
    # A few Adam steps on the GPU (fused Adam, Triton path) follow the CPU float64 reference run
    # closely: the same losses to float32 accuracy (dropout off, so both see the same function).
    ids, conj, mask = batch(B=8, T=11, seed=3)
    y = torch.randn(8, 1, generator=torch.Generator().manual_seed(4))
    losses = {}
    for device, dtype, impl, fused in (("cuda", torch.float32, "auto", True), ("cpu", torch.float64, "reference", False)):
        torch.manual_seed(0)
        m = tiny(n_outputs=1, k=8, L=3, d_model=48, n_heads=4).to(device=device, dtype=dtype)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=fused)
        args = [t.to(device) for t in (ids, conj, mask)]
        trace = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(*args, impl=impl), y.to(device=device, dtype=dtype))
            loss.backward()
            opt.step()
            trace.append(loss.item())
        losses[device] = trace
    assert max(abs(a - b) / abs(b) for a, b in zip(losses["cuda"], losses["cpu"])) < 1e-4, losses
    assert losses["cuda"][-1] < losses["cuda"][0]
