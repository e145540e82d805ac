"""Accuracy check of the fast path: the same seeded ESOL training run, fast vs reference.

Trains Chem-GMNet (paper shape, chemberta3 optimiser settings) twice from the same seed, on the
same batches with the same dropout masks: once with a fast path (``--fast-impl``: "parallel",
the eager zonal forms; "auto", what the model runs by default, the fused kernel of the device when
it is available) and once with the reference forms (impl="reference": the recurrent
moment-matrix scan and explicit Phi features). Records both validation-RMSE curves. Both runs
use one batch layout (``--layout``; by default what the model does on the device: packed real
tokens on CPU, padded on CUDA), so that dropout draws the same masks; that packing itself gives
the padded forward's outputs and gradients is tested exactly in tests/test_packing.py.
The reference scan is slow, so the default is a few epochs. In float64 the two curves agree to
rounding; in float32 both forms carry ~1e-3 relative gradient error (the reference slightly more),
and the training trajectory amplifies any difference geometrically (in float64 too; likely Adam's
rescaling of near-zero gradients), which the recorded per-step training losses show.

    python -m benchmarks.fast_vs_reference [--epochs 5] [--dtype float32|float64] [--fast-impl auto] [--threads N]
                                           [--layout packed|padded]

Writes benchmarks/results/fast_vs_reference_<device>_<dtype>[_<fast-impl>].json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from ._common import git_info, write_json_atomic
from .throughput import RESULTS, gmnet_path, hardware


def train_curve(impl: str, data, epochs: int, seed: int, device: str, dtype: torch.dtype, pack: bool) -> dict:
    from gmnet_sklearn.estimators.data import BucketedLoader, sequential_loader
    from gmnet_sklearn.gm import GMNet

    train_set, valid_set, vocab_size, y_scale = data
    torch.manual_seed(seed)
    model = GMNet(vocab_size, 1).to(device=device, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=3e-5)
    loader = BucketedLoader(seed=seed, bucket=False)
    curve, step_losses, start = [], [], time.perf_counter()
    for _ in range(epochs):
        model.train()
        for X, y in loader(train_set, batch_size=32):
            opt.zero_grad()
            loss = (model(**X, impl=impl, pack=pack)[:, 0] - y.reshape(-1).to(dtype)).pow(2).mean()
            loss.backward()
            opt.step()
            step_losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = torch.cat([model(**X, impl=impl, pack=pack)[:, 0] for X, _ in sequential_loader(valid_set, batch_size=128)])
        curve.append(float((pred - valid_set.y.reshape(-1).to(dtype)).pow(2).mean().sqrt()) * y_scale)
    return {"valid_rmse": curve, "train_loss_per_step": step_losses, "seconds": time.perf_counter() - start}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--fast-impl", choices=["parallel", "auto", "cpu", "triton"], default="parallel",
                        help="fast path to compare: parallel (eager zonal forms) or auto (the model's default)")
    parser.add_argument("--layout", choices=["packed", "padded"], default=None,
                        help="batch layout of both runs (default: packed on CPU, padded on CUDA, as the model does)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device

    from gmnet_sklearn.datasets import fetch_moleculenet
    from gmnet_sklearn.estimators.data import EncodedSmilesDataset
    from gmnet_sklearn.model_selection import scaffold_split
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    data = fetch_moleculenet("esol")
    smiles = np.array([s.strip() for s in data.smiles], dtype=object)
    train, valid, _ = scaffold_split(smiles)
    vocab = os.environ.get("GMNET_TOKENIZER_VOCAB")
    tok = SmilesTokenizer(vocab if vocab and Path(vocab).is_file() else None).fit(list(smiles[train]))
    y = data.target.astype(np.float64)
    mean, scale = y[train].mean(), y[train].std()
    enc_valid = tok.encode_batch(list(smiles[valid]))
    prepared = (
        EncodedSmilesDataset(tok.encode_batch(list(smiles[train])), ((y[train] - mean) / scale).astype(np.float32), device=device),
        EncodedSmilesDataset(enc_valid, ((y[valid] - mean) / scale).astype(np.float32), device=device),
        tok.vocab_size,
        float(scale),
    )
    dtype = getattr(torch, args.dtype)
    layout = args.layout or ("packed" if device == "cpu" else "padded")
    runs = {impl: train_curve(impl, prepared, args.epochs, args.seed, device, dtype, layout == "packed")
            for impl in (args.fast_impl, "reference")}
    fast, ref = np.array(runs[args.fast_impl]["valid_rmse"]), np.array(runs["reference"]["valid_rmse"])
    report = {
        "benchmark": "fast_vs_reference", "dataset": "esol", "device": device, "hardware": hardware(device),
        "fast_impl": args.fast_impl, "gmnet_path": gmnet_path(device) if args.fast_impl == "auto" else args.fast_impl,
        "epochs": args.epochs, "seed": args.seed, "dtype": args.dtype, "layout": layout, "runs": runs,
        "max_abs_diff_valid_rmse": float(np.abs(fast - ref).max()),
        "abs_diff_train_loss_per_step": np.abs(np.array(runs[args.fast_impl]["train_loss_per_step"])
                                               - np.array(runs["reference"]["train_loss_per_step"])).tolist(),
        "command": " ".join([sys.executable, "-m", "benchmarks.fast_vs_reference", *sys.argv[1:]]),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git": git_info(),
    }
    print("epoch  fast     reference")
    for e, (a, b) in enumerate(zip(fast, ref), 1):
        print(f"{e:5d}  {a:.6f} {b:.6f}")
    print(f"max |diff| {report['max_abs_diff_valid_rmse']:.2e}; seconds fast {runs[args.fast_impl]['seconds']:.0f}, "
          f"reference {runs['reference']['seconds']:.0f}")
    name = f"fast_vs_reference_{device.split(':')[0]}_{args.dtype}" + ("" if args.fast_impl == "parallel" else f"_{args.fast_impl}")
    out = Path(args.out) if args.out else RESULTS / f"{name}.json"
    write_json_atomic(out, report)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
