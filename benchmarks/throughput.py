"""Training and inference throughput: Chem-GMNet vs the same-shape ChemBERTa baseline.

Both models at the paper's shape (d 384, 3 layers, 12 heads; k=8, L=3), batch 32, on real SMILES
(ESOL and Lipophilicity), with the same batches: length-bucketed by default, or plain shuffled
ones padded to their longest SMILES (``--batching plain``, the chemberta3 protocol's). Steps are
measured interleaved (model A, model B, A, B, ...) in one process so the ratio holds on a noisy
machine. A training step is forward + backward + Adam step. Peak memory is measured per model in
a fresh subprocess.

    python -m benchmarks.throughput [--device auto] [--rounds 5] [--steps 10] [--threads N] [--batching plain]
                                    [--esol-seed gmnet chemberta] [--esol-seed-only] [--esol-seed-no-graphs]

On CUDA five more arms run beside them: ``gmnet_graphs`` and ``chemberta_graphs`` (each batch
shape's forward and backward replayed from CUDA graphs, gm/cuda_graphs.py), ``gmnet_graphs_bf16``
(the same under bf16 autocast), ``gmnet_graphs_triton_readout`` (graphs, with every read-out on
the fused Triton kernels, gm/ops/sphere_readout/triton.py) and ``gmnet_graphs_gemm_readout`` (the
same on the Triton read-out's "gemm" form: monomials from a kernel, matmuls on cuBLAS). ``--arms gmnet_compiled
chemberta_compiled`` adds each model as it ships under ``torch.compile`` (inductor, dynamic shapes,
so the buckets' widths share one compilation; its warm-up, compilation included, is not timed);
``--arms gmnet_graphs_attention_one_key_block`` adds Chem-GMNet on graphs with its Triton attention
on the tile rule ``TILE_RULES["one_key_block"]`` (gm/ops/dual_ska/triton.py), to time it against the
shipped rule.
An arm that fails is recorded with its error and left out of the timings, so one broken path
does not lose the others' figures.

``--esol-seed`` also times one whole ESOL seed per arm under the chemberta3 protocol (100 epochs,
plain shuffled batches, best validation epoch restored and scored on test), as
``benchmarks.run`` runs it, with the same threads, one arm after the other.

Writes benchmarks/results/throughput_<device>.json; `python -m benchmarks.report` renders it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from ._common import add_matmul_precision_argument, apply_matmul_precision, cpu_info, git_info, gmnet_path

RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = {"esol": "esol", "lipophilicity": "lipophilicity"}


def hardware(device: str) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    cpu = cpu_info()
    info["cpu"] = cpu["model"]
    info["cpu_isa"] = cpu["isa"]  # hosts named alike differ in it, and in speed (the C++ kernels' build)
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))  # the one timed, not the first
    # other jobs on the machine slow every arm alike (the rounds interleave), but the absolute figures with them
    info["load_average_1_5_15min"] = [round(x, 2) for x in os.getloadavg()]
    return info


def load_batches(name: str, tokenizer, batch_size: int, n_batches: int, seed: int = 0, batching: str = "bucketed"):
    """Batches of real SMILES: length-bucketed (the estimators' default training batches) or
    plain shuffled ones padded to their longest SMILES (the chemberta3 protocol's)."""
    from gmnet_sklearn.datasets import fetch_moleculenet
    from gmnet_sklearn.estimators.data import BucketBatchSampler, EncodedSmilesDataset

    data = fetch_moleculenet(name)
    enc = tokenizer.encode_batch([s.strip() for s in data.smiles], on_invalid="mask")
    ds = EncodedSmilesDataset(enc.subset(np.nonzero(enc.valid)[0]))
    batches = []
    if batching == "plain":
        rng = np.random.default_rng(seed)
        while len(batches) < n_batches:
            order = rng.permutation(len(ds.lengths))
            batches.extend(ds.collate(list(order[i : i + batch_size]))[0]
                           for i in range(0, len(order) - batch_size + 1, batch_size))
    sampler = BucketBatchSampler(ds.lengths, batch_size, seed)
    while len(batches) < n_batches:
        batches.extend(ds.collate(rows)[0] for rows in sampler if len(rows) == batch_size)
    batches = batches[:n_batches]
    shape = {"mean_tokens": float(np.mean([b["attention_mask"].sum(1).float().mean().item() for b in batches])),
             "mean_padded_width": float(np.mean([b["input_ids"].shape[1] for b in batches]))}
    return batches, shape


# "gmnet" runs the default path (impl="auto": the fused kernels of this device when they are
# available); "gmnet_eager" runs pure PyTorch (the eager zonal forms, no compiled CPU kernels: what
# a machine without a compiler gets), so the kernels' gain is measured too.
ARMS = ("gmnet", "gmnet_eager", "chemberta")
CUDA_ARMS = ("gmnet_graphs", "gmnet_graphs_bf16", "gmnet_graphs_triton_readout", "gmnet_graphs_gemm_readout",
             "chemberta_graphs")
COMPILED_ARMS = ("gmnet_compiled", "chemberta_compiled")  # on request (--arms): compiling takes minutes
# on request: graphs with the Triton attention on another tile rule (TILE_RULES of gm/ops/dual_ska/triton.py)
ATTENTION_ARMS = ("gmnet_graphs_attention_one_key_block",)


class _ReadoutImpl(torch.nn.Module):
    """Chem-GMNet with its read-outs on one form (``impl={"sphere_readout": form}``; for "triton"
    also the Triton form, gm/ops/sphere_readout/triton.py FORMS), the attention on its default."""

    def __init__(self, model, form, triton_form="fused"):
        super().__init__()
        self.model, self.form, self.triton_form = model, form, triton_form

    def forward(self, **X):
        if self.form != "triton":
            return self.model(**X, impl={"sphere_readout": self.form})
        from gmnet_sklearn.gm.ops.sphere_readout import triton as readout_triton  # (Triton is optional)

        with readout_triton.form(self.triton_form):  # picks the autograd Function; its backward follows
            return self.model(**X, impl={"sphere_readout": self.form})


class _AttentionTiles(torch.nn.Module):
    """Chem-GMNet with its Triton attention on other tiles (gm/ops/dual_ska/triton.py `tiles`); the
    backward follows its forward's tiles."""

    def __init__(self, model, settings):
        super().__init__()
        self.model, self.settings = model, settings

    def forward(self, **X):
        from gmnet_sklearn.gm.ops.dual_ska import triton as attention_triton  # (Triton is optional)

        with attention_triton.tiles(**self.settings):
            return self.model(**X)


class _Graphed(torch.nn.Module):
    """A model called through its CUDA graphs (gm/cuda_graphs.py), as the estimators' net does
    with ``cuda_graphs=True``."""

    def __init__(self, model, precision="float32"):
        super().__init__()
        from gmnet_sklearn.gm.cuda_graphs import CUDAGraphs

        self.model = model
        self.graphs = CUDAGraphs(model, pad_id=0, precision=precision)

    def forward(self, **X):
        return self.graphs(**X)


class _Compiled(torch.nn.Module):
    """A model called through ``torch.compile`` (default mode, ``dynamic=True``). Chem-GMNet's C++
    and Triton kernels are autograd functions Dynamo may not trace; it then runs them between
    compiled regions (a graph break), which this arm's time includes."""

    def __init__(self, model, backend: str = "inductor"):
        super().__init__()
        self.model = model
        # in a list: not a second copy of the parameters
        self._compiled = [torch.compile(model, dynamic=True, backend=backend)]

    def forward(self, **X):
        return self._compiled[0](**X)


class _Eager(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, **X):
        from gmnet_sklearn.gm.cpu import kernels_disabled

        with kernels_disabled():  # the choice of path is made in the forward; the backward follows it
            return self.model(**X, impl="parallel")


def build(arm: str, vocab_size: int, device: str):
    from gmnet_sklearn.baselines import ChemBERTa
    from gmnet_sklearn.estimators._base import adam_options  # the estimators' optimiser settings
    from gmnet_sklearn.gm import GMNet

    torch.manual_seed(0)
    model = (ChemBERTa(vocab_size, 1) if arm.startswith("chemberta") else GMNet(vocab_size, 1)).to(device)
    if arm == "gmnet_eager":
        model = _Eager(model)
    elif arm.endswith("_compiled"):
        model = _Compiled(model)
    elif arm == "gmnet_graphs_triton_readout":
        model = _Graphed(_ReadoutImpl(model, "triton"))
    elif arm.startswith("gmnet_graphs_attention_"):
        from gmnet_sklearn.gm.ops.dual_ska import triton as attention_triton

        model = _Graphed(_AttentionTiles(model, attention_triton.TILE_RULES[arm.removeprefix("gmnet_graphs_attention_")]))
    elif arm == "gmnet_graphs_gemm_readout":
        model = _Graphed(_ReadoutImpl(model, "triton", "gemm"))
    elif arm.endswith("_graphs") or arm.endswith("_graphs_bf16"):
        model = _Graphed(model, "bf16" if arm.endswith("_bf16") else "float32")
    return model, torch.optim.Adam(model.parameters(), lr=3e-5, **adam_options(device))


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(model, opt, batches, device, train: bool, steps: int) -> float:
    """Seconds per batch over `steps` batches (cycling through `batches`)."""
    model.train(train)
    _sync(device)
    start = time.perf_counter()
    for i in range(steps):
        X = batches[i % len(batches)]
        if train:
            opt.zero_grad(set_to_none=True)
            loss = model(**X).float().pow(2).mean()
            loss.backward()
            opt.step()
        else:
            with torch.inference_mode():
                model(**X)
    _sync(device)
    return (time.perf_counter() - start) / steps


def _proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _peak_memory_worker(arm, vocab_size, device, batches, queue):
    model, opt = build(arm, vocab_size, device)
    batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
    time_steps(model, opt, batches[:1], device, True, 1)  # allocate optimiser state first
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        time_steps(model, opt, batches, device, True, len(batches))
        queue.put({"peak_gpu_bytes": int(torch.cuda.max_memory_allocated())})
        return
    # Linux: writing 5 to clear_refs resets the peak-RSS mark (VmHWM), so the peak below is
    # the training steps' own, on top of the already-built model and optimiser.
    Path("/proc/self/clear_refs").write_text("5")
    base = _proc_status_kib("VmRSS")
    time_steps(model, opt, batches, device, True, len(batches))
    queue.put({"peak_rss_bytes": _proc_status_kib("VmHWM") * 1024,
               "rss_growth_during_training_bytes": (_proc_status_kib("VmHWM") - base) * 1024})


def peak_memory(arm, vocab_size, device, batches) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_memory_worker, args=(arm, vocab_size, device, batches, queue))
    proc.start()
    import queue as queue_mod

    while True:  # poll, so a worker that dies does not leave us waiting
        try:
            result = queue.get(timeout=5)
            break
        except queue_mod.Empty:
            if not proc.is_alive():
                raise RuntimeError(f"peak-memory worker for {arm} exited with code {proc.exitcode}")
    proc.join()
    return result


def time_esol_seed(arm: str, device: str, seed: int, estimator_params: dict | None = None) -> dict:
    """Wall time of one ESOL seed under the chemberta3 protocol, run as `benchmarks.run` runs it
    (fit + scoring; the data preparation is not counted)."""
    from . import _common as C
    from .protocols import ENDPOINTS, PROTOCOLS
    from .run import run_one

    protocol = PROTOCOLS["chemberta3"]
    rec, _ = run_one(protocol=protocol, protocol_name=protocol.name, overrides={}, arm=arm,
                     data=C.load_endpoint(ENDPOINTS["esol"]), seed=seed, k=None, L=None, device=device,
                     vocab_file=C.resolve_vocab_file(), command="", max_epochs=None, estimator_params=estimator_params)
    wall = rec["wall_time_s"]
    return {"estimator_params": estimator_params or {}, "seed": seed, "epochs": rec["n_epochs"], "seconds": wall["fit"] + wall["score"], "fit_seconds": wall["fit"],
            "seconds_per_epoch": wall["fit"] / rec["n_epochs"], "best_epoch": rec["best_epoch"], "test_rmse": rec["test_metric"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median reported)")
    parser.add_argument("--steps", type=int, default=10, help="batches per model per round")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--batching", choices=["bucketed", "plain"], default="bucketed",
                        help="length-bucketed batches (the estimators' default) or plain shuffled ones (chemberta3)")
    parser.add_argument("--esol-seed", nargs="+", default=[], choices=["gmnet", "chemberta"],
                        help="also time one ESOL seed (chemberta3 protocol, 100 epochs) of these arms")
    parser.add_argument("--esol-seed-index", type=int, default=0, help="the seed of that run (default 0)")
    parser.add_argument("--esol-seed-only", action="store_true", help="only the ESOL seed timing, no step timings")
    parser.add_argument("--no-peak-memory", action="store_true", help="skip the per-arm peak-memory subprocesses")
    parser.add_argument("--esol-seed-bf16", action="store_true",
                        help="time each --esol-seed arm again with precision='bf16' (records '<arm>_bf16'): bf16's effect "
                             "on the seeded run's accuracy and time")
    parser.add_argument("--esol-seed-no-graphs", action="store_true",
                        help="the ESOL seed with cuda_graphs=False (default: the estimators' default, CUDA graphs on CUDA)")
    parser.add_argument("--arms", nargs="+", default=None,
                        help=f"arms to time besides {', '.join(ARMS)} (always timed: the ratios' terms; default: "
                             f"on CUDA {', '.join(CUDA_ARMS)}; on request: {', '.join(COMPILED_ARMS + ATTENTION_ARMS)})")
    add_matmul_precision_argument(parser)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.esol_seed_only and not args.esol_seed:
        parser.error("--esol-seed-only needs --esol-seed ARM [ARM ...]")

    if args.threads:
        torch.set_num_threads(args.threads)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    from gmnet_sklearn.datasets import fetch_moleculenet
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    # DeepChem's 591-token vocabulary (the paper's), else one fitted on the benchmark SMILES.
    vocab = os.environ.get("GMNET_TOKENIZER_VOCAB") or str(Path(__file__).resolve().parents[2] / "shared/data/tokenizer/deepchem_smiles_vocab.txt")
    tokenizer = SmilesTokenizer(vocab if Path(vocab).is_file() else None)
    smiles = [s.strip() for d in args.datasets for s in fetch_moleculenet(DATASETS[d]).smiles]
    tokenizer.fit(smiles, on_invalid="ignore")

    report = {"benchmark": "throughput", "device": device, "hardware": hardware(device), "gmnet_path": gmnet_path(device),
              "batching": args.batching, "batch_size": args.batch_size,
              "rounds": args.rounds, "steps_per_round": args.steps, "command": " ".join([sys.executable, "-m", "benchmarks.throughput", *sys.argv[1:]]),
              "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git": git_info(), "datasets": {}}
    apply_matmul_precision(args, report)  # before any model is built
    # the ratios' terms always run; --arms adds to them (default: every arm this device has)
    arms = tuple(dict.fromkeys([*ARMS, *(args.arms or (CUDA_ARMS if device.startswith("cuda") else ()))]))
    out = Path(args.out) if args.out else RESULTS / f"throughput_{device.split(':')[0]}.json"
    report["complete"] = False
    models = {} if args.esol_seed_only else {arm: build(arm, tokenizer.vocab_size, device) for arm in arms}
    report["arms"] = list(models)
    report["n_parameters"] = {arm: sum(p.numel() for p in m.parameters()) for arm, (m, _) in models.items()}
    failed = report["failed_arms"] = {}
    for name in [] if args.esol_seed_only else args.datasets:
        batches, shape = load_batches(DATASETS[name], tokenizer, args.batch_size, args.steps, batching=args.batching)
        batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
        entry = {"batches": shape}
        for mode, train in (("train", True), ("inference", False)):
            for arm, (m, o) in list(models.items()):  # warm-up (graph arms capture their shapes here)
                try:
                    time_steps(m, o, batches, device, train, len(batches))
                except Exception as exc:  # recorded, and the arm leaves the timings
                    failed[arm] = f"{name} {mode}: {type(exc).__name__}: {exc}"
                    print(f"arm {arm} failed: {failed[arm]}", flush=True)
                    if arm in ARMS:  # a term of every ratio: nothing left to measure against
                        write_report(report, out)
                        raise RuntimeError(f"arm {arm}, a term of the ratios, failed ({failed[arm]}); "
                                           f"the figures so far are in {out}") from exc
                    del models[arm]
            times = {arm: [] for arm in models}
            for _ in range(args.rounds):
                for arm, (m, o) in models.items():
                    times[arm].append(time_steps(m, o, batches, device, train, args.steps))
            med = {arm: statistics.median(t) for arm, t in times.items()}
            entry[mode] = {
                "seconds_per_batch": med,
                "molecules_per_second": {arm: args.batch_size / t for arm, t in med.items()},
                "ratio_gmnet_over_chemberta": med["chemberta"] / med["gmnet"],
                "ratio_gmnet_eager_over_chemberta": med["chemberta"] / med["gmnet_eager"],
                # every arm against the baseline as it ships (eager ChemBERTa), and the graphed
                # arms against the graphed baseline too, so neither side gets a path the other lacks
                "ratio_over_chemberta": {arm: med["chemberta"] / t for arm, t in med.items()},
                **({"ratio_over_chemberta_graphs": {arm: med["chemberta_graphs"] / t for arm, t in med.items()}}
                   if "chemberta_graphs" in med else {}),
                "per_round_ratio": [c / g for g, c in zip(times["gmnet"], times["chemberta"])],
            }
            print(f"{name:14s} {mode:9s} " + "   ".join(f"{arm} {args.batch_size / med[arm]:7.1f} mol/s" for arm in models)
                  + f"   ratio {entry[mode]['ratio_gmnet_over_chemberta']:.2f} (eager {entry[mode]['ratio_gmnet_eager_over_chemberta']:.2f})",
                  flush=True)
            report["datasets"][name] = entry  # after each mode: a run its time limit stops keeps the training figures
            write_report(report, out)
        entry["peak_memory"] = {}
        for arm in [] if args.no_peak_memory else [a for a in models if not a.endswith("_compiled")]:  # (compiling again per process)
            try:
                entry["peak_memory"][arm] = peak_memory(arm, tokenizer.vocab_size, device,
                                                        [{k: v.cpu() for k, v in b.items()} for b in batches[:3]])
            except Exception as exc:
                entry["peak_memory"][arm] = {"error": f"{type(exc).__name__}: {exc}"}
        report["datasets"][name] = entry
        write_report(report, out)
    if args.esol_seed:
        report["esol_seed"] = {}
        base = {"cuda_graphs": False} if args.esol_seed_no_graphs else {}
        runs = [(arm, arm, base) for arm in args.esol_seed]
        if args.esol_seed_bf16:
            runs += [(f"{arm}_bf16", arm, {**base, "precision": "bf16"}) for arm in args.esol_seed]
        for key, arm, params in runs:
            report["esol_seed"][key] = rec = time_esol_seed(arm, device, args.esol_seed_index, params or None)
            print(f"esol seed {rec['seed']} {key:15s} {rec['seconds']:7.1f} s ({rec['seconds_per_epoch']:.2f} s/epoch), "
                  f"test RMSE {rec['test_rmse']:.3f}")
            write_report(report, out)
    report["complete"] = True
    write_report(report, out)
    print(f"wrote {out}")
    return 0


def write_report(report: dict, out: Path) -> None:
    """Atomic write; called after every dataset too (``complete`` false until the end), so a run
    stopped by a time limit keeps what it measured."""
    from gmnet_sklearn.utils.files import write_atomic

    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(report, indent=2).encode())


if __name__ == "__main__":
    sys.exit(main())
