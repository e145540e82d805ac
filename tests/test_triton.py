"""The fused Triton DualSKA kernel against the torch references, forward and backward.

Without CUDA the kernels run on CPU tensors under the Triton interpreter: TRITON_INTERPRET=1 is
set here before triton is imported (triton.jit reads it when the kernels are defined, and triton
imports some of its own modules lazily at the first launch, so it stays set for the session; that
only affects `triton_available()`, and "auto" never sends CPU tensors to Triton). With CUDA
the same comparisons run on the GPU with compiled kernels (run ``TRITON_INTERPRET=1 pytest`` there
to exercise the interpreter instead). Shapes are tiny: the interpreter executes every op in numpy.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from gmnet_sklearn.gm import functional as F  # noqa: E402
from gmnet_sklearn.gm.attention import make_attention  # noqa: E402
from gmnet_sklearn.gm.ops import IMPLS  # noqa: E402
from gmnet_sklearn.gm.ops.dual_ska import bidir_sfa_parallel, bidir_sfa_scan, ska_features, ska_zonal  # noqa: E402
from gmnet_sklearn.gm.ops.dual_ska import triton as kernels  # noqa: E402
from gmnet_sklearn.gm.triton import triton_available  # noqa: E402

dual_ska_triton = kernels.dual_ska_triton

DEVICES = [
    pytest.param("cpu", marks=pytest.mark.skipif(not kernels.INTERPRETED, reason="kernels compiled for GPU (TRITON_INTERPRET unset)")),
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]

# T -> valid lengths per batch row: a full row, a padded row and an all-padding row.
LENGTHS = {1: [1, 0, 1], 7: [7, 3, 0], 13: [13, 6, 0], 37: [37, 20, 0]}


def make_inputs(T, kdim, L, device, B=3, H=2, seed=0, lengths=None):
    """float32 leaves: raw (off-sphere) q, k, then p and log_gamma zeroed at padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = LENGTHS[T] if lengths is None else lengths
    mask = torch.ones(B, T, dtype=torch.bool)
    for b, n in enumerate(lengths[:B]):
        mask[b, n:] = False
    q = torch.randn(B, H, T, kdim, generator=g)
    k = torch.randn(B, H, T, kdim, generator=g)
    p = torch.randn(B, H, T, kdim, generator=g) * mask[:, None, :, None]
    lg = torch.nn.functional.logsigmoid(torch.randn(B, H, T, L + 1, generator=g) + 1.5) * mask[:, None, :, None]
    leaves = [t.to(device).requires_grad_(True) for t in (q, k, p, lg)]
    return leaves, mask.to(device)


def reference(leaves, mask, L, recurrent=False):
    """float64 references on copies of the leaves: (y_sfa, cv) and the float64 leaves."""
    ref_leaves = [t.detach().double().requires_grad_(True) for t in leaves]
    q, k, p, lg = ref_leaves
    qn, kn = F.normalise(q), F.normalise(k)
    if recurrent:
        y, cv = bidir_sfa_scan(qn, kn, p, lg, L), ska_features(qn, kn, p, mask, L)
    else:
        y, cv = bidir_sfa_parallel(qn, kn, p, lg, L), ska_zonal(qn, kn, p, mask, L)
    return (y, cv), ref_leaves


def assert_close(actual, expected, what=""):
    """float32 tolerances: 1e-4 relative, plus an absolute floor at 1e-5 of the tensor's scale."""
    expected = expected.detach().double()
    scale = expected.abs().max().clamp_min(1.0).item() if expected.numel() else 1.0
    torch.testing.assert_close(actual.detach().double().cpu(), expected.cpu(), rtol=1e-4, atol=1e-5 * scale, msg=lambda m: f"{what}: {m}")


def grads(outputs, weights, leaves):
    loss = sum((o * w.to(o.dtype)).sum() for o, w in zip(outputs, weights) if w is not None)
    return torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)


def check(T, kdim, L, device, block=None, recurrent=False, lengths=None, use=(True, True)):
    leaves, mask = make_inputs(T, kdim, L, device, lengths=lengths)
    q, k, p, lg = leaves
    y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p, lg, mask, L, block=block)
    (y_ref, cv_ref), ref_leaves = reference(leaves, mask, L, recurrent)
    assert y.dtype == torch.float32 and cv.dtype == torch.float32
    assert torch.isfinite(y).all() and torch.isfinite(cv).all()
    assert_close(y, y_ref, "y_sfa")
    assert_close(cv, cv_ref, "cv")

    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(y.shape, generator=g).to(device) if u else None for u in use]
    got = grads((y, cv), weights, leaves)
    want = grads((y_ref, cv_ref), weights, ref_leaves)
    for name, a, b in zip(("q", "k", "p", "log_gamma"), got, want):
        assert torch.isfinite(a).all(), name
        assert_close(a, b, f"d{name}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L", [0, 2, 3])
