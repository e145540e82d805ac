"""The ops layer (gm/ops): imports run one way, one `impl` vocabulary, and each dispatch.

The forms themselves are tested against their references in test_attention.py,
test_cpu_kernels.py, test_triton.py, test_functional.py and test_dropout.py.
"""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gmnet_sklearn.gm import GMNet
from gmnet_sklearn.gm import functional as F
from gmnet_sklearn.gm.cpu import cpu_kernels_available
from gmnet_sklearn.gm.ops import IMPLS, impl_for
from gmnet_sklearn.gm.ops import dropout as dropout_op
from gmnet_sklearn.gm.ops import dual_ska as dual_ska_op
from gmnet_sklearn.gm.ops import sphere_readout as readout_op

GM = Path(__file__).resolve().parents[1] / "gmnet_sklearn" / "gm"
needs_kernel = pytest.mark.skipif(not cpu_kernels_available(), reason="fused CPU kernel could not be built")


def _layer(module: str) -> int:
    """0 math, 1 kernel backends, 2 ops, 3 modules."""
    if module == "gm.functional":
        return 0
    if module.startswith(("gm.cpu", "gm.triton")):
        return 1
    if module.startswith("gm.ops"):
        return 2
    return 3


def _gm_imports(path: Path) -> set[str]:
    """The gm modules a file imports, anywhere in it (function-level imports too), as "gm.x.y"."""
    parts = ("gm", *path.relative_to(GM).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = package[:-1] if package[-1] == "__init__" else package
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            mod = (*base, *(node.module.split(".") if node.module else ()))
            for alias in node.names:  # `from .. import functional` imports a module, not a name
                sub = (*mod, alias.name)
                is_module = GM.joinpath(*sub[1:]).with_suffix(".py").exists() or GM.joinpath(*sub[1:]).is_dir()
                out.add(".".join(sub if is_module else mod))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            out.update(n.replace("gmnet_sklearn.", "", 1) for n in names if n.startswith("gmnet_sklearn.gm"))
    return {m for m in out if m.startswith("gm.") and m != "gm"}


def test_imports_run_one_way_math_backends_ops_modules():
    files = [p for p in GM.rglob("*.py") if p.name != "__init__.py" or p.parent != GM]
    assert any("ops" in p.parts for p in files) and any(p.name == "functional.py" for p in files)
    for path in files:
        own = ".".join(("gm", *path.relative_to(GM).with_suffix("").parts)).removesuffix(".__init__")
        for target in _gm_imports(path):
            assert _layer(target) <= _layer(own), f"{own} (layer {_layer(own)}) imports {target} (layer {_layer(target)})"
    assert _gm_imports(GM / "functional.py") == set()  # the math imports nothing of the package


@pytest.mark.parametrize("module,absent", [
    ("gmnet_sklearn.gm.functional", ("gm.ops", "gm.cpu", "gm.triton", "gm.attention", "gm.harmonic_map")),
    ("gmnet_sklearn.gm.ops.sphere_readout", ("gm.attention", "gm.transformer", "gm.embedding", "estimators")),
    ("gmnet_sklearn.gm.ops.dual_ska", ("gm.attention", "gm.transformer", "gm.ops.dual_ska.triton", "estimators")),
])
def test_importing_a_layer_loads_nothing_above_it(module, absent):
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert module in loaded
    hits = [m for m in loaded for a in absent if m.startswith(f"gmnet_sklearn.{a}")]
    assert not hits, hits


def test_one_vocabulary_and_how_a_model_impl_reaches_each_op():
    assert IMPLS == ("auto", "parallel", "reference", "triton", "cpu")
    # A name picks the attention's form; the read-outs and dropout stay on "auto".
    assert [impl_for("reference", op) for op in ("dual_ska", "sphere_readout", "dropout")] == ["reference", "auto", "auto"]
    per_op = {"sphere_readout": "parallel", "dropout": "reference"}
    assert [impl_for(per_op, op) for op in ("dual_ska", "sphere_readout", "dropout")] == ["auto", "parallel", "reference"]
    with pytest.raises(ValueError, match="unknown ops"):
        impl_for({"readout": "cpu"}, "dropout")
    with pytest.raises(ValueError, match="impl must be one of"):
        impl_for({"dropout": "fast"}, "dropout")
    with pytest.raises(ValueError, match="impl must be one of"):
        impl_for("gather", "dual_ska")


def test_dual_ska_dispatch():
    cpu = torch.device("cpu")
    assert dual_ska_op.select("auto", cpu, 2000, 8, 3) == "recurrent"  # scan above PARALLEL_MAX_LEN
    assert dual_ska_op.select("auto", cpu, 2000, 8, 3, fused=False) == "recurrent"
    assert dual_ska_op.select("auto", cpu, 30, 8, 3) == ("cpu" if cpu_kernels_available() else "parallel")
    assert dual_ska_op.select("auto", cpu, 30, 80, 3) == "parallel"  # k beyond the kernel's arrays
    for name in ("cpu", "triton"):  # the single-branch variants have no fused kernels
        assert dual_ska_op.select(name, cpu, 30, 8, 3, fused=False) == "parallel"
        assert dual_ska_op.select(name, cpu, 30, 8, 3) == name
    with pytest.raises(ValueError, match="impl must be one of"):
        dual_ska_op.select("fused", cpu, 30, 8, 3)


def test_dual_ska_auto_takes_triton_on_cuda_except_for_float64(monkeypatch):
    """Checked without a GPU: where Triton is there, "auto" on a CUDA device runs it, but float64
    inputs keep the exact eager form (Triton's arithmetic is float32)."""
    monkeypatch.setattr(dual_ska_op, "triton_available", lambda: True)
    cuda = torch.device("cuda")
    for dtype in (None, torch.float32, torch.bfloat16):
        assert dual_ska_op.select("auto", cuda, 30, 8, 3, dtype=dtype) == "triton"
    assert dual_ska_op.select("auto", cuda, 30, 8, 3, dtype=torch.float64) == "parallel"
    assert dual_ska_op.select("auto", cuda, 30, 8, 3, fused=False) == "parallel"
    monkeypatch.setattr(dual_ska_op, "triton_available", lambda: False)
    assert dual_ska_op.select("auto", cuda, 30, 8, 3, dtype=torch.float32) == "parallel"


def test_sphere_readout_dispatch_takes_its_former_names(monkeypatch):
    w, z = torch.zeros(1, 2, 165), [torch.zeros(1, 8, 3)]
    assert readout_op.select("gather", w, z, 3) == readout_op.select("reference", w, z, 3) == "reference"
    assert readout_op.select("torch", w, z, 3) == "parallel"
    assert readout_op.select("reference", w[..., :1], [torch.zeros(1, 8, 3)], 0) == "parallel"  # L = 0: nothing to gather
    assert readout_op.select("auto", w, z, 3) == ("cpu" if cpu_kernels_available() else "parallel")
    assert readout_op.select("auto", w.half(), [z[0].half()], 3) == "parallel"  # the kernel takes float32/64 only
    assert readout_op.select("auto", w, [z[0].bfloat16()], 3) == "reference"  # mixed (CPU autocast): one dtype needed
    # both answers, whether or not this session has Triton to run (tests/test_triton.py sets its
    # interpreter for the whole session once imported, so the plain answer would depend on the order)
    monkeypatch.setattr(readout_op, "triton_available", lambda: True)
    assert readout_op.select("triton", w, z, 3) == "triton"
    assert readout_op.select("triton", w, z * 2, 3) == "triton"
    with pytest.raises(ValueError, match="at most two branches"):  # even where Triton is there
        readout_op.select("triton", w, z * 3, 3)
    monkeypatch.setattr(readout_op, "triton_available", lambda: False)
    with pytest.raises(ValueError, match="Triton form needs Triton"):
        readout_op.select("triton", w, z, 3)


def test_sphere_readout_auto_on_cuda():
    # the measured rule (cuda_auto_form): Triton for float32 in training and inference; the reference
    # for other dtypes, three branches, or no Triton
    f32 = {torch.float32}
    assert readout_op.cuda_auto_form(f32, 2, True) == "triton"
    assert readout_op.cuda_auto_form(f32, 1, True) == "triton"
    assert readout_op.cuda_auto_form({torch.float32, torch.bfloat16}, 1, True) == "reference"
    assert readout_op.cuda_auto_form({torch.float64}, 1, True) == "reference"
    assert readout_op.cuda_auto_form(f32, 3, True) == "reference"
    assert readout_op.cuda_auto_form(f32, 1, False) == "reference"
    # more token blocks than a CUDA grid axis holds: the reference form (found in review)
    assert readout_op.cuda_auto_form(f32, 1, True, readout_op.MAX_TRITON_TOKENS) == "triton"
    assert readout_op.cuda_auto_form(f32, 1, True, readout_op.MAX_TRITON_TOKENS + 1) == "reference"


def test_dropout_dispatch():
    x = torch.ones(4)
    assert dropout_op.select("reference", x, 0.2, training=False, inplace=False) == "parallel"  # eval: identity
    assert dropout_op.select("reference", x, 0.0, training=True, inplace=False) == "parallel"
    assert dropout_op.select("auto", x, 0.2, training=True, inplace=True) == "parallel"
    assert dropout_op.select("auto", x, 0.2, True, False) == ("cpu" if cpu_kernels_available() else "parallel")
    with pytest.raises(ValueError, match="no Triton form"):
        dropout_op.select("triton", x, 0.2, True, False)


def test_gegenbauer_recurrence_reproduces_the_normalised_polynomials():
    t = np.linspace(-1, 1, 41)
    for k, L in [(3, 5), (8, 3), (10, 4)]:
        alpha, beta = F.gegenbauer_recurrence(k, L)
        assert len(alpha) == len(beta) == L + 1 and alpha[0] == 1.0 and beta[0] == 0.0
        P = [np.ones_like(t), t]
        for n in range(1, L):
            P.append(alpha[n] * t * P[n] - beta[n] * P[n - 1])
        np.testing.assert_allclose(np.stack(P[: L + 1], -1), F.gegenbauer_normalised(L, k, t), atol=1e-13, rtol=0)
        lam = (k - 2) / 2
        np.testing.assert_allclose(F.gegenbauer_normalised(L, k, t)[:, L],
                                   F.gegenbauer(L, lam, t) / F.gegenbauer(L, lam, 1.0), atol=1e-12, rtol=0)


def _tiny(dropout=0.0):
    torch.manual_seed(0)
    return GMNet(40, 2, k=4, L=2, d_model=16, n_layers=1, n_heads=2, dropout=dropout).double()


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 40, (3, 7), generator=g)
    mask = torch.arange(7)[None] < torch.tensor([7, 4, 2])[:, None]
    return ids * mask, torch.randint(0, 2, (3, 7), generator=g) * mask, mask


