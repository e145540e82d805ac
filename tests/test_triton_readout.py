"""The fused Triton read-out kernels (gm/ops/sphere_readout/triton.py) against the float64
reference, forward and backward: one and two branches, with and without scales, odd token and
channel counts (a channel count above one tile, as the SH-FFN has), zero vectors (the clamped
norm), L = 0 to 5, each of the backward's forms (BACKWARD_FORMS), other tiles, and inside the
whole model; the same for the second form (FORMS: "gemm", triton_gemm.py).

Without CUDA the kernels run on CPU tensors under the Triton interpreter (set here before triton
is imported, as in tests/test_triton.py); with CUDA, compiled on the GPU.
"""

import math
import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from gmnet_sklearn.gm import GMNet  # noqa: E402
from gmnet_sklearn.gm.ops.sphere_readout import sphere_readout  # noqa: E402
from gmnet_sklearn.gm.ops.sphere_readout import triton as kernels  # noqa: E402

DEVICES = [
    pytest.param("cpu", marks=pytest.mark.skipif(not kernels.INTERPRETED, reason="kernels compiled for GPU (TRITON_INTERPRET unset)")),
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
CASES = {  # (k, L, groups, channels, tokens, branches, scales)
    "attention": (8, 3, 3, 8, 37, 2, True),
    "small": (4, 2, 2, 5, 7, 2, True),
    "one-branch": (3, 1, 1, 40, 5, 1, False),
    "ffn-wide": (8, 3, 1, 130, 9, 1, False),
    "scaled-one": (6, 2, 2, 17, 33, 1, True),
    "L0": (5, 0, 2, 3, 4, 1, False),
    "L4": (5, 4, 2, 9, 41, 2, True),  # the largest degree whose factors the backward keeps in registers
    "L5": (3, 5, 1, 6, 11, 1, False),  # beyond it: the factors gathered per factor
}


def n_monomials(k, L):
    return sum(math.comb(k + l - 1, l) for l in range(L + 1))


def inputs(k, L, G, C, N, nb, scaled, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(G, C, n_monomials(k, L), generator=g, dtype=torch.float64)
    zs = [torch.randn(G, k, N, generator=g, dtype=torch.float64) for _ in range(nb)]
    zs[0][:, :, 0] = 0  # a zero vector: the clamped norm and its gradient
    zs[-1][:, :, -1] *= 1e-8  # below eps too
    scales = [torch.rand(G, generator=g, dtype=torch.float64) for _ in range(nb)] if scaled else None
    leaves = [W, *zs, *(scales or [])]
    return [t.to(device).requires_grad_(True) for t in leaves]


# (form, backward form): every backward of the fused form; the gemm form's weight gradient is a
# matmul, so only its dz kernel's two ways to the factors apply
FORM_CASES = [("fused", b) for b in kernels.BACKWARD_FORMS] + [("gemm", "reuse-split"), ("gemm", "gather-split")]
SHIPPED_BACKWARD = next(iter(kernels.BACKWARD_FORMS))
#: Under the interpreter the two largest cases take 4-10 s each; there they run for each form's
#: shipped backward, and the other backwards (covered by every smaller case) are slow tests.
INTERPRETED_LARGE_CASES = ("attention", "L4")


def _readout_params():
    for case in CASES:
        for form, backward in FORM_CASES:
            for device in DEVICES:
                marks = list(device.marks)
                if device.values[0] == "cpu" and case in INTERPRETED_LARGE_CASES and backward != SHIPPED_BACKWARD:
                    marks.append(pytest.mark.slow)
                yield pytest.param(case, form, backward, device.values[0], marks=marks,
                                   id=f"{case}-{form}-{backward}-{device.values[0]}")


@pytest.mark.parametrize("case,form,backward,device", list(_readout_params()))
def test_triton_readout_matches_reference_forward_and_backward(case, form, backward, device):
    k, L, G, C, N, nb, scaled = CASES[case]
    leaves = inputs(k, L, G, C, N, nb, scaled, device)
    W, zs, scales = leaves[0], leaves[1 : 1 + nb], (leaves[1 + nb :] or None)
    ref_leaves = [t.detach().cpu().double().requires_grad_(True) for t in leaves]
    rW, rzs, rscales = ref_leaves[0], ref_leaves[1 : 1 + nb], (ref_leaves[1 + nb :] or None)
    ref = sphere_readout(rW, rzs, rscales, impl="reference" if L else "parallel")
    with kernels.form(form):
        out = sphere_readout(W.float(), [z.float() for z in zs], None if scales is None else [s.float() for s in scales],
                             impl="triton")
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert out.grad_fn.name().startswith("SphereReadoutTriton") and ("Gemm" in out.grad_fn.name()) == (form == "gemm")
    g = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads_ref = torch.autograd.grad((ref * g).sum(), ref_leaves)
    with kernels.backward_form(backward):
        grads = torch.autograd.grad((out.double() * g.to(device)).sum(), leaves)
    rel = lambda a, b: ((a.cpu() - b).norm() / b.norm().clamp_min(1e-30)).item()  # noqa: E731
    assert rel(out.double(), ref) < 1e-5
    for name, a, b in zip(["W"] + [f"z{i}" for i in range(nb)] + [f"s{i}" for i in range(nb if scaled else 0)], grads, grads_ref):
        assert a.dtype == torch.float64  # cast back to the input's dtype
        assert (b.norm() == 0 and a.abs().max() == 0) or rel(a, b) < 1e-5, (name, rel(a, b))
    assert kernels.FORM == "gemm"  # form puts the shipped one back


def test_unknown_readout_form_is_refused():
    with pytest.raises(ValueError, match="unknown read-out form"):
        with kernels.form("atomic"):
            pass


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_form_stays_float32_under_autocast(device):
    # its matmuls are torch.bmm, which bf16 autocast would otherwise run in bf16 (the fused form's
    # dots are Triton's, which autocast does not touch)
    leaves = [t.detach().float().requires_grad_(True) for t in inputs(8, 3, 2, 40, 37, 2, True, device)]

    def run():
        with kernels.form("gemm"):
            out = sphere_readout(leaves[0], leaves[1:3], leaves[3:], impl="triton")
            return [out.detach(), *torch.autograd.grad(out.square().sum(), leaves)]

    plain = run()
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        autocast = run()
    for a, b in zip(autocast, plain):
        assert a.dtype == torch.float32 and ((a - b).norm() / b.norm()).item() < 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_split_weight_gradient_is_repeatable_and_forms_restore(device):
    # "split" adds the slices' partial sums in a fixed order: the same bits every time (the
    # atomic form's order varies on a GPU); backward_form puts the shipped form back after it.
    # On a GPU the model's shape with enough tokens for several slices of a few blocks; the
    # interpreter makes every block a slice, so a small case sums three partials there (and
    # runs in seconds, not the minute the GPU's case takes interpreted)
    case = (8, 3, 2, 40, 300) if device == "cuda" else (4, 2, 2, 5, 70)
    leaves = inputs(*case, 2, True, device)
    out = sphere_readout(leaves[0].float(), [z.float() for z in leaves[1:3]], [s.float() for s in leaves[3:]], impl="triton")
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(device)
    first, second = (torch.autograd.grad(out, leaves[0], g, retain_graph=True)[0] for _ in range(2))
    assert torch.equal(first, second)
    with kernels.backward_form("gather-atomic"):
        assert (kernels.REUSE_FACTORS, kernels.WEIGHT_GRAD) == (False, "atomic")
    assert (kernels.REUSE_FACTORS, kernels.WEIGHT_GRAD) == kernels.BACKWARD_FORMS["reuse-split"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["fused", "gemm"])
def test_triton_readout_inside_the_model(form, device):
    # The whole model with every read-out on the Triton kernels (attention on its own reference
    # form, so only the read-out differs) against the all-reference model: outputs and gradients.
    torch.manual_seed(0)
    m = GMNet(30, 2, k=4, L=2, d_model=32, n_layers=1, n_heads=4, dropout=0.0).to(device).eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, 30, (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.bool)
    mask[1, 5:] = False
    ids[~mask] = 0
    conj = torch.randint(0, 2, (3, 11), generator=g) * mask
    args = [t.to(device) for t in (ids, conj, mask)]
    results = {}
    for name, impl in (("triton", {"dual_ska": "reference", "sphere_readout": "triton"}),
                       ("reference", {"dual_ska": "reference", "sphere_readout": "reference"})):
        m.zero_grad()
        with kernels.form(form):
            out = m(*args, impl=impl, pack=False)
            out.square().sum().backward()
        results[name] = (out.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
    (out_t, g_t), (out_r, g_r) = results["triton"], results["reference"]
    torch.testing.assert_close(out_t, out_r, rtol=1e-5, atol=1e-6)
    assert g_t.keys() == g_r.keys()
    for n in g_r:
        torch.testing.assert_close(g_t[n], g_r[n], rtol=1e-4, atol=1e-6, msg=n)


def test_triton_readout_rejects_three_branches_and_partial_scales():
    W, z = torch.zeros(1, 2, 15), torch.zeros(1, 4, 3)
    with pytest.raises(ValueError, match="one or two branches"):
        kernels.sphere_readout_triton(W, [z, z, z], [None] * 3, 1e-6, 2)
    with pytest.raises(ValueError, match="every branch or for none"):
        kernels.sphere_readout_triton(W, [z, z], [torch.ones(1), None], 1e-6, 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["fused", "gemm"])
def test_runs_inside_torch_compile(form, device):
    # opaque to torch.compile (a graph break), as the attention kernel (tests/test_triton.py): code
    # compiled around it with dynamic shapes computes what eager code does, forward and backward
    W, z0, z1, s0, s1 = [t.detach().float().requires_grad_(True) for t in inputs(3, 2, 2, 5, 11, 2, True, device)]

    def step(W, z0, z1, s0, s1):
        return (kernels.sphere_readout_triton(W * 1.0, [z0, z1], [s0, s1], 1e-6, 2).tanh() ** 2).sum()

    compiled = torch.compile(step, dynamic=True, backend="aot_eager")  # (no C compiler needed)
    leaves = [W, z0, z1, s0, s1]
    with kernels.form(form):
        want = torch.autograd.grad(step(*leaves), leaves)
        got = torch.autograd.grad(compiled(*leaves), leaves)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["fused", "gemm"])
def test_no_channels_give_zero_input_gradients(device, form, monkeypatch):
    # nothing to launch: the input gradients are zeros, not uninitialised memory. Fresh memory is
    # often zeros anyway, so torch.empty is poisoned with NaN here: uninitialised gradients show
    real_empty = torch.empty

    def poisoned_empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", poisoned_empty)
    W = torch.zeros(1, 0, n_monomials(4, 2), device=device, requires_grad=True)
    z = torch.randn(1, 4, 5, device=device, requires_grad=True)
    with kernels.form(form):
        out = kernels.sphere_readout_triton(W, [z], [None], 1e-6, 2)
        assert out.shape == (1, 0, 5)
        (gz,) = torch.autograd.grad(out.sum(), [z])
    assert torch.equal(gz, torch.zeros_like(z))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_auto_form_on_cuda_follows_the_measured_rule():
    # "auto" on CUDA: Triton for float32 in training and inference, small batches too; the reference
    # for float64 (and L = 0, which reads no direction)
    from gmnet_sklearn.gm.ops import sphere_readout as readout_op

    w = torch.randn(2, 4, n_monomials(8, 3), device="cuda", requires_grad=True)
    small = [torch.randn(2, 8, 64, device="cuda", requires_grad=True)]
    assert readout_op.select("auto", w, small, 3) == "triton"
    assert readout_op.select("auto", w.detach().double(), [small[0].detach().double()], 3) == "reference"
    assert readout_op.select("auto", torch.randn(2, 4, 1, device="cuda"), small, 0) == "parallel"
    with torch.inference_mode():
        assert readout_op.select("auto", w.detach(), [small[0].detach()], 3) == "triton"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["fused", "gemm"])
def test_triton_readout_under_tf32_stays_near_the_reference(form, device):
    """torch.set_float32_matmul_precision("high") lets the read-out's dots use TF32 (gm.triton.dot_precision)."""
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        leaves = inputs(8, 3, 2, 40, 37, 2, True, device)
        W, zs, scales = leaves[0], leaves[1:3], leaves[3:]
        ref_leaves = [t.detach().cpu().double().requires_grad_(True) for t in leaves]
        ref = sphere_readout(ref_leaves[0], ref_leaves[1:3], ref_leaves[3:], impl="reference")
        with kernels.form(form):
            out = sphere_readout(W.float(), [z.float() for z in zs], [s.float() for s in scales], impl="triton")
            grads = torch.autograd.grad(out.double().sum(), leaves)
        grads_ref = torch.autograd.grad(ref.sum(), ref_leaves)
        rel = lambda a, b: ((a.detach().cpu() - b).norm() / b.norm().clamp_min(1e-30)).item()  # noqa: E731
        assert rel(out.double(), ref.detach()) < 5e-3
        for a, b in zip(grads, grads_ref):
            assert rel(a, b) < 5e-3
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("settings", [{"BN": 64, "MC": 16}, {"BN": 16, "MC": 64, "CB_MAX": 16, "WEIGHT_PROGRAMS_PER_SM": 1}])
def test_other_tiles_compute_the_same(settings, device):
    # `tiles` (what benchmarks/readout_tiles.py measures) changes how the work is cut, not the
    # result: 130 channels, so CB_MAX=16 cuts them into 9 blocks instead of 2
    k, L, G, C, N, nb, scaled = CASES["ffn-wide"]
    leaves = inputs(k, L, G, C, N, nb, scaled, device)
    f32 = [t.detach().float().requires_grad_(True) for t in leaves]

    def run():
        out = sphere_readout(f32[0], f32[1:1 + nb], None, impl="triton")
        return [out.detach(), *torch.autograd.grad(out.square().sum(), f32)]

    shipped = run()
    with kernels.tiles(**settings):
        assert all(getattr(kernels, name) == value for name, value in settings.items())
        assert kernels._blocks(C) == min(settings.get("CB_MAX", 128), 256)
        other = run()
    assert (kernels.MC, kernels.BN, kernels.CB_MAX) == (16, 32, 128)
    for a, b in zip(other, shipped):
        assert ((a - b).norm() / b.norm()).item() < 1e-5
    with pytest.raises(ValueError, match="unknown tile settings"):
        with kernels.tiles(TILE=1):
            pass


@pytest.mark.slow  # the interpreter runs a whole model's read-outs: about a minute alone
@pytest.mark.skipif(not kernels.INTERPRETED, reason="checked under the interpreter (on a GPU it is a timing)")
def test_readout_tiles_benchmark_records_the_models_calls_and_checks_each_setting(tmp_path):
    # benchmarks/readout_tiles.py: the model's read-out calls, each tile setting against the shipped one
    import json

    from benchmarks import readout_tiles

    out = tmp_path / "tiles.json"
    readout_tiles.main(["--device", "cpu", "--shape", "library", "--tokens", "40", "--reps", "1",
                        "--axes", '{"BN": [64], "MC": [16]}', "--output", str(out)])
    result = json.loads(out.read_text())
    calls = {tuple(c["call"][:5]): c["count"] for c in result["calls_per_step"]}
    assert calls == {(1, 256, 165, 8, 1): 3, (8, 32, 165, 8, 2): 3}  # SH-FFN's and attention's read-outs, a layer each
    assert [r["settings"]["BN"] for r in result["rows"]] == [32, 64, 32]
    for row in result["rows"][1:]:
        assert all(c["max_relative_difference"] < 1e-5 for c in row["calls"])
    assert (kernels.MC, kernels.BN) == (16, 32)  # the tiles are back (the shipped ones)
