"""Tensor ops per training step, by arm: what bounds a small model's step on a GPU.

    python -m benchmarks.op_count [--out benchmarks/results/op_count.json]

At batch 32 both models are far too small to keep a GPU busy: each op is a kernel launch of a
few microseconds, and the number of launches, not arithmetic, sets the step time (the H100
throughput files show it). This counts, on CPU and without any GPU, the ATen ops one training
step (forward + backward, optimiser excluded) dispatches for the models as they run on CUDA:
padded batches, Chem-GMNet's read-outs in the given `sphere_readout` form and torch's dropout
(both chosen through the model's ``impl``), and its DualSKA core, one fused Triton kernel per
direction on CUDA, replaced here by a stand-in of one op per output (so the count is independent
of the CPU forms of the attention). View ops (no kernel) are counted apart. The counts are deterministic: a cheap check of a change meant to speed up the
GPU step, before a GPU is at hand to time it.
"""

from __future__ import annotations

import argparse
import collections
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._common import git_info, versions, write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results"
# Ops that only make a new view of existing storage: no kernel on a GPU.
VIEW_OPS = {"view", "_unsafe_view", "reshape", "detach", "alias", "as_strided", "permute", "transpose", "t", "unsqueeze",
            "squeeze", "expand", "slice", "select", "unbind", "split", "split_with_sizes", "chunk", "narrow", "diagonal"}


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _with_core_stand_in(model):
    """The model with each DualSKA core replaced by one op per branch output, forward and
    backward: the fused kernel's share (the instances' class changes; the library's does not)."""
    from gmnet_sklearn.gm.attention.dual_ska import DualSKA

    class CoreStandIn(DualSKA):
        def branch_outputs(self, q, k, p, log_gamma, mask, form):
            return [q + p, k + p]

    for layer in model.encoder.layers:
        if type(layer.attn) is DualSKA:
            layer.attn.__class__ = CoreStandIn
    return model


def count_step(arm: str, readout: str = "reference", B: int = 32, T: int = 40, seed: int = 0) -> dict:
    from gmnet_sklearn.baselines import ChemBERTa
    from gmnet_sklearn.gm import GMNet

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 500, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1:, 3 * T // 4:] = False  # padded rows, as in a shuffled batch
    conj = torch.randint(0, 2, (B, T), generator=g) * mask
    torch.manual_seed(seed)
    model = _with_core_stand_in(GMNet(591, 1)) if arm == "gmnet" else ChemBERTa(591, 1)
    # As on CUDA: no CPU kernel runs (dropout is torch's); the core's eager form is the stand-in.
    impl = {"dual_ska": "parallel", "sphere_readout": readout, "dropout": "parallel"}

    def step():
        for prm in model.parameters():
            prm.grad = None
        if arm == "gmnet":
            out = model(ids, conj, mask, impl=impl, pack=False)
        else:
            out = model(input_ids=ids, conj_flags=conj, attention_mask=mask)
        out.float().pow(2).mean().backward()

    step()  # warm-up: lazily built tables and caches
    with _Count() as c:
        step()
    kernels = {k: v for k, v in c.ops.items() if k not in VIEW_OPS}
    return {"ops": sum(c.ops.values()), "non_view_ops": sum(kernels.values()),
            "top_non_view_ops": dict(collections.Counter(kernels).most_common(12))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "op_count.json"))
    args = parser.parse_args(argv)
    report = {"benchmark": "op_count", "batch": {"B": 32, "T": 40, "padding": "rows 1..31 padded from position 30"},
              "command": " ".join(["python -m benchmarks.op_count", *(argv if argv is not None else sys.argv[1:])]),
              "torch": torch.__version__, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "git": git_info(), "versions": versions(),
              "counts": {}}
    # The labels name the read-out forms as the records always have: "gather" is the reference
    # form (auto on CUDA), "slice-wise torch" the eager one ("parallel").
    cases = [("chemberta", "chemberta", None), ("gmnet (gather read-outs: auto on CUDA)", "gmnet", "reference"),
             ("gmnet (slice-wise torch read-outs)", "gmnet", "parallel")]
    for label, arm, readout in cases:
        report["counts"][label] = r = count_step(arm, readout or "reference")
        print(f"{label:42s} {r['non_view_ops']:5d} kernel ops, {r['ops']:5d} ops in all per training step")
    out = Path(args.out)
    write_json_atomic(out, report)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