def test_model_impl_mapping_reaches_the_read_outs(monkeypatch):
    calls = []
    original = readout_op.sphere_readout_reference
    monkeypatch.setattr(readout_op, "sphere_readout_reference", lambda *a: calls.append(1) or original(*a))
    m = _tiny().eval()
    ids, conj, mask = _batch()
    out = m(ids, conj, mask)
    assert not calls  # on CPU "auto" never runs the reference read-out
    ref = m(ids, conj, mask, impl={"sphere_readout": "reference"})
    assert len(calls) == 3  # SH-Embedding, the attention's and SH-FFN's read-outs
    torch.testing.assert_close(ref, out, atol=1e-12, rtol=0)


@needs_kernel
def test_reference_dropout_draws_the_kernels_masks_in_the_model():
    ids, conj, mask = _batch()
    outs, grads = {}, {}
    for impl in ("auto", {"dropout": "reference"}):
        m = _tiny(dropout=0.3).train()
        torch.manual_seed(5)
        out = m(ids, conj, mask, impl=impl)
        out.sum().backward()
        key = str(impl)
        outs[key], grads[key] = out.detach(), [p.grad for p in m.parameters()]
    a, b = outs.values()
    assert torch.equal(a, b)
    for ga, gb in zip(*grads.values()):
        torch.testing.assert_close(ga, gb, atol=1e-13, rtol=0)
    m = _tiny(dropout=0.3).train()
    torch.manual_seed(5)
    assert not torch.equal(m(ids, conj, mask, impl={"dropout": "parallel"}).detach(), a)  # torch's own draws differ


