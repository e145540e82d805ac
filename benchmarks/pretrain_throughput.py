"""Pretraining throughput: Chem-GMNet vs the same-shape ChemBERTa baseline on MOSES SMILES, and
what the encoded-corpus cache (tokens + RDKit conjugation flags) costs per SMILES.

Both masked-LM models at the paper's shape (``PAPER_SHAPE``: d 384, 3 layers, 12 heads; Chem-GMNet
at k = 8, L = 3) train on the same batches with the same masks: the first ``--n-smiles`` SMILES of
the corpus, encoded through ``gmnet_sklearn.pretrain``'s cache, length-bucketed batches of
``--batch-size`` as ``pretrain`` makes them, masked as ``pretrain`` masks them (masks and padded
batches are made before the clock starts: they cost little next to a step). A timed step is the
model's work per batch in ``pretrain``: forward, the masked-LM loss on the masked positions,
backward, gradient clipping, AdamW. Steps are
timed interleaved (A, B, A, B, ...) after untimed warm-up steps, one per batch width, so a noisy machine slows
both alike; the SMILES/s are batch rows over the median step time, and the MOSES epoch time is
1,584,663 SMILES over that rate. Each figure comes twice: wall time, and this process's CPU time
(``*_cpu_*``), which on a shared machine is what the step costs a core of its own at ``--threads``.

The cache cost is measured on the same slice: tokenising alone, tokenising plus RDKit's parse and
the conjugation flags (what the cache stores), and the bytes on disk, each per SMILES and
extrapolated to the 1.58M training SMILES.

    python -m benchmarks.pretrain_throughput [--corpus DIR] [--n-smiles 3000] [--batch-size 256]
                                             [--steps 4] [--threads 1] [--note TEXT]

Writes benchmarks/results/pretrain_throughput_<device>[_library_shape]_<threads>threads.json; a
variant (another read-out, attention tiles, bf16, TF32, corpus, slice, step count or batch size)
needs ``--output``.
"""

from __future__ import annotations

#: What the records say of the warm-up (records without it warmed up on the first batch only, so a
#: timed step at a width first seen could include its compilation: the report marks them).
WARMUP = "one untimed step per distinct batch width timed"

import argparse
import contextlib
import functools
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from ._common import SHARED, add_matmul_precision_argument, apply_matmul_precision, git_info, gmnet_path, write_json_atomic
from .throughput import hardware

RESULTS = Path(__file__).resolve().parent / "results"
MOSES_TRAIN = 1_584_663


def cache_cost(smiles: list[str], tokenizer, cache_dir: Path) -> dict:
    from gmnet_sklearn.pretrain.cache import build_cache, cache_cost as summarise
    from gmnet_sklearn.tokenizer import tokenize_smiles

    t0, c0 = time.perf_counter(), time.process_time()
    for s in smiles:
        tokenizer._ids(tokenize_smiles(s))
    tokenize_s, tokenize_cpu = time.perf_counter() - t0, time.process_time() - c0
    corpus = cache_dir / "slice.smi"
    corpus.write_text("\n".join(smiles) + "\n")
    t0, c0 = time.perf_counter(), time.process_time()
    manifest = build_cache([corpus], tokenizer, cache_dir / "cache", shard_size=len(smiles), max_length=514)
    build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    cost = summarise(manifest)
    n = len(smiles)
    per = {"tokenize_us_per_smiles": 1e6 * tokenize_s / n,
           "encode_with_rdkit_flags_us_per_smiles": cost["encode_us_per_smiles"],
           "rdkit_flags_us_per_smiles": cost["encode_us_per_smiles"] - 1e6 * tokenize_s / n,
           "build_us_per_smiles": 1e6 * build_s / n, "bytes_per_smiles": cost["bytes_per_smiles"],
           "tokens_per_smiles": cost["n_tokens"] / max(cost["n_valid"], 1), "n_invalid": cost["n_invalid"],
           # CPU time of this process (the wall figures above include waiting for a shared core)
           "tokenize_cpu_us_per_smiles": 1e6 * tokenize_cpu / n, "build_cpu_us_per_smiles": 1e6 * build_cpu / n}
    per["moses_train_extrapolated"] = {"build_minutes": per["build_us_per_smiles"] * MOSES_TRAIN / 6e7,
                                       "rdkit_flags_minutes": per["rdkit_flags_us_per_smiles"] * MOSES_TRAIN / 6e7,
                                       "build_cpu_minutes": per["build_cpu_us_per_smiles"] * MOSES_TRAIN / 6e7,
                                       "disk_MB": per["bytes_per_smiles"] * MOSES_TRAIN / 1e6}
    return per


