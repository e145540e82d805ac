"""Token packing (gm/packing.py): the packed forward against the padded one, which is the reference.

The packed path runs the position-wise work on real tokens only; every real token's output,
the pooled molecule vectors and all parameter gradients must equal the padded forward's.
"""

import pytest
import torch

from gmnet_sklearn.gm import cpu as cpu_kernels
from gmnet_sklearn.gm.packing import TokenPacking
from gmnet_sklearn.gm.transformer import GMNet, GMNetEncoder

IMPLS = ["parallel", "reference",
         pytest.param("cpu", marks=pytest.mark.skipif(not cpu_kernels.cpu_kernels_available(),
                                                      reason="fused CPU kernel could not be built"))]


def batch(lengths, T, vocab=40, seed=0):
    """Right-padded ids, conjugation flags and mask for rows of the given lengths."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.arange(T)[None] < torch.tensor(lengths)[:, None]
    ids = torch.randint(1, vocab, (len(lengths), T), generator=g) * mask
    conj = torch.randint(0, 2, (len(lengths), T), generator=g) * mask
    return ids, conj, mask


def test_packing_layout_round_trip_and_pool():
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)  # a hole, an empty row
    packing = TokenPacking.from_mask(mask)
    assert packing.n_tokens == 8 and packing.lengths.tolist() == [3, 0, 5]
    assert packing.batch.tolist() == [0, 0, 0, 2, 2, 2, 2, 2]
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    packed = packing.pack(x)
    assert torch.equal(packed, x[mask])
    full = packing.unpack(packed)
    assert torch.equal(full[mask], x[mask]) and not full[~mask].any()
    cols = torch.randn(2, 3, 15)
    assert torch.equal(packing.pack_columns(cols), cols[..., mask.reshape(-1)])
    pooled = packing.mean_pool(packed)
    w = mask.to(x.dtype).unsqueeze(-1)
    torch.testing.assert_close(pooled, (x * w).sum(1) / w.sum(1).clamp_min(1), rtol=0, atol=1e-15)
    assert not pooled[1].any()


def test_packing_rejects_bad_mask_shape():
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        TokenPacking.from_mask(torch.ones(2, 3, 4, dtype=torch.bool))


def _outputs_and_grads(model, ids, conj, mask, impl, pack):
    model.zero_grad()
    out = model(ids, conj, mask, impl=impl, pack=pack)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    (out * weights).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("T,lengths", [(13, [13, 7, 1, 0, 10]), (6, [5, 6, 2]), (21, [3, 21, 20, 9])])
def test_packed_model_equals_padded_forward_and_backward(impl, T, lengths):
    torch.manual_seed(0)
    model = GMNet(40, 2, d_model=48, n_layers=2, n_heads=4, k=5, L=2).double().eval()
    ids, conj, mask = batch(lengths, T)
    out_pad, grads_pad = _outputs_and_grads(model, ids, conj, mask, impl, pack=False)
    out_pack, grads_pack = _outputs_and_grads(model, ids, conj, mask, impl, pack=True)
    torch.testing.assert_close(out_pack, out_pad, rtol=0, atol=1e-12)
    assert grads_pack.keys() == grads_pad.keys()
    for name in grads_pad:
        torch.testing.assert_close(grads_pack[name], grads_pad[name], rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("impl", IMPLS)
def test_packed_encoder_states_equal_padded_at_real_tokens(impl):
    torch.manual_seed(1)
    enc = GMNetEncoder(40, k=4, L=3, d_model=24, n_layers=2, n_heads=2).double().eval()
    ids, conj, mask = batch([9, 4, 0, 1], 9, seed=3)
    h, packing = enc.forward_packed(ids, conj, mask, impl)
    torch.testing.assert_close(h, enc(ids, conj, mask, impl)[mask], rtol=0, atol=1e-12)
    assert torch.equal(packing.index, mask.reshape(-1).nonzero().squeeze(1))


def test_pool_packs_on_cpu_only_when_it_saves_work(monkeypatch):
    calls = []
    original = GMNetEncoder.forward_packed

    def spy(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GMNetEncoder, "forward_packed", spy)
    model = GMNet(40, 1, d_model=16, n_layers=1, n_heads=2, k=4, L=2).eval()
    ids, conj, mask = batch([5, 2], 5)
    model(ids, conj, mask)
    assert len(calls) == 1  # padding on CPU: packed
    model(ids, conj, mask, impl="reference")
    assert len(calls) == 1  # the reference stays the paper's padded form
    full_ids, full_conj, full_mask = batch([5, 5], 5)
    model(full_ids, full_conj, full_mask)
    assert len(calls) == 1  # nothing to skip
    model(ids, conj, mask, impl="reference", pack=True)
    assert len(calls) == 2  # an explicit request wins


def test_packed_training_step_is_repeatable_and_finite():
    ids, conj, mask = batch([11, 3, 7, 0], 11)

    def step():
        torch.manual_seed(5)
        model = GMNet(40, 1, d_model=32, n_layers=2, n_heads=4, k=4, L=2, dropout=0.3).train()
        loss = model(ids, conj, mask, pack=True).pow(2).mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    (l1, g1), (l2, g2) = step(), step()
    assert torch.isfinite(l1) and all(torch.isfinite(g).all() for g in g1)
    assert torch.equal(l1, l2) and all(torch.equal(a, b) for a, b in zip(g1, g2))


def test_pack_true_on_a_batch_of_empty_rows_falls_back_to_padded():
    model = GMNet(40, 1, d_model=16, n_layers=1, n_heads=2, k=4, L=2).double().eval()
    ids, conj, mask = batch([0, 0], 4)
    torch.testing.assert_close(model(ids, conj, mask, pack=True), model(ids, conj, mask, pack=False), rtol=0, atol=0)
