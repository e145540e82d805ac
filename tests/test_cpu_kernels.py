"""The fused C++ DualSKA kernel (gm/cpu) against the torch references, forward and backward.

The extension is compiled on first use (needs a C++ compiler and ninja); where it cannot be built
these tests skip and the models use the eager path (tested in test_attention.py). The read-out
kernel is tested with the read-out in test_functional.py.
"""

import pytest
import torch

from gmnet_sklearn.gm import cpu as cpu_kernels
from gmnet_sklearn.gm import functional as F
from gmnet_sklearn.gm.attention import make_attention
from gmnet_sklearn.gm.ops.dual_ska import bidir_sfa_parallel, bidir_sfa_scan, dual_ska_cpu, ska_features, ska_zonal

needs_kernel = pytest.mark.skipif(not cpu_kernels.cpu_kernels_available(), reason="fused CPU kernel could not be built")


def test_the_kernel_builds_where_a_compiler_is():
    """The kernel tests skip where the extension cannot be built; where a C++ compiler and ninja
    are there, a build failure (a broken source) is a failure, not a skip."""
    import os
    import shutil

    from torch.utils.cpp_extension import is_ninja_available

    if not (shutil.which(os.environ.get("CXX", "c++")) and is_ninja_available()):
        pytest.skip("no C++ compiler or ninja here: the models use the eager path")
    if os.environ.get("GMNET_CPU_KERNELS") == "0":
        pytest.skip("GMNET_CPU_KERNELS=0 disables the kernels")
    assert cpu_kernels.cpu_kernels_available(), f"the fused CPU kernel failed to build: {cpu_kernels._failed}"

# T -> valid lengths per batch row: a full row, a padded row and an all-padding row.
LENGTHS = {1: [1, 0, 1], 7: [7, 3, 0], 13: [13, 6, 0], 30: [30, 17, 0]}