def attention_tile_rule(rule: str) -> tuple[str, dict]:
    """(arm suffix, `tiles` settings) of an --attention-tiles rule: a name of TILE_RULES, or JSON settings."""
    from gmnet_sklearn.gm.ops.dual_ska import triton as attention_triton

    if rule in attention_triton.TILE_RULES:
        return rule, dict(attention_triton.TILE_RULES[rule])
    try:
        settings = json.loads(rule)
    except json.JSONDecodeError:
        settings = None
    if not isinstance(settings, dict) or not settings:
        raise SystemExit(f"--attention-tiles: {rule!r} is neither a rule of {sorted(attention_triton.TILE_RULES)} "
                         "nor a JSON object of tile settings")
    try:
        with attention_triton.tiles(**settings):  # unknown names and bad block sizes refused here, not mid-run
            pass
    except ValueError as exc:
        raise SystemExit(f"--attention-tiles: {exc}") from None
    return "_".join(f"{k}={v}" for k, v in settings.items()), settings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=str(SHARED / "data" / "pretrain" / "moses"))
    p.add_argument("--vocab-file", default=os.environ.get("GMNET_TOKENIZER_VOCAB",
                                                           str(SHARED / "data" / "tokenizer" / "deepchem_smiles_vocab.txt")))
    p.add_argument("--n-smiles", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=4, help="timed steps per model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--shape", choices=("paper", "library"), default="paper",
                   help="paper: the paper's ChemBERTa-10M shape (pretrain()'s default); library: the estimators' "
                        "default shape (d 256, 8 heads), what pretrained=\"moses\" ships")
    p.add_argument("--gmnet-readout", default=None, choices=("reference", "parallel", "cpu", "triton"),
                   help="also time Chem-GMNet with its read-outs on this form (model 'gmnet_<form>_readout', "
                        "through gm.ops.prefer), interleaved with the others")
    p.add_argument("--readout-backward", nargs="+", default=(), metavar="FORM",
                   help="also time Chem-GMNet with its Triton read-outs' backward in these forms (models "
                        "'gmnet_backward_<form>'; gm/ops/sphere_readout/triton.py BACKWARD_FORMS: 'reuse-split' ships, "
                        "'gather-atomic' is the first kernel), interleaved with the others")
    p.add_argument("--readout-form", nargs="+", default=(), metavar="FORM",
                   help="also time Chem-GMNet with its Triton read-outs in these forms (models 'gmnet_readout_<form>'; "
                        "gm/ops/sphere_readout/triton.py FORMS: 'fused' ships, 'gemm' writes the monomials and "
                        "leaves the matmuls to cuBLAS), interleaved with the others")
    p.add_argument("--attention-tiles", nargs="+", default=(), metavar="RULE",
                   help="also time Chem-GMNet with its Triton attention on these tile rules (models "
                        "'gmnet_attention_<rule>'; a name of TILE_RULES of gm/ops/dual_ska/triton.py, e.g. "
                        "'one_key_block', or JSON settings of its `tiles`, e.g. '{\"NUM_WARPS\": 4}'), "
                        "interleaved with the others")
    p.add_argument("--bf16", action="store_true",
                   help="also time both models under bf16 autocast (models 'gmnet_bf16', 'chemberta_bf16'; "
                        "pretrain(precision='bf16')), interleaved with the others")
    add_matmul_precision_argument(p)
    p.add_argument("--note", default="", help="recorded as is, e.g. what else ran on the machine")
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)
    variant = [flag for flag, on in (("--gmnet-readout", args.gmnet_readout), ("--readout-backward", args.readout_backward),
                                     ("--readout-form", args.readout_form), ("--bf16", args.bf16),
                                     ("--attention-tiles", args.attention_tiles),
                                     ("--matmul-precision", args.matmul_precision != "highest"),
                                     ("--n-smiles", args.n_smiles != 3000), ("--batch-size", args.batch_size != 256),
                                     ("--steps", args.steps != 4),
                                     ("--corpus", Path(args.corpus).resolve() != (SHARED / "data" / "pretrain" / "moses").resolve()))
               if on]
    if variant and args.output is None:  # the default file is the baseline's record, not a variant's
        p.error(f"{', '.join(variant)} make a variant of the measurement: name its file with --output")
    if args.attention_tiles:  # refused before the corpus is encoded
        if not args.device.startswith("cuda"):
            raise SystemExit("--attention-tiles: the Triton attention runs on CUDA only")
        from gmnet_sklearn.gm.ops.dual_ska import triton as attention_triton

        for rule in args.attention_tiles:
            attention_tile_rule(rule)
    torch.set_num_threads(args.threads)
    precision = {}
    apply_matmul_precision(args, precision)  # before any model is built; recorded below

    from gmnet_sklearn.estimators.presets import PAPER_SHAPE
    from gmnet_sklearn.pretrain.batches import BatchPlan, collate
    from gmnet_sklearn.pretrain.cache import EncodedCorpus
    from gmnet_sklearn.pretrain.corpus import iter_smiles
    from gmnet_sklearn.pretrain.masking import Masker, step_generator
    from gmnet_sklearn.pretrain.models import DEFAULT_PARAMS, LIBRARY_SHAPE, build_mlm
    from gmnet_sklearn.pretrain.trainer import _optimizer, masked_lm_loss
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    tokenizer = SmilesTokenizer(args.vocab_file).fit([])
    smiles = list(itertools.islice(iter_smiles(args.corpus), args.n_smiles))
    with tempfile.TemporaryDirectory() as tmp:
        cost = cache_cost(smiles, tokenizer, Path(tmp))
        corpus = EncodedCorpus(Path(tmp) / "cache")
        ids, flags, offsets = corpus.shard(0)
        plan = BatchPlan(corpus.shard_sizes, args.batch_size, seed=0)
        rows = plan.shard_batches_rows(0, 0, np.diff(offsets))
        batches = [collate(ids, flags, offsets, r, tokenizer.pad_id) for r in rows if len(r) == args.batch_size]
    if len(batches) < args.steps + 1:
        raise SystemExit(f"--n-smiles {args.n_smiles} gives {len(batches)} full batches; need {args.steps + 1}")
    masker = Masker(tokenizer)
    masked = [masker(b[0], step_generator(0, i), b[1]) + (b[2],) for i, b in enumerate(batches)]
    shape = {"gmnet": DEFAULT_PARAMS["gmnet"], "chemberta": DEFAULT_PARAMS["chemberta"]}
    if args.shape == "library":
        shape = {name: {**params, **LIBRARY_SHAPE[name]} for name, params in shape.items()}
    from gmnet_sklearn.gm.ops import prefer

    from gmnet_sklearn.gm.cuda_graphs import autocast_context

    if args.readout_backward or args.readout_form:
        from gmnet_sklearn.gm.ops.sphere_readout import triton as readout_triton

        for flag, given, known in (("--readout-backward", args.readout_backward, readout_triton.BACKWARD_FORMS),
                                   ("--readout-form", args.readout_form, readout_triton.FORMS)):
            unknown = sorted(set(given) - set(known))
            if unknown:
                raise SystemExit(f"{flag}: unknown form(s) {unknown}; known: {sorted(known)}")

    # arm -> (read-out forms through gm.ops.prefer, precision[, a context the step runs in: the
    # Triton read-out's backward form or form, the attention's tiles])
    models, arms = {}, {"gmnet": ({}, "float32"), "chemberta": ({}, "float32")}
    if args.gmnet_readout:
        arms[f"gmnet_{args.gmnet_readout}_readout"] = ({"sphere_readout": args.gmnet_readout}, "float32")
    for form in args.readout_backward:
        arms[f"gmnet_backward_{form}"] = ({"sphere_readout": "triton"}, "float32",
                                          functools.partial(readout_triton.backward_form, form))
    for form in args.readout_form:
        arms[f"gmnet_readout_{form}"] = ({"sphere_readout": "triton"}, "float32",
                                         functools.partial(readout_triton.form, form))
    for rule in args.attention_tiles:
        name, settings = attention_tile_rule(rule)
        arms[f"gmnet_attention_{name}"] = ({}, "float32", functools.partial(attention_triton.tiles, **settings))
    if args.bf16:
        arms |= {"gmnet_bf16": ({}, "bf16"), "chemberta_bf16": ({}, "bf16")}
    for name in arms:
        torch.manual_seed(0)
        family = "chemberta" if name.startswith("chemberta") else "gmnet"
        mlm = build_mlm(family, tokenizer.vocab_size, tokenizer.pad_id, shape[family]).to(args.device).train()
        models[name] = (mlm, _optimizer(mlm, 5e-4, 0.01, args.device))

    def step(name, i):
        mlm, opt = models[name]
        inputs, labels, fl, mask = (t.to(args.device) for t in masked[i])
        t0, c0 = time.perf_counter(), time.process_time()
        ops, precision, *context = arms[name]
        with prefer(**ops), (context[0]() if context else contextlib.nullcontext()):
            with autocast_context(args.device, precision):  # as pretrain(precision=...): the forward only
                loss, _, _ = masked_lm_loss(mlm, inputs, fl, mask, labels)
            loss.backward()  # inside prefer: an autograd Function's backward was chosen in the forward anyway
        torch.nn.utils.clip_grad_norm_(mlm.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - t0, time.process_time() - c0

    # warm-up (kernel build/load, allocator, and on a GPU the compilation and autotuning each new
    # batch width costs): one untimed step per distinct width among the batches timed after it
    widths = {masked[i][0].shape[1]: i for i in range(args.steps, -1, -1)}
    for name in models:
        for i in sorted(widths.values()):
            step(name, i)
    times = {name: [] for name in models}
    cpu_times = {name: [] for name in models}
    for i in range(1, args.steps + 1):
        for name in models:
            wall, cpu = step(name, i)
            times[name].append(wall)
            cpu_times[name].append(cpu)
    load = os.getloadavg()
    result = {"benchmark": "pretrain_throughput", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "git": git_info(), "hardware": hardware(args.device), "threads": args.threads,
              "load_average_at_end": load, "note": args.note, "corpus": str(args.corpus), "n_smiles": len(smiles),
              "command": " ".join([sys.executable, "-m", "benchmarks.pretrain_throughput", *sys.argv[1:]]),
              "batch_size": args.batch_size, "timed_steps": args.steps, "warmup": WARMUP,
              "mean_tokens_per_smiles": float(np.mean([b[2].sum(1).float().mean().item() for b in batches])),
              "mean_padded_width": float(np.mean([b[0].shape[1] for b in batches])),
              "shape_preset": args.shape, "shape": {"paper_shape": dict(PAPER_SHAPE), **shape}, "gmnet_path": gmnet_path(args.device),
              "cache": cost, "models": {}}
    result.update(precision)
    for name, (mlm, _) in models.items():
        med, cpu = statistics.median(times[name]), statistics.median(cpu_times[name])
        result["models"][name] = {
            "parameters": sum(p.numel() for p in mlm.parameters()), "step_seconds": times[name],
            "step_cpu_seconds": cpu_times[name], "median_step_seconds": med, "median_step_cpu_seconds": cpu,
            "smiles_per_second": args.batch_size / med, "moses_epoch_minutes": MOSES_TRAIN / (args.batch_size / med) / 60,
            # CPU time of this process: what the step costs on cores it has to itself (at --threads)
            "smiles_per_cpu_second": args.batch_size / cpu, "moses_epoch_cpu_minutes": MOSES_TRAIN / (args.batch_size / cpu) / 60}
    result["gmnet_over_chemberta_speed"] = (result["models"]["gmnet"]["smiles_per_second"]
                                            / result["models"]["chemberta"]["smiles_per_second"])
    result["gmnet_over_chemberta_speed_cpu_time"] = (result["models"]["gmnet"]["smiles_per_cpu_second"]
                                                     / result["models"]["chemberta"]["smiles_per_cpu_second"])
    suffix = "" if args.shape == "paper" else f"_{args.shape}_shape"
    out = (Path(args.output) if args.output
           else RESULTS / f"pretrain_throughput_{args.device.split(':')[0]}{suffix}_{args.threads}threads.json")
    write_json_atomic(out, result)
    print(json.dumps({k: result[k] for k in ("cache", "gmnet_over_chemberta_speed", "gmnet_over_chemberta_speed_cpu_time")}
                     | {n: {k: v for k, v in m.items() if k != "step_seconds"} for n, m in result["models"].items()}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
