"""The Triton read-out's tiles, measured: forward and backward of every read-out call of a
Chem-GMNet step, under each tile setting of a small grid (`gm/ops/sphere_readout/triton.py`'s
`tiles`: MC, BN, CB_MAX, NUM_WARPS, WEIGHT_PROGRAMS_PER_SM), on a GPU.

The calls' shapes are recorded from the model itself (one forward of the masked-LM model at
``--shape``, every read-out on the Triton form; the calls over the batch's positions, i.e. the
attention's and the SH-FFN's, not the SH-embedding's over the vocabulary), then each call runs alone on random inputs with
``--tokens`` positions (about 37,000 at a pretraining batch of 1,024 MOSES SMILES), timed with CUDA
events: the median of ``--reps`` forwards and backwards after a warm-up that compiles. A step's
figure adds the calls with their counts. Each setting's outputs and gradients are compared with the
shipped setting's (the largest relative difference is recorded), so a setting that computes wrong
shows, not only one that is fast; a setting that fails (e.g. too many registers) is recorded with
its error, and the JSON is rewritten after every setting. The grid varies one setting at a time
from the shipped tiles, then combines each setting's best value.

    python -m benchmarks.readout_tiles --device cuda [--shape paper] [--tokens 37000] [--reps 10]

Writes benchmarks/results/readout_tiles_<device>.json (or ``--output``). On CPU it runs the Triton
interpreter (``TRITON_INTERPRET=1``, set here before Triton loads): a check of the script, not a
timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import torch

from ._common import git_info, hardware_info, write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results"
# One setting at a time from the shipped tiles (TILE_SETTINGS of the kernel module).
AXES = {"BN": (64, 128), "MC": (16, 64), "CB_MAX": (64,), "NUM_WARPS": (2, 8), "WEIGHT_PROGRAMS_PER_SM": (2, 8)}


def record_calls(kernels, shape: str, device: str) -> Counter:
    """(G, C, n_monomials, k, branches, scaled, L, eps) -> calls in one forward of the model."""
    from gmnet_sklearn.gm.ops import prefer
    from gmnet_sklearn.pretrain.models import DEFAULT_PARAMS, LIBRARY_SHAPE, build_mlm

    params = DEFAULT_PARAMS["gmnet"] if shape == "paper" else {**DEFAULT_PARAMS["gmnet"], **LIBRARY_SHAPE["gmnet"]}
    model = build_mlm("gmnet", 64, 0, params).to(device)
    calls = Counter()
    original = kernels.sphere_readout_triton

    ids = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(0)).to(device)

    def recorder(weight, zs, scales, eps, L):
        scales = list(scales)
        # only the calls over the batch's positions: the SH-embedding's read-out runs over the
        # vocabulary (N = V), and in training on the reference form (V is below "auto"'s threshold)
        if zs[0].shape[2] == ids.numel():
            calls[(*weight.shape, zs[0].shape[1], len(zs), scales[0] is not None, L, eps)] += 1
        return original(weight, zs, scales, eps, L)

    kernels.sphere_readout_triton = recorder
    try:
        with torch.no_grad(), prefer(sphere_readout="triton"):
            model(ids, torch.zeros_like(ids), torch.ones_like(ids, dtype=torch.bool))
    finally:
        kernels.sphere_readout_triton = original
    return calls


def time_call(kernels, call, tokens: int, reps: int, device: str, settings: dict, reference=None):
    """Median forward and backward milliseconds of one call under ``settings``, and the largest
    relative difference of its output and gradients from ``reference`` (those of the shipped tiles)."""
    G, C, NM, k, nb, scaled, L, eps = call
    g = torch.Generator().manual_seed(0)
    leaves = [torch.randn(G, C, NM, generator=g) * NM ** -0.5] + [torch.randn(G, k, tokens, generator=g) for _ in range(nb)]
    leaves += [torch.rand(G, generator=g) for _ in range(nb)] if scaled else []
    leaves = [t.to(device).requires_grad_(True) for t in leaves]
    dout = torch.randn(G, C, tokens, generator=g).to(device)
    cuda = device.startswith("cuda")

    def run():
        scales = leaves[1 + nb:] if scaled else [None] * nb
        out = kernels.sphere_readout_triton(leaves[0], leaves[1:1 + nb], scales, eps, L)
        return out, torch.autograd.grad(out, leaves, dout)

    fwd, bwd = [], []
    with kernels.tiles(**settings):
        result = run()  # compiles
        for _ in range(reps):
            if cuda:
                e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                e0.record()
            scales = leaves[1 + nb:] if scaled else [None] * nb
            out = kernels.sphere_readout_triton(leaves[0], leaves[1:1 + nb], scales, eps, L)
            if cuda:
                e1.record()
            torch.autograd.grad(out, leaves, dout)
            if cuda:
                e2.record()
                torch.cuda.synchronize()
                fwd.append(e0.elapsed_time(e1))
                bwd.append(e1.elapsed_time(e2))
    out, grads = result
    tensors = [out.detach(), *grads]
    diff = None
    if reference is not None:
        diff = max(((a - b).norm() / b.norm().clamp_min(1e-30)).item() for a, b in zip(tensors, reference))
    return (statistics.median(fwd) if fwd else None, statistics.median(bwd) if bwd else None, diff, tensors)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--shape", choices=("paper", "library"), default="paper")
    p.add_argument("--tokens", type=int, default=37000, help="positions per call (batch rows x tokens)")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--axes", default=None, help="JSON {setting: [values]} instead of the built-in grid")
    p.add_argument("--note", default="")
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    if not args.device.startswith("cuda"):
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are defined
    from gmnet_sklearn.gm.ops.sphere_readout import triton as kernels

    if not args.device.startswith("cuda") and not kernels.INTERPRETED:
        raise SystemExit("on CPU this needs the Triton interpreter: run it in a fresh process (TRITON_INTERPRET=1)")
    axes = {name: tuple(values) for name, values in json.loads(args.axes).items()} if args.axes else AXES
    calls = record_calls(kernels, args.shape, args.device)
    shipped = {name: getattr(kernels, name) for name in kernels.TILE_SETTINGS}

    out = Path(args.output) if args.output else RESULTS / f"readout_tiles_{args.device.split(':')[0]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": "readout_tiles", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "git": git_info(), "hardware": hardware_info(args.device), "note": args.note,
              "command": " ".join([sys.executable, "-m", "benchmarks.readout_tiles", *sys.argv[1:]]),
              "shape_preset": args.shape, "tokens": args.tokens, "reps": args.reps,
              "calls_per_step": [{"call": list(c), "count": n} for c, n in calls.items()],
              "call_fields": ["groups", "channels", "monomials", "k", "branches", "scaled", "L", "eps"],
              "shipped": shipped, "rows": []}

    def measure(settings):
        row = {"settings": {**shipped, **settings}, "calls": [], "forward_ms": 0.0, "backward_ms": 0.0}
        try:
            for call, count in calls.items():
                f, b, diff, tensors = time_call(kernels, call, args.tokens, args.reps, args.device, settings,
                                                references.get(call))
                references.setdefault(call, tensors)
                row["calls"].append({"call": list(call), "count": count, "forward_ms": f, "backward_ms": b,
                                     "max_relative_difference": diff})
                if f is not None:
                    row["forward_ms"] += count * f
                    row["backward_ms"] += count * b
            row["total_ms"] = row["forward_ms"] + row["backward_ms"]
            print(f"{json.dumps(settings) or '{}':60s} forward {row['forward_ms']:8.2f} ms  backward "
                  f"{row['backward_ms']:8.2f} ms  max diff "
                  f"{max((c['max_relative_difference'] or 0) for c in row['calls']):.1e}", flush=True)
        except Exception as exc:  # e.g. out of resources at compile time: recorded, the grid goes on
            if not settings:
                raise  # the shipped tiles must run
            row["error"], row["total_ms"] = f"{type(exc).__name__}: {exc}"[:500], None
            print(f"{json.dumps(settings):60s} failed: {row['error']}", flush=True)
        result["rows"].append(row)
        write_json_atomic(out, result)  # kept if a later setting hangs
        return row

    def total(row):
        return float("inf") if row["total_ms"] is None else row["total_ms"]

    references: dict = {}
    rows = [measure({})]
    best = {}
    for name, values in axes.items():
        axis_rows = [(value, measure({name: value})) for value in values]
        rows += [row for _, row in axis_rows]
        value, row = min(axis_rows, key=lambda vr: total(vr[1]))
        if total(row) < total(rows[0]):
            best[name] = value
    if len(best) > 1:
        rows.append(measure(best))
    fastest = min(rows, key=total)
    result["fastest"] = fastest["settings"]
    result["fastest_over_shipped"] = rows[0]["total_ms"] / fastest["total_ms"] if fastest["total_ms"] else None
    write_json_atomic(out, result)
    print(f"fastest {fastest['settings']} ({result['fastest_over_shipped'] or 0:.2f}x the shipped tiles); wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
