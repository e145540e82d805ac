"""Where a training step's time goes: the ops (on CUDA, the kernels) of one model's steps by time.

    python -m benchmarks.profile_step --arm gmnet --device cuda --batch-size 1024 [--readout triton]

Times ``--steps`` training steps (forward, backward, Adam step) of one arm of
``benchmarks.throughput`` on real ESOL batches under ``torch.profiler``, after ``--warmup``
untimed ones (at least one per batch: every width is seen before the profile), and prints the ops with the most self time (device time on CUDA, CPU time on CPU)
and how many ran per step: what to fuse next. ``--readout`` runs Chem-GMNet's read-outs on one
form (``gm.ops.prefer``). Writes the table as JSON too with ``--out``. A diagnostic, not a
benchmark: the profiler's own overhead is in the times, so ratios come from ``benchmarks.throughput``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from ._common import git_info, resolve_vocab_file, write_json_atomic


def profile_steps(arm: str, device: str, batch_size: int, steps: int, warmup: int, readout: str | None,
                  dataset: str = "esol") -> dict:
    """Per-op totals over ``steps`` profiled training steps: name, calls per step, self time (µs) per step."""
    from torch.profiler import ProfilerActivity, profile

    from gmnet_sklearn.gm.ops import prefer
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    from .throughput import DATASETS, build, load_batches, time_steps

    tokenizer = SmilesTokenizer(resolve_vocab_file()).fit([])
    batches, shape = load_batches(DATASETS[dataset], tokenizer, batch_size, max(steps, 1))
    batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
    model, opt = build(arm, tokenizer.vocab_size, device)
    cuda = device.startswith("cuda")
    forms = {} if readout is None else {"sphere_readout": readout}
    with prefer(**forms):
        if warmup:  # every batch at least once: a width first seen under the profiler would put its
            # graph capture or compilation in the profile
            time_steps(model, opt, batches, device, True, max(warmup, len(batches)))
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            time_steps(model, opt, batches, device, True, steps)
    rows = []
    for ev in prof.key_averages():
        # on CUDA the kernels only: an op that launches one (aten::mm, a Triton autograd Function) is
        # credited its kernel's device time too, and counting both doubled the total (the H100 log of 1a05421)
        if cuda and ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        self_us = ev.self_device_time_total if cuda else ev.self_cpu_time_total
        if self_us <= 0:
            continue
        rows.append({"name": ev.key, "calls_per_step": ev.count / steps, "self_us_per_step": self_us / steps})
    rows.sort(key=lambda r: -r["self_us_per_step"])
    total = sum(r["self_us_per_step"] for r in rows)
    return {"arm": arm, "device": device, "batch_size": batch_size, "dataset": dataset, "batches": shape,
            "steps": steps, "readout": readout, "time": "device" if cuda else "cpu",
            "total_self_us_per_step": total, "ops_per_step": sum(r["calls_per_step"] for r in rows), "ops": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arm", default="gmnet", help="an arm of benchmarks.throughput (gmnet, chemberta, gmnet_graphs, ...)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--readout", default=None, choices=("reference", "parallel", "cpu", "triton"))
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--top", type=int, default=30, help="rows printed")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = profile_steps(args.arm, args.device, args.batch_size, args.steps, args.warmup, args.readout)
    res["command"] = " ".join([sys.executable, "-m", "benchmarks.profile_step", *sys.argv[1:]])
    res["git"] = git_info()
    print(f"{res['arm']} on {res['device']}, batch {res['batch_size']} ({res['batches']['mean_padded_width']:.1f} "
          f"tokens wide), read-outs {res['readout'] or 'auto'}: {res['ops_per_step']:.0f} {'kernels' if res['time'] == 'device' else 'ops'} a step, "
          f"{res['total_self_us_per_step'] / 1000:.2f} ms of {res['time']} self time a step")
    for r in res["ops"][:args.top]:
        print(f"{r['self_us_per_step']:10.1f} us {100 * r['self_us_per_step'] / res['total_self_us_per_step']:5.1f}% "
              f"{r['calls_per_step']:6.1f}x  {r['name'][:110]}")
    if args.out:
        write_json_atomic(Path(args.out), res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
