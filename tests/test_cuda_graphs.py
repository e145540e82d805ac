"""CUDA graphs of the models' steps (gm/cuda_graphs.py) and bf16 autocast, against the plain
module call: the padding they add changes no output (CPU, float64), the estimators' plumbing
(CPU: the graphs stand aside), and on a GPU graphed training and inference follow the eager run
step for step over batches of several odd widths, the last one short."""

import copy
import pickle

import numpy as np
import pytest
import torch

from gmnet_sklearn import ChemBERTaRegressor, GMNetRegressor
from gmnet_sklearn.baselines import ChemBERTa
from gmnet_sklearn.gm import GMNet
from gmnet_sklearn.gm.cuda_graphs import CUDAGraphs, padded_width

from ._smiles import SMILES, regression_target

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
PAD = 0


def gmnet(**kw):
    torch.manual_seed(0)
    return GMNet(**{**dict(vocab_size=30, n_outputs=2, k=4, L=2, d_model=32, n_layers=2, n_heads=4, dropout=0.0), **kw})


def chemberta(**kw):
    torch.manual_seed(0)
    return ChemBERTa(**{**dict(vocab_size=30, n_outputs=2, d_model=32, n_layers=2, n_heads=4, intermediate_size=40,
                               dropout=0.0, attention_dropout=0.0), **kw})


# The single-branch variants run the eager Gated-SFA form on CUDA (no fused kernel): captured, it
# must not read the decay's span on the host (gm/ops/dual_ska/zonal.py).
MODELS = {"gmnet": gmnet, "chemberta": chemberta,
          "gmnet_gated_sfa": lambda **kw: gmnet(attention="gated_sfa", **kw),
          "gmnet_bidir_sfa": lambda **kw: gmnet(attention="bidir_sfa", **kw)}
# Their captured call takes the direct form (`decay_weights`), the eager one the factorised form: the
# same function by two algorithms, so they agree to rounding, not bit for bit (and Adam's normalised
# step can turn a near-zero gradient's rounding into a step of lr).
OTHER_FORM_WHEN_CAPTURED = {"gmnet_gated_sfa", "gmnet_bidir_sfa"}