@pytest.mark.parametrize("kdim", [3, 8])
@pytest.mark.parametrize("T", [1, 7, 13])
def test_matches_reference_padded(T, kdim, L, device):
    check(T, kdim, L, device)


@pytest.mark.parametrize("device", DEVICES)
def test_several_blocks(device):
    # T = 37 over blocks of 16: three query and key blocks, the last one partial.
    check(37, 8, 3, device, block=16)


# Each tile rule against the float64 reference: the shipped one (two backward kernels), one key block
# with the query side fused into the key-major backward, one key block without it, and several key
# blocks; T = 37 pads every block it touches, T = 13 is shorter than one block.
TILE_RULES = {
    **kernels.TILE_RULES,
    "one_key_block_unfused": {"ONE_KEY_BLOCK_MAX": 64},
    "one_key_block_128_query_block_32": {"ONE_KEY_BLOCK_MAX": 128, "QUERY_BLOCK": 32, "FUSE_QUERIES": True},
    "one_key_block_query_block_32": {"ONE_KEY_BLOCK_MAX": 64, "QUERY_BLOCK": 32, "FUSE_QUERIES": True},
    "blocks_of_16": {"ONE_KEY_BLOCK_MAX": 0, "BLOCK": 16},
    "two_warps": {"NUM_WARPS": 2},
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("T", [13, 37])
@pytest.mark.parametrize("rule", list(TILE_RULES))
def test_tile_rules_match_reference(rule, T, device):
    with kernels.tiles(**TILE_RULES[rule]):
        check(T, 8, 3, device)


class LaunchSpy:
    """Records the backward kernels launched: (name, BM, BN, WITH_QUERIES) per launch."""

    def __init__(self, monkeypatch):
        self.launches = []
        for name in ("_bwd_query_kernel", "_bwd_key_kernel"):
            monkeypatch.setattr(kernels, name, self._wrap(name, getattr(kernels, name)))

    def _wrap(self, name, kernel):
        launches = self.launches

        class Indexed:  # kernel[grid](...), recorded
            def __getitem__(self, grid):
                def launch(*args, **meta):
                    launches.append((name, meta["BM"], meta["BN"], meta.get("WITH_QUERIES")))
                    return kernel[grid](*args, **meta)
                return launch
        return Indexed()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("T,rule,launches", [
    (13, "shipped", [("_bwd_query_kernel", 16, 16, None), ("_bwd_key_kernel", 16, 16, False)]),
    (37, "shipped", [("_bwd_query_kernel", 32, 32, None), ("_bwd_key_kernel", 32, 32, False)]),
    (13, "one_key_block", [("_bwd_key_kernel", 16, 16, True)]),
    (37, "one_key_block", [("_bwd_key_kernel", 16, 64, True)]),
])
def test_backward_path_by_rule_and_it_keeps_the_forwards_tiles(T, rule, launches, device, monkeypatch):
    # which backward kernels run, with which blocks: one key block fuses the query side into the
    # key-major kernel; the backward, run after `tiles` ends, keeps the tiles of its forward
    spy = LaunchSpy(monkeypatch)
    leaves, mask = make_inputs(T, 8, 3, device)
    q, k, p, lg = leaves
    with kernels.tiles(**kernels.TILE_RULES[rule]):
        y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p, lg, mask, 3)
    got = torch.autograd.grad((y.sum() + (cv * cv).sum()), leaves)
    assert spy.launches == launches
    (y_ref, cv_ref), ref_leaves = reference(leaves, mask, 3)
    want = torch.autograd.grad((y_ref.sum() + (cv_ref * cv_ref).sum()), ref_leaves)
    for name, a, b in zip(("q", "k", "p", "log_gamma"), got, want):
        assert_close(a, b, f"d{name}")


def test_tiles_refuse_unknown_settings_and_bad_blocks():
    with pytest.raises(ValueError, match="unknown tile settings"):
        with kernels.tiles(BM=16):
            pass
    for settings, message in (({"QUERY_BLOCK": 24}, "QUERY_BLOCK must be a power of two >= 16, got 24"),
                              ({"BLOCK": 16.0}, "BLOCK must be a power of two"),
                              ({"ONE_KEY_BLOCK_MAX": "64"}, "ONE_KEY_BLOCK_MAX must be an int >= 0, got '64'"),
                              ({"NUM_WARPS": 3}, "NUM_WARPS must be None or a power of two up to 32, got 3"),
                              ({"NUM_WARPS": 0}, "NUM_WARPS must be None"),
                              ({"FUSE_QUERIES": "no"}, "FUSE_QUERIES must be True or False, got 'no'")):
        with pytest.raises(ValueError, match=message):
            with kernels.tiles(**settings):
                pass
    assert {name: getattr(kernels, name) for name in kernels.TILE_SETTINGS} == kernels.TILE_RULES["shipped"]