def make_inputs(T, kdim, L, B=3, H=3, dtype=torch.float64, seed=0, bias=1.5):
    """Raw (off-sphere) q, k leaves, p and log-gates zero at padding, as the module builds them.
    B * H = 9 rows: one full block of 8 SIMD lanes and a padded one."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(B, T, dtype=torch.bool)
    for b, n in enumerate(LENGTHS.get(T, [T] * B)[:B]):
        mask[b, n:] = False
    q, k, p = (torch.randn(B, H, T, kdim, generator=g, dtype=torch.float64) for _ in range(3))
    p = p * mask[:, None, :, None]
    lg = torch.nn.functional.logsigmoid(torch.randn(B, H, T, L + 1, generator=g, dtype=torch.float64) + bias)
    lg = lg * mask[:, None, :, None]
    leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, p, lg)]
    return leaves, mask


def reference(q, k, p, lg, mask, L):
    """Recurrent Gated-SFA scan (both directions) and explicit-feature SKA, on the sphere."""
    qn, kn = F.normalise(q), F.normalise(k)
    return bidir_sfa_scan(qn, kn, p, lg, L), ska_features(qn, kn, p, mask, L)


def fused(q, k, p, lg, mask, L):
    return dual_ska_cpu(q, k, p, lg, mask, L)  # normalises q and k itself


def compare(leaves, mask, L, atol, rtol, gatol, grtol):
    out_f, out_r = fused(*leaves, mask, L), reference(*leaves, mask, L)
    valid = mask[:, None, :, None]
    for a, b in zip(out_f, out_r):
        torch.testing.assert_close((a * valid).double(), (b * valid).double(), atol=atol, rtol=rtol)
    w = [torch.randn(o.shape, dtype=o.dtype, generator=torch.Generator().manual_seed(7)) * valid for o in out_r]
    g_f = torch.autograd.grad(sum((o * wi).sum() for o, wi in zip(out_f, w)), leaves, allow_unused=True, materialize_grads=True)
    g_r = torch.autograd.grad(sum((o * wi).sum() for o, wi in zip(out_r, w)), leaves, allow_unused=True, materialize_grads=True)
    # Padded positions of p and the log-gates are zeroed by the module, so their gradients
    # there are never used; compare the rest.
    keep = [None, None, valid, valid]
    for a, b, m in zip(g_f, g_r, keep):
        a, b = (a, b) if m is None else (a * m, b * m)
        torch.testing.assert_close(a.double(), b.double(), atol=gatol, rtol=grtol)


@needs_kernel
@pytest.mark.parametrize("T", [1, 7, 13, 30])
@pytest.mark.parametrize("kdim,L", [(8, 3), (3, 0), (5, 1), (6, 4)])
def test_fused_kernel_equals_reference_float64(T, kdim, L):
    leaves, mask = make_inputs(T, kdim, L)
    compare(leaves, mask, L, atol=1e-12, rtol=1e-10, gatol=1e-11, grtol=1e-9)


@needs_kernel
@pytest.mark.parametrize("T", [1, 13, 30])
@pytest.mark.parametrize("kdim,L", [(8, 3), (8, 2), (8, 4), (6, 3), (10, 3), (5, 2)])  # every float32 build
def test_fused_kernel_float32_matches_float64_reference(kdim, L, T):
    leaves64, mask = make_inputs(T, kdim, L)
    leaves32 = [t.detach().float().requires_grad_(True) for t in leaves64]
    out32, ref = fused(*leaves32, mask, L), reference(*leaves64, mask, L)
    valid = mask[:, None, :, None]
    for a, b in zip(out32, ref):
        torch.testing.assert_close((a * valid).double(), b * valid, atol=2e-5, rtol=1e-4)
    w = [torch.randn(o.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * valid for o in ref]
    g32 = torch.autograd.grad(sum((o * wi.float()).sum() for o, wi in zip(out32, w)), leaves32, materialize_grads=True,
                              allow_unused=True)
    g64 = torch.autograd.grad(sum((o * wi).sum() for o, wi in zip(ref, w)), leaves64, materialize_grads=True,
                              allow_unused=True)
    for a, b, m in zip(g32, g64, [1, 1, valid, valid]):
        torch.testing.assert_close(a.double() * m, b * m, atol=1e-4 * (1 + b.abs().max().item()), rtol=1e-3)


@needs_kernel
@pytest.mark.parametrize("T,bias", [(180, 0.0), (180, -3.0)])
def test_fused_kernel_long_sequences_strong_decay(T, bias):
    # Decayed paths underflow far below float32's normal range: values and gradients stay finite
    # and equal the float64 eager form.
    leaves64, _ = make_inputs(T, 8, 3, B=2, H=2, bias=bias)
    mask = torch.ones(2, T, dtype=torch.bool)
    leaves32 = [t.detach().float().requires_grad_(True) for t in leaves64]
    out32 = fused(*leaves32, mask, 3)[0]
    out64 = bidir_sfa_parallel(F.normalise(leaves64[0]), F.normalise(leaves64[1]), leaves64[2], leaves64[3], 3)
    w = torch.randn_like(out64)
    g32 = torch.autograd.grad((out32 * w.float()).sum(), leaves32)
    g64 = torch.autograd.grad((out64 * w).sum(), leaves64)
    assert torch.isfinite(out32).all() and all(torch.isfinite(g).all() for g in g32)
    torch.testing.assert_close(out32.double(), out64, atol=2e-4, rtol=1e-3)
    for a, b in zip(g32, g64):
        torch.testing.assert_close(a.double(), b, atol=2e-3 * b.abs().max().item(), rtol=1e-2)


@needs_kernel
def test_fused_kernel_matches_eager_zonal_forms_float32():
    leaves, mask = make_inputs(30, 8, 3, B=4, H=4, dtype=torch.float32)
    q, k = F.normalise(leaves[0]), F.normalise(leaves[1])
    y, cv = dual_ska_cpu(q, k, leaves[2], leaves[3], mask, 3)
    valid = mask[:, None, :, None]
    y_ref, cv_ref = bidir_sfa_parallel(q, k, leaves[2], leaves[3], 3), ska_zonal(q, k, leaves[2], mask, 3)
    torch.testing.assert_close(y * valid, y_ref * valid, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(cv * valid, cv_ref * valid, atol=1e-5, rtol=1e-4)
    # backward on the valid rows, against the eager forms' gradients
    gy, gc = torch.randn_like(y) * valid, torch.randn_like(cv) * valid
    fused = torch.autograd.grad((y * gy).sum() + (cv * gc).sum(), leaves, allow_unused=True, retain_graph=True)
    eager = torch.autograd.grad((y_ref * gy).sum() + (cv_ref * gc).sum(), leaves, allow_unused=True)
    for a, b in zip(fused, eager):  # (at the valid positions: padding's inputs are the module's zeros)
        a, b = (torch.zeros_like(leaves[0]) if g is None else g * valid for g in (a, b))
        torch.testing.assert_close(a, b, atol=2e-4 * (1 + b.abs().max().item()), rtol=1e-3)


@needs_kernel
@pytest.mark.parametrize("kdim,L", [(64, 1), (3, 8), (64, 8)])
def test_fused_kernel_at_the_largest_shapes_it_takes(kdim, L):
    """The kernel's fixed arrays (MAX_K, MAX_L) at their edges, forward and backward, against the
    eager zonal forms in float64 (the explicit features are too many there)."""
    from gmnet_sklearn.gm.ops.dual_ska.cpu import MAX_K, MAX_L, dual_ska_supported

    assert dual_ska_supported(kdim, L) and (kdim == MAX_K or L == MAX_L)
    assert not dual_ska_supported(MAX_K + 1, 1) and not dual_ska_supported(3, MAX_L + 1)
    leaves, mask = make_inputs(13, kdim, L, B=2, H=2)

    def eager(q, k, p, lg, mask, L):
        qn, kn = F.normalise(q), F.normalise(k)
        return bidir_sfa_parallel(qn, kn, p, lg, L), ska_zonal(qn, kn, p, mask, L)

    out_f, out_e = fused(*leaves, mask, L), eager(*leaves, mask, L)
    valid = mask[:, None, :, None]
    for a, b in zip(out_f, out_e):
        torch.testing.assert_close(a * valid, b * valid, atol=1e-10, rtol=1e-8)
    w = [torch.randn(o.shape, dtype=o.dtype, generator=torch.Generator().manual_seed(7)) * valid for o in out_e]
    g_f = torch.autograd.grad(sum((o * wi).sum() for o, wi in zip(out_f, w)), leaves, materialize_grads=True, allow_unused=True)
    g_e = torch.autograd.grad(sum((o * wi).sum() for o, wi in zip(out_e, w)), leaves, materialize_grads=True, allow_unused=True)
    for a, b, m in zip(g_f, g_e, [None, None, valid, valid]):
        a, b = (a, b) if m is None else (a * m, b * m)
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7)


@needs_kernel
def test_dual_ska_module_auto_takes_the_kernel_on_cpu():
    # The kernel against the references inside the module: tests/test_attention.py
    # (test_module_fast_equals_reference_padded[cpu-...]).
    torch.manual_seed(0)
    layer = make_attention("dual_ska", d_model=24, n_heads=3, k=5, L=3).double()
    x, conj = torch.randn(3, 9, 24, dtype=torch.float64), torch.randint(0, 2, (3, 9))
    mask = torch.arange(9)[None] < torch.tensor([9, 6, 1])[:, None]
    torch.testing.assert_close(layer(x, conj, mask), layer(x, conj, mask, impl="cpu"), atol=0, rtol=0)


def test_disabled_kernel_falls_back_to_eager(monkeypatch):
    monkeypatch.setenv("GMNET_CPU_KERNELS", "0")
    # (found in review: once loaded, the module was returned whatever the variable said)
    monkeypatch.setattr(cpu_kernels, "_module", object())
    assert not cpu_kernels.cpu_kernels_available()
    monkeypatch.setattr(cpu_kernels, "_module", None)
    assert not cpu_kernels.cpu_kernels_available()
    with pytest.raises(RuntimeError, match="GMNET_CPU_KERNELS=0"):
        dual_ska_cpu(*[torch.zeros(1, 1, 2, 3)] * 3, torch.zeros(1, 1, 2, 2), torch.ones(1, 2), 1)
    torch.manual_seed(0)
    layer = make_attention("dual_ska", d_model=24, n_heads=3, k=5, L=3).double()
    x, conj, mask = torch.randn(2, 7, 24, dtype=torch.float64), torch.zeros(2, 7, dtype=torch.long), torch.ones(2, 7, dtype=torch.bool)
    torch.testing.assert_close(layer(x, conj, mask), layer(x, conj, mask, impl="parallel"), atol=0, rtol=0)



@needs_kernel
def test_fused_kernel_skips_padding_of_whole_blocks_exactly():
    # H = 4: SIMD block 0 holds molecules 0 and 1 (lengths 5 and 3), block 1 molecule 2 (9) and
    # padding lanes, in a batch 13 wide: both blocks stop early; valid outputs and all gradients
    # still equal the references.
    T, lengths = 13, [5, 3, 9]
    leaves, _ = make_inputs(T, 8, 3, B=3, H=4)
    mask = torch.zeros(3, T, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    with torch.no_grad():
        leaves[2].mul_(mask[:, None, :, None])
        leaves[3].mul_(mask[:, None, :, None])
    compare(leaves, mask, 3, atol=1e-12, rtol=1e-10, gatol=1e-11, grtol=1e-9)


# ---- building: a build killed half-way must not hang every later fit ----------------------------


def test_build_lock_clears_the_lock_file_a_killed_build_left(tmp_path):
    pytest.importorskip("fcntl")
    (tmp_path / "lock").touch()  # torch's "build in progress" mark; its process is gone
    with cpu_kernels._build_lock(tmp_path):
        assert not (tmp_path / "lock").exists()


def test_build_lock_waits_for_a_build_that_is_still_running(tmp_path):
    import threading

    fcntl = pytest.importorskip("fcntl")
    # another process building: it holds the OS lock and torch's lock file
    holder = open(tmp_path / "gmnet_build.flock", "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    (tmp_path / "lock").touch()
    entered = threading.Event()

    def load_after_it():
        with cpu_kernels._build_lock(tmp_path):
            entered.set()

    waiter = threading.Thread(target=load_after_it)
    waiter.start()
    try:
        assert not entered.wait(0.5) and (tmp_path / "lock").exists()  # neither entered nor cleared
    finally:
        (tmp_path / "lock").unlink()
        fcntl.flock(holder, fcntl.LOCK_UN)
        holder.close()
        waiter.join(10)
    assert entered.is_set()


def test_load_extension_builds_under_the_lock_in_torchs_build_folder(tmp_path, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    pytest.importorskip("fcntl")
    (tmp_path / "lock").touch()
    calls = []

    def fake_load(**kwargs):  # torch's load would wait on the stale lock file for ever
        calls.append((kwargs["build_directory"], (tmp_path / "lock").exists()))
        return "module"

    monkeypatch.setenv("GMNET_CPU_KERNELS", "1")
    monkeypatch.setattr(cpu_kernels, "_module", None)
    monkeypatch.setattr(cpu_kernels, "_failed", None)
    monkeypatch.setattr(cpu_kernels, "_build_directory", lambda name: tmp_path)
    monkeypatch.setattr(cpp_extension, "load", fake_load)
    assert cpu_kernels.load_extension() == "module"
    assert calls == [(str(tmp_path), False)]


@needs_kernel
def test_the_kernels_refuse_tensors_off_the_cpu():
    """Found in review: only the first tensor's device was checked; the kernel would read another
    device's memory as the host's."""
    from gmnet_sklearn.gm.ops.dual_ska.cpu import dual_ska_cpu_fm

    qkp = torch.zeros(1, 2, 3, 1, 3)
    with pytest.raises(ValueError, match="log_gamma on meta"):
        dual_ska_cpu_fm(qkp, torch.zeros(1, 1, 2, 2, device="meta"), torch.ones(1, 2, dtype=torch.bool), 1)
    from gmnet_sklearn.gm.ops.sphere_readout import sphere_readout

    with pytest.raises(RuntimeError, match="CPU extension is not available"):
        sphere_readout(torch.zeros(1, 2, 4), [torch.zeros(1, 3, 5, device="meta")], impl="cpu")