def batch(B, T, seed, device="cpu", chemberta_model=False):
    """Token ids, conjugation flags and mask with rows of several lengths (one of full width)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None, :] < lengths[:, None]
    ids = torch.randint(1, 30, (B, T), generator=g) * mask
    X = {"input_ids": ids, "attention_mask": mask}
    if not chemberta_model:
        X["conj_flags"] = torch.randint(0, 2, (B, T), generator=g) * mask
    return {k: v.to(device) for k, v in X.items()}


def test_padded_widths_are_few_and_tight():
    widths = [padded_width(t) for t in range(1, 513)]
    assert all(t <= w <= max(t + 7, int(t * 1.125) + 1) for t, w in zip(range(1, 513), widths))
    assert len(set(widths)) <= 32 + 1  # 8 shapes up to 64 tokens, then 8 per doubling (and 1 at 512)
    assert [padded_width(t) for t in (1, 8, 13, 64, 65, 100, 129, 300, 400)] == [8, 8, 16, 64, 72, 104, 144, 320, 416]
    assert padded_width(13, 1) == 13


@pytest.mark.parametrize("name", MODELS)
def test_padding_to_a_multiple_changes_no_output(name):
    # The graphs pad each batch to a multiple of 8 positions; the models must not see it.
    m = MODELS[name]().double().eval()
    graphs = CUDAGraphs(m, pad_id=PAD)
    X = batch(5, 13, seed=1, chemberta_model=name == "chemberta")
    padded = graphs.pad(X)
    assert padded["input_ids"].shape == (5, 16) and padded["attention_mask"][:, 13:].sum() == 0
    assert (padded["input_ids"][:, 13:] == PAD).all()
    with torch.no_grad():
        torch.testing.assert_close(m(**padded), m(**X), atol=1e-12, rtol=0)
    # backward too: the padded positions change no parameter's gradient
    grads = []
    for inputs in (padded, X):
        m.zero_grad()
        m(**inputs).square().sum().backward()
        grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
    assert graphs.pad(batch(3, 16, seed=2))["input_ids"].shape[1] == 16
    # molecule-level rows as wide as the batch (13 descriptors here) are not token-wise: left alone
    with_rows = graphs.pad({**X, "descriptors": torch.ones(5, 13)})
    assert with_rows["descriptors"].shape == (5, 13) and with_rows["input_ids"].shape == (5, 16)


def test_off_cuda_the_call_is_the_module():
    m = gmnet().eval()
    X = batch(4, 9, seed=0)
    graphs = CUDAGraphs(m)
    with torch.no_grad():
        assert torch.equal(graphs(**X), m(**X))
    assert graphs.captures == 0 and not graphs.graphs
    with pytest.raises(ValueError, match="precision"):
        CUDAGraphs(m, precision="fp16")
    assert pickle.loads(pickle.dumps(graphs)).graphs == {}


def test_bf16_is_float32_on_cpu():
    # bf16 autocast is for CUDA; on CPU the fused float32 kernels run unchanged.
    m = gmnet().eval()
    X = batch(6, 11, seed=3)
    with torch.no_grad():
        assert torch.equal(CUDAGraphs(m, precision="bf16")(**X), m(**X))


@needs_cuda
@pytest.mark.parametrize("name", MODELS)
def test_cuda_bf16_autocast_stays_near_float32(name):
    m = MODELS[name](d_model=64).cuda().eval()
    X = batch(6, 11, seed=3, device="cuda", chemberta_model=name == "chemberta")
    with torch.no_grad():
        ref = m(**X)
        out = CUDAGraphs(m, precision="bf16", enabled=False)(**X)
        graphed = CUDAGraphs(m, precision="bf16")(**X)
    assert out.dtype == torch.float32 == graphed.dtype
    assert ((out - ref).norm() / ref.norm()).item() < 0.05
    if name in OTHER_FORM_WHEN_CAPTURED:  # two algorithms at bf16's precision: as close as bf16 allows
        assert ((graphed - out).norm() / out.norm()).item() < 0.02
    else:
        torch.testing.assert_close(graphed, out, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("cls", [GMNetRegressor, ChemBERTaRegressor], ids=["gmnet", "chemberta"])
def test_estimator_parameters_validated_and_pickled(cls):
    shape = dict(d_model=16, n_layers=1, n_heads=2) | (dict(k=3, L=1) if cls is GMNetRegressor else dict(intermediate_size=16))
    X, y = SMILES[:40], regression_target(SMILES[:40])
    common = dict(max_epochs=1, batch_size=16, descriptors=False, fingerprint=False, forest=False, random_state=0, device="cpu")
    with pytest.raises(ValueError, match="precision"):
        cls(**shape, **common, precision="fp16").fit(X, y)
    assert cls().cuda_graphs is True  # the default: on for CUDA
    plain = cls(**shape, **common, cuda_graphs=False).fit(X, y)
    graphed = cls(**shape, **common, cuda_graphs=True).fit(X, y)  # on CPU the graphs stand aside
    np.testing.assert_array_equal(graphed.predict(X), plain.predict(X))
    assert "graphs_" not in graphed.net_.__dict__  # skorch's own module call ran
    graphed.net_.graphs()  # made on demand, and never pickled
    again = pickle.loads(pickle.dumps(graphed))
    assert "graphs_" in graphed.net_.__dict__ and "graphs_" not in again.net_.__dict__
    np.testing.assert_array_equal(again.predict(X), plain.predict(X))
    bf16 = cls(**shape, **common, precision="bf16").fit(X, y)  # float32 on CPU
    np.testing.assert_array_equal(bf16.predict(X), plain.predict(X))


# -------------------------------------------------------------------------------------------
# On a GPU


def _train(model, batches, targets, graphed: bool):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    call = CUDAGraphs(model, pad_id=PAD) if graphed else (lambda **X: model(**X))
    losses = []
    model.train()
    for X, y in zip(batches, targets):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(call(**X), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, call


@needs_cuda
@pytest.mark.parametrize("name", MODELS)
def test_cuda_graphed_training_follows_eager(name):
    # Widths 13, 21, 13, 30, 7 (padded to 16, 24, 16, 32, 8: four shapes, one replayed) and a
    # short last batch: the graphed run's losses and final weights equal the eager run's.
    shapes = [(8, 13), (8, 21), (8, 13), (8, 30), (8, 7), (8, 13), (5, 21)]
    batches = [batch(B, T, seed=i, device="cuda", chemberta_model=name == "chemberta") for i, (B, T) in enumerate(shapes)]
    targets = [torch.randn(B, 2, generator=torch.Generator().manual_seed(100 + i)).cuda() for i, (B, _) in enumerate(shapes)]
    base = MODELS[name]().cuda()
    eager_model, graph_model = copy.deepcopy(base), copy.deepcopy(base)
    eager, _ = _train(eager_model, batches, targets, graphed=False)
    graphed, graphs = _train(graph_model, batches, targets, graphed=True)
    assert graphs.captures == 5  # (8,16), (8,24), (8,32), (8,8), (5,24)
    np.testing.assert_allclose(graphed, eager, rtol=1e-4)
    atol = 5e-3 if name in OTHER_FORM_WHEN_CAPTURED else 1e-5  # (7 Adam steps of lr 1e-3)
    for (n, a), b in zip(eager_model.named_parameters(), graph_model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=atol, msg=n)
    assert eager[-1] != eager[0]


@needs_cuda
@pytest.mark.parametrize("name", MODELS)
def test_cuda_graphed_inference_follows_eager_and_outputs_stay(name):
    m = MODELS[name]().cuda().eval()
    graphs = CUDAGraphs(m, pad_id=PAD)
    X1 = batch(16, 19, seed=5, device="cuda", chemberta_model=name == "chemberta")
    X2 = batch(16, 19, seed=6, device="cuda", chemberta_model=name == "chemberta")
    for context in (torch.no_grad, torch.inference_mode):
        with context():
            out1, out2 = graphs(**X1), graphs(**X2)  # one shape: the second call replays the first's graph
            torch.testing.assert_close(out1, m(**X1), rtol=1e-5, atol=1e-6)  # not overwritten by the replay
            torch.testing.assert_close(out2, m(**X2), rtol=1e-5, atol=1e-6)
    assert graphs.captures == 2  # one per grad mode


@needs_cuda
def test_cuda_graphs_keep_gradients_in_eval_mode_and_float64_outputs():
    """Eval mode with gradients on (attribution) runs eagerly, so its output has a gradient; a
    float64 model's output stays float64 on the graphed path as on the eager one."""
    m = gmnet().cuda().eval()
    X = batch(8, 11, seed=3, device="cuda")
    out = CUDAGraphs(m, pad_id=PAD)(**X)
    assert out.requires_grad
    out.sum().backward()
    assert any(p.grad is not None for p in m.parameters())
    m64 = gmnet().cuda().double().eval()
    with torch.no_grad():
        graphed, eager = CUDAGraphs(m64, pad_id=PAD)(**X), m64(**X)
    assert graphed.dtype == eager.dtype == torch.float64
    torch.testing.assert_close(graphed, eager)


@needs_cuda
@pytest.mark.parametrize("cls", [GMNetRegressor, ChemBERTaRegressor], ids=["gmnet", "chemberta"])
def test_cuda_estimator_with_graphs_matches_without(cls):
    shape = dict(d_model=32, n_layers=1, n_heads=4, dropout=0.0) | (
        dict(k=4, L=2) if cls is GMNetRegressor else dict(intermediate_size=32, attention_dropout=0.0))
    X, y = SMILES, regression_target(SMILES)
    common = dict(max_epochs=3, batch_size=16, random_state=0, device="cuda", forest=False)
    plain = cls(**shape, **common, cuda_graphs=False).fit(X, y)
    graphed = cls(**shape, **common, cuda_graphs=True).fit(X, y)
    assert graphed.net_.graphs().captures > 0 and "graphs_" not in plain.net_.__dict__
    np.testing.assert_allclose(graphed.history_[:, "train_loss"], plain.history_[:, "train_loss"], rtol=1e-3)
    np.testing.assert_allclose(graphed.predict(X), plain.predict(X), rtol=1e-3, atol=1e-3)
    bf16 = cls(**shape, **common, cuda_graphs=True, precision="bf16").fit(X, y)
    assert np.isfinite(bf16.predict(X)).all()