def test_tile_rule_by_length():
    # (BM, BN, warps): one key block of the next power of two up to ONE_KEY_BLOCK_MAX, then BLOCK
    assert kernels._config(1, None) == (16, 16, 4)
    assert kernels._config(16, None) == (16, 16, 4)
    assert kernels._config(17, None) == (32, 32, 8)
    assert kernels._config(42, 16) == (16, 16, 4)
    with kernels.tiles(**kernels.TILE_RULES["one_key_block"]):
        assert kernels._config(42, None) == (16, 64, 8)
        assert kernels._config(65, None) == (32, 32, 8)


@pytest.mark.parametrize("device", DEVICES)
def test_matches_recurrent_and_feature_references(device):
    check(7, 3, 2, device, recurrent=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("use", [(True, False), (False, True)], ids=["sfa_only", "ska_only"])
def test_one_branch_gradient(use, device):
    # The other output gets no gradient (None in backward); each branch's gradient alone is exact.
    check(7, 8, 3, device, use=use)


@pytest.mark.parametrize("device", DEVICES)
def test_runs_inside_torch_compile(device):
    # The kernel is opaque to torch.compile (a graph break): compiled code around it, with dynamic
    # shapes, computes what eager code does, forward and backward. Dynamo failed tracing the launch
    # with symbolic shapes on an H200 before (benchmarks/results/throughput_cuda_compiled_h200_*).
    leaves, mask = make_inputs(7, 3, 2, device)

    def step(q, k, p, lg):
        y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p * 2.0, lg, mask, 2)
        return (y.sin() + cv * cv).sum()

    compiled = torch.compile(step, dynamic=True, backend="aot_eager")  # (no C compiler needed)
    want = torch.autograd.grad(step(*leaves), leaves)
    got = torch.autograd.grad(compiled(*leaves), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_all_padding_batch_is_finite(device):
    leaves, mask = make_inputs(7, 3, 2, device, lengths=[0, 0, 0])
    q, k, p, lg = leaves
    y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p, lg, mask, 2)
    assert (y == 0).all() and (cv == 0).all()
    for gr in torch.autograd.grad((y.sum() + cv.sum()), leaves, allow_unused=True, materialize_grads=True):
        assert torch.isfinite(gr).all()


@pytest.mark.parametrize("device", DEVICES)
def test_dual_ska_module_dispatch(device):
    assert "triton" in IMPLS
    torch.manual_seed(0)
    layer = make_attention("dual_ska", d_model=24, n_heads=3, k=5, L=3).to(device)
    B, T = 3, 9
    x = torch.randn(B, T, 24, device=device, requires_grad=True)
    mask = torch.ones(B, T, dtype=torch.bool, device=device)
    mask[1, 6:] = False
    mask[2, 1:] = False
    conj = torch.randint(0, 2, (B, T), device=device)
    fused, ref = layer(x, conj, mask, impl="triton"), layer(x, conj, mask, impl="parallel")
    assert_close(fused, ref, "layer output")
    params = [x, *layer.parameters()]
    w = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad((fused * w)[mask].sum(), params), torch.autograd.grad((ref * w)[mask].sum(), params)):
        assert_close(a, b, "layer gradient")
    if device == "cuda" and triton_available():
        assert_close(layer(x, conj, mask, impl="auto"), ref, "auto on CUDA")


def test_auto_stays_on_torch_for_cpu_tensors(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("auto must not dispatch CPU tensors to Triton")

    monkeypatch.setattr(kernels, "dual_ska_triton", boom)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # even with the interpreter requested
    layer = make_attention("dual_ska", d_model=24, n_heads=3, k=5, L=2)
    x = torch.randn(2, 4, 24)
    layer(x, torch.zeros(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool), impl="auto")


def test_float64_inputs_round_trip():
    if not kernels.INTERPRETED and not torch.cuda.is_available():
        pytest.skip("no way to run the kernels")
    device = "cpu" if kernels.INTERPRETED else "cuda"
    leaves, mask = make_inputs(7, 3, 2, device)
    leaves = [t.detach().double().requires_grad_(True) for t in leaves]
    q, k, p, lg = leaves
    y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p, lg, mask, 2)
    assert y.dtype == cv.dtype == torch.float64
    (y_ref, cv_ref), _ = reference(leaves, mask, 2)
    assert_close(y, y_ref, "y_sfa")
    assert_close(cv, cv_ref, "cv")
    assert all(g.dtype == torch.float64 for g in torch.autograd.grad(y.sum() + cv.sum(), leaves))