def test_prefer_changes_what_auto_runs_inside_the_block_only():
    from gmnet_sklearn.gm.ops import prefer

    w, z = torch.zeros(1, 2, 165), [torch.zeros(1, 8, 3)]
    outside = readout_op.select("auto", w, z, 3)
    with prefer(sphere_readout="parallel", dropout="reference"):
        assert readout_op.select("auto", w, z, 3) == "parallel"
        assert readout_op.select("reference", w, z, 3) == "reference"  # explicit names stay
        assert dropout_op.select("auto", torch.ones(4), 0.2, True, False) == "reference"
        with prefer(sphere_readout="reference"):
            assert readout_op.select("auto", w, z, 3) == "reference"
        assert readout_op.select("auto", w, z, 3) == "parallel"
    assert readout_op.select("auto", w, z, 3) == outside
    with pytest.raises(ValueError, match="unknown ops"):
        with prefer(attention="parallel"):
            pass
    with pytest.raises(ValueError, match="impl must be one of"):
        with prefer(dual_ska="fused"):
            pass


def test_an_l0_read_out_under_cpu_autocast_and_an_empty_batch_in_the_zonal_form():
    """Found in review: at L = 0 the mixed-dtype rule (bf16 inputs, a float32 weight: the reference
    form) was undone, and the eager form's backward failed; the zonal form's span check reduced
    an empty batch."""
    from gmnet_sklearn.gm.ops.dual_ska.zonal import sfa_parallel

    w = torch.randn(2, 3, 1, requires_grad=True)
    z = torch.randn(2, 4, 5, dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert readout_op.select("auto", w, [z], 0) == "reference"
        out = readout_op.sphere_readout(w, [z])
    out.float().sum().backward()
    assert w.grad.shape == w.shape
    q = torch.zeros(0, 2, 5, 3)
    y = sfa_parallel(q, q, q, torch.zeros(0, 2, 5, 3), L=2, causal=False)
    assert y.shape == (0, 2, 5, 3)