@pytest.mark.parametrize("device", DEVICES)
def test_cached_constants_first_built_in_inference_mode_still_train(device, monkeypatch):
    """A prediction (under inference_mode) before a fit in the same process: the kernels' cached
    tables must be plain tensors, which backward can save (as functional's plans are)."""
    from gmnet_sklearn.gm.ops.sphere_readout import triton as readout_kernels
    from gmnet_sklearn.gm.transformer import GMNet

    monkeypatch.setattr(kernels, "_CONSTS", {})
    monkeypatch.setattr(readout_kernels, "_TABLES", {})
    torch.manual_seed(0)
    ids = torch.randint(1, 30, (2, 6), device=device)
    mask = torch.ones(2, 6, dtype=torch.bool, device=device)
    predicting = GMNet(30, 1, k=8, L=3, d_model=24, n_layers=1, n_heads=2).to(device).eval()
    with torch.inference_mode():
        predicting(ids, None, mask, impl="triton")
    assert kernels._CONSTS  # built there, first
    training = GMNet(30, 1, k=8, L=3, d_model=24, n_layers=1, n_heads=2).to(device).train()
    training(ids, None, mask, impl="triton").sum().backward()
    assert all(p.grad is not None for p in training.parameters() if p.requires_grad)
    # the read-out's own table, the same way (called directly: the model picks its read-out form)
    from gmnet_sklearn.gm.ops.sphere_readout import sphere_readout

    W = torch.randn(2, 4, F.harmonic_basis(8, 3).n_monomials, device=device)
    z = torch.randn(2, 8, 7, device=device)
    with torch.inference_mode():
        sphere_readout(W, [z], impl="triton")
    assert readout_kernels._TABLES
    W.requires_grad_()
    sphere_readout(W, [z], impl="triton").sum().backward()
    assert W.grad is not None


@pytest.mark.parametrize("device", DEVICES)
def test_tf32_when_torch_allows_it_for_its_own_matmuls(device):
    """The kernels' dots follow torch.set_float32_matmul_precision: IEEE at "highest" (the default),
    TF32 at "high". Under TF32 (10-bit mantissa inputs) the outputs stay near the float64 reference;
    the interpreter on CPU computes in float32 either way."""
    from gmnet_sklearn.gm.triton import dot_precision

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert dot_precision() == "ieee"
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # PyTorch's newer switch, which the old getter refuses
            torch.backends.cuda.matmul.fp32_precision = "tf32"
            assert dot_precision() == "tf32"
            torch.backends.cuda.matmul.fp32_precision = "none"
            assert dot_precision() == "ieee"
        torch.set_float32_matmul_precision("high")
        assert dot_precision() == "tf32"
        leaves, mask = make_inputs(13, 8, 3, device)
        q, k, p, lg = leaves
        y, cv = dual_ska_triton(F.normalise(q), F.normalise(k), p, lg, mask, 3)
        (y_ref, cv_ref), ref_leaves = reference(leaves, mask, 3, False)
        got = grads((y, cv), (torch.ones_like(y), torch.ones_like(cv)), leaves)
        want = grads((y_ref, cv_ref), (torch.ones_like(y_ref), torch.ones_like(cv_ref)), ref_leaves)
        # TF32 rounds each dot's inputs to 11 significant bits (unit roundoff 2^-11, about 5e-4), and the
        # forward and backward chain several dots (scores, exp, weighted sums, their gradients). The first
        # compiled run (H100, benchmarks/results/cuda_tests_h100_59277fe.log) measured 5.3e-3 on one of
        # these tensors against a first, untried bound of 5e-3: 1e-2 is about 20 unit roundoffs, and a
        # wrong dot (a mis-set precision or a bug) is far above it.
        for a, b in zip((y, cv, *got), (y_ref, cv_ref, *want)):
            b = b.detach().double().cpu()
            assert ((a.detach().double().cpu() - b).norm() / b.norm().clamp_min(1e-30)).item() < 1e-2
    finally:
        torch.set_float32_matmul_precision(before)


def test_pretrain_throughput_reads_attention_tile_rules():
    # benchmarks.pretrain_throughput --attention-tiles: a TILE_RULES name or JSON settings, refused before a run
    from benchmarks.pretrain_throughput import attention_tile_rule

    assert attention_tile_rule("one_key_block") == ("one_key_block", kernels.TILE_RULES["one_key_block"])
    assert attention_tile_rule('{"QUERY_BLOCK": 32, "NUM_WARPS": 4}') == (
        "QUERY_BLOCK=32_NUM_WARPS=4", {"QUERY_BLOCK": 32, "NUM_WARPS": 4})
    for bad, message in (("fast", "neither a rule of"), ("{}", "neither"),
                         ('{"BM": 16}', "unknown tile settings"), ('{"BLOCK": 48}', "BLOCK must be a power of two")):
        with pytest.raises(SystemExit, match=message):
            attention_tile_rule(bad)
