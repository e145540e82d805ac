"""``pretrain``: masked-LM (or descriptor-regression) pretraining of Chem-GMNet or the ChemBERTa
baseline on a SMILES corpus.

    from gmnet_sklearn.pretrain import pretrain
    pretrain("../shared/data/pretrain/moses", "runs/moses-gmnet", model="gmnet", epochs=1)
    GMNetRegressor.from_pretrained("runs/moses-gmnet").fit(X, y)

The run folder ``output_dir`` holds ``cache/`` (the encoded corpus, ``cache.py``),
``checkpoint.pt`` (``checkpoint.py``) and, when the run is finished, the pretrained model
(``model.safetensors``, ``config.json``, ``vocab.txt``; ``models.py``). Calling ``pretrain``
again with the same arguments goes on from the checkpoint and ends exactly where an
uninterrupted run would (on CPU at a fixed thread count, bit for bit); a finished run returns at
once. Other arguments, or corpus files edited since (their contents are compared), on an existing
run raise ``ValueError``.

Training: AdamW (no weight decay on biases and LayerNorm weights), linear warm-up then cosine or
linear decay (torch's ``LambdaLR``, stepped per batch), gradient clipping, length-bucketed
batches of ``batch_size`` SMILES (``batches.py``), RoBERTa masking (``masking.py``), and every
``eval_every`` steps the masked-LM loss and masked-token accuracy on the usable SMILES among the
first ``eval_size`` records of the corpus's test file, with the same masks each time.

``objective="mtr"`` trains on ChemBERTa-2's other task instead: the RDKit 2D descriptors of each
molecule, scaled (``targets.py``), regressed from its unmasked SMILES with a mean squared error
over the values RDKit gives; the held-out loss is the same error on the test file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from ..estimators.schedule import lr_factor
from ..exceptions import UnknownTokenWarning
from ..gm.cuda_graphs import autocast_context
from ..tokenizer import SmilesTokenizer
from .batches import BatchPlan, collate
from .cache import EncodedCorpus, build_cache, cache_cost, vocab_digest
from .checkpoint import load_checkpoint, rng_state, run_lock, save_checkpoint, set_rng_state
from .corpus import (HELD_OUT_PREFIXES, check_headers, content_digest, corpus_files, describe, held_out_file,
                     unused_files)
from .masking import Masker, step_generator
from .targets import DescriptorTargets, build_targets
from .models import (OBJECTIVES, build_mlm, build_model, check_family, load_stored_state, model_params, read_config,
                     save_pretrained, stored_state)

SCHEDULES = ("cosine", "linear", "constant")


def _vocab_path(vocab_file) -> str:
    from ..tokenizer import DEEPCHEM_VOCAB

    path = vocab_file or os.environ.get("GMNET_TOKENIZER_VOCAB") or DEEPCHEM_VOCAB  # (DeepChem's, shipped)
    if not Path(path).is_file():
        raise FileNotFoundError(f"vocab_file= names no file: {path}")
    return str(path)


def _check_positive_int(name, value, allow_none=False):
    """``value`` as a Python int (numpy's too, as a grid from ``np.arange`` gives: the run's
    definition is JSON), after checking it is positive."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {value!r}")
    return int(value)


def _hardware(device: str) -> dict:
    info = {"platform": platform.platform(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "device": device}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))  # "cuda:1": that one
    return info


def masked_lm_loss(mlm, inputs, flags, mask, labels, reduction: str = "mean"):
    """(loss, n_correct, n_masked) of the masked positions of a batch."""
    h, target = mlm.masked_states(inputs, flags, mask, labels)
    logits = mlm.lm_head(h).float()
    n = target.numel()
    if n == 0:
        return logits.sum() * 0.0, 0, 0
    loss = F.cross_entropy(logits, target, reduction=reduction)
    correct = int((logits.argmax(-1) == target).sum())
    return loss, correct, n


def descriptor_loss(model, inputs, flags, mask, targets, reduction: str = "mean"):
    """(loss, n) of a batch's scaled descriptor ``targets`` (B, n_targets; NaN: missing): the
    squared error over the n values present."""
    pred = model(inputs, flags, mask).float()
    present = ~torch.isnan(targets)
    n = int(present.sum())
    if n == 0:
        return pred.sum() * 0.0, 0
    err = (pred - torch.nan_to_num(targets)).square() * present
    loss = err.sum() if reduction == "sum" else err.sum() / n
    return loss, n


def _optimizer(mlm, lr, weight_decay, device):
    from ..estimators._base import adam_options

    decay = [p for p in mlm.parameters() if p.dim() >= 2]
    no_decay = [p for p in mlm.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6, **adam_options(device))


class _Evaluator:
    """Masked-LM loss and accuracy on the held-out cache, same masks at every evaluation; with
    ``targets``, the descriptor regression's loss instead."""

    def __init__(self, corpus: EncodedCorpus, masker: Masker, pad_id: int, batch_size: int, seed: int, device,
                 targets=None):
        self.corpus, self.masker, self.pad_id, self.batch_size, self.seed, self.device, self.targets = (
            corpus, masker, pad_id, batch_size, seed, device, targets)

    @torch.no_grad()
    def __call__(self, mlm) -> dict:
        was_training = mlm.training
        mlm.eval()
        total, correct, n, batch_no, median_total = 0.0, 0, 0, 0, 0.0
        for shard in range(len(self.corpus.shard_sizes)):
            ids, flags, offsets = self.corpus.shard(shard)
            order = np.argsort(np.diff(offsets), kind="stable")
            for i in range(0, len(order), self.batch_size):
                rows = order[i:i + self.batch_size]
                b_ids, b_flags, b_mask = collate(ids, flags, offsets, rows, self.pad_id)
                if self.targets is not None:
                    y = torch.as_tensor(self.targets.batch(shard, rows))
                    loss, m = descriptor_loss(mlm, b_ids.to(self.device), b_flags.to(self.device), b_mask.to(self.device),
                                              y.to(self.device), "sum")
                    total, n = total + float(loss), n + m
                    median_total += float(torch.nan_to_num(y).square().sum())
                    continue
                inputs, labels, b_flags = self.masker(b_ids, step_generator(self.seed, batch_no, stream=1), b_flags)
                loss, c, m = masked_lm_loss(mlm, inputs.to(self.device), b_flags.to(self.device), b_mask.to(self.device),
                                            labels.to(self.device), reduction="sum")
                total, correct, n, batch_no = total + float(loss), correct + c, n + m, batch_no + 1
        mlm.train(was_training)
        if self.targets is not None:
            # the error of predicting every descriptor's training median (a scaled 0): the reference
            return {"eval_loss": total / n if n else float("nan"), "eval_median_loss": median_total / n if n else float("nan"),
                    "eval_values": n}
        if n == 0:  # no token was masked (a tiny held-out set): nothing measured, not a perfect score
            return {"eval_loss": float("nan"), "eval_accuracy": float("nan"), "eval_masked_tokens": 0}
        return {"eval_loss": total / n, "eval_accuracy": correct / n, "eval_masked_tokens": n}


def pretrain(corpus, output_dir, model: str = "gmnet", *, test_corpus="auto", smiles_column: str | None = None,
             vocab_file=None, max_length: int | None = None, epochs: int = 1, max_steps: int | None = None,
             batch_size: int = 256, lr: float = 5e-4, weight_decay: float = 0.01, warmup: float = 0.05,
             lr_schedule: str = "linear", max_grad_norm: float = 1.0, mask_prob: float = 0.15,
             eval_every: int = 1000, eval_size: int | None = 10_000, checkpoint_every: int = 200,
             checkpoint_minutes: float = 10.0, time_limit: float | None = None, shard_size: int = 100_000,
             bucket_by_length: bool = True, cache_dir=None, seed: int = 0, device: str = "auto",
             precision: str = "float32", n_jobs: int = 1, progress: bool = True, callback: Callable[[dict], None] | None = None, prepare_only: bool = False,
             objective: str = "mlm", max_smiles: int | None = None, **model_kwargs) -> dict:
    """Pretrain a masked-LM ``model`` ("gmnet" or "chemberta") on the SMILES ``corpus`` (a file or a
    folder; see ``corpus.py``) into ``output_dir``; returns the run's summary (also in
    ``output_dir/config.json`` once finished: ``finished`` is False when ``time_limit`` stopped it).

    Architecture parameters are keyword arguments named as in the estimators (``k``, ``L``,
    ``d_model``, ``n_layers``, ``n_heads``, ``dropout``, ...; defaults: the paper's ChemBERTa-10M
    shape, ``models.DEFAULT_PARAMS``). ``test_corpus``: the held-out file ("auto": ``test.*`` in
    the corpus's folder; None: no evaluation; a folder: all its corpus files). ``smiles_column``: the
    column CSV files hold their SMILES in (default: the one named "smiles", any case). ``max_length``: longest token sequence kept,
    [CLS]/[SEP] included (default 514, what both families take). The budget is ``epochs`` passes
    over the corpus or ``max_steps`` batches. ``lr_schedule``: "linear", "cosine" or "constant"
    after ``warmup`` (a fraction of the steps). A checkpoint is written every
    ``checkpoint_every`` steps and at least every ``checkpoint_minutes``; ``time_limit`` (seconds of
    training, counted from after the corpus is encoded and the first evaluation) ends the call
    early with a checkpoint (call again to go on). ``callback(info)`` is called
    after every step with the step's numbers. ``prepare_only`` encodes the corpus (the cache)
    and returns its cost without training. ``precision`` "bf16": bfloat16 autocast of the
    forward on CUDA, as the estimators' parameter (ignored on CPU). ``n_jobs``: processes that
    encode the corpus into the cache (-1: one per core; the cache is the same whatever it is).
    ``objective``: "mlm" (masked-LM) or "mtr" (regression of RDKit's 2D descriptors, computed
    once per SMILES beside the cache with ``n_jobs`` processes; see the module docstring).
    ``max_smiles``: train on the first ``max_smiles`` records of the corpus only (None: all).

    The other keywords: ``vocab_file``, the token vocabulary (default ``$GMNET_TOKENIZER_VOCAB``,
    else DeepChem's 591 tokens, shipped with the package); ``batch_size`` SMILES per step; AdamW's ``lr`` and ``weight_decay``;
    ``max_grad_norm``, the gradient-norm clip; ``mask_prob``, the masked-LM's share of masked
    tokens; ``eval_every`` steps between held-out evaluations, on the first ``eval_size`` records
    of the held-out file (None: all of them); ``shard_size`` SMILES per cache shard;
    ``bucket_by_length``, batches of SMILES of similar length (less padding; False: plain shuffled
    batches); ``cache_dir``, where the encoded corpus is kept (default ``output_dir/cache``);
    ``seed`` for the initial weights, masks and batch order; ``device`` ("auto": CUDA when
    available); ``progress``, tqdm bars.
    """
    check_family(model)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective != "mlm" and "lm_head" in model_kwargs:
        raise ValueError(f"lm_head is the masked-LM head; objective={objective!r} has none")
    params = model_params(model, model_kwargs)
    if objective != "mlm":
        params.pop("lm_head", None)
    epochs, batch_size, eval_every, checkpoint_every, shard_size = (
        _check_positive_int(name, value) for name, value in (
            ("epochs", epochs), ("batch_size", batch_size), ("eval_every", eval_every),
            ("checkpoint_every", checkpoint_every), ("shard_size", shard_size)))
    max_steps = _check_positive_int("max_steps", max_steps, allow_none=True)
    eval_size = _check_positive_int("eval_size", eval_size, allow_none=True)
    max_smiles = _check_positive_int("max_smiles", max_smiles, allow_none=True)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        # numpy's generators (masks, batch order) take only non-negative seeds: fail before encoding
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    # the float settings as floats: the run's fingerprint compares them as JSON (0 is not 0.0: a run
    # started with warmup=0 and resumed by the CLI's --warmup 0 was refused), and numpy floats are no JSON
    lr, weight_decay, warmup, max_grad_norm, mask_prob = (
        _check_real(name, value) for name, value in (("lr", lr), ("weight_decay", weight_decay), ("warmup", warmup),
                                                    ("max_grad_norm", max_grad_norm), ("mask_prob", mask_prob)))
    if time_limit is not None and not _check_real("time_limit", time_limit) >= 0:
        raise ValueError(f"time_limit must be >= 0 seconds or None, got {time_limit!r}")
    if not _check_real("checkpoint_minutes", checkpoint_minutes) > 0:
        raise ValueError(f"checkpoint_minutes must be > 0, got {checkpoint_minutes!r}")
    if lr_schedule not in SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {SCHEDULES}, got {lr_schedule!r}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup (a fraction of the steps) must be in [0, 1), got {warmup!r}")
    autocast_context("cpu", precision)  # validates it
    if not (lr > 0 and weight_decay >= 0 and max_grad_norm > 0):
        raise ValueError("lr and max_grad_norm must be > 0, weight_decay >= 0")
    tokenizer = SmilesTokenizer(_vocab_path(vocab_file)).fit([])
    # RoBERTa's positions start after [PAD]'s id (as the ChemBERTa estimators' limit)
    limit = 514 if model == "gmnet" else params["max_position_embeddings"] - tokenizer.pad_id - 1
    max_length = limit if max_length is None else int(max_length)
    if not 3 <= max_length <= limit:
        raise ValueError(f"max_length must be in [3, {limit}] for {model}, got {max_length}")
    from ..estimators._base import resolve_device

    device = resolve_device(device)  # a bad name, or CUDA where there is none, fails here, not after the corpus is encoded
    # Everything that can reject the arguments runs before the corpus is encoded (hours on MOSES):
    # the masker, the test files, the model (built again, seeded, below).
    masker = Masker(tokenizer, mask_prob)
    files = corpus_files(corpus)
    test_path = held_out_file(corpus) if test_corpus == "auto" else (None if test_corpus is None else Path(test_corpus))
    try:
        test_files = [] if test_path is None else corpus_files(test_path, hold_out=False)  # a folder: all of it
    except FileNotFoundError as exc:  # (it said "SMILES corpus ... does not exist", as of the training corpus)
        raise FileNotFoundError(f"test_corpus {test_path} does not exist") from exc
    evaluated = {Path(f).resolve() for f in test_files}
    if overlap := [f for f in files if Path(f).resolve() in evaluated]:  # held-out figures on trained-on SMILES
        warnings.warn(f"{corpus}: {[Path(f).name for f in overlap]} is test_corpus, so it is evaluated and not "
                      "trained on", UserWarning, stacklevel=2)
        files = [f for f in files if Path(f).resolve() not in evaluated]
        if not files:
            raise ValueError(f"{corpus}: every file of the corpus is test_corpus: nothing is left to train on")
    if unused := unused_files(corpus, files + test_files):  # held out by name, but not the evaluated set either
        warnings.warn(f"{corpus}: neither trained on (names starting with {HELD_OUT_PREFIXES} are held out) nor "
                      f"evaluated (test_corpus={test_corpus!r}): {unused}", UserWarning, stacklevel=2)
    check_headers(files, smiles_column)
    check_headers(test_files, smiles_column, hint=(
        f" (it is the held-out set because it is named {Path(test_path).name} beside the corpus: pass test_corpus=None "
        "or another file)") if test_corpus == "auto" and test_path is not None else "")
    build_mlm(model, tokenizer.vocab_size, tokenizer.pad_id, params)
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(f"output_dir {output_dir} is a file, not a folder")
    if not prepare_only:  # (again under the lock below; here so a refused folder gets no lock file)
        _refuse_a_finished_model(output_dir)
    # the files' contents, beside the run's definition (whose names and sizes miss a same-size edit);
    # not in it, so runs checkpointed before keep their fingerprint. Read before the folder is made:
    # an unreadable file is refused without leaving one
    content = {"corpus": content_digest(files), "test": content_digest(test_files)}
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # (a file among its parents: a NotADirectoryError traceback, a review)
        raise ValueError(f"output_dir {output_dir} cannot be made a folder ({type(exc).__name__}: {exc})") from exc
    with run_lock(output_dir):  # one process trains a run folder at a time: the checkpoint is one file
        # the run's own cache, and no checkpoint yet: an unfinished or empty cache of other data,
        # what an attempt that failed left (a corpus fixed since), is built again rather than refused
        own_cache = cache_dir is None
        cache_dir = Path(cache_dir) if cache_dir is not None else output_dir / "cache"
        # the run's definition but its length (which needs the encoded corpus): an existing run with
        # other settings is refused before the corpus is encoded (hours on MOSES)
        definition = {"model": model, "params": params, "corpus": describe(files), "test": describe(test_files),
                      "vocab": vocab_digest(tokenizer), "max_length": max_length,
                      "batch_size": batch_size, "lr": lr, "weight_decay": weight_decay, "warmup": warmup,
                      "lr_schedule": lr_schedule, "max_grad_norm": max_grad_norm, "mask_prob": mask_prob,
                      "eval_every": eval_every, "eval_size": eval_size, "shard_size": shard_size,
                      "bucket_by_length": bool(bucket_by_length), "seed": seed}
        if precision != "float32":  # only then: runs (and checkpoints) from before the option keep their fingerprint
            definition["precision"] = precision
        if smiles_column is not None:  # the same
            definition["smiles_column"] = smiles_column
        if objective != "mlm":  # the same
            definition["objective"] = objective
        if max_smiles is not None:  # the same
            definition["max_smiles"] = max_smiles
        ckpt_path = output_dir / "checkpoint.pt"
        state = None if prepare_only else load_checkpoint(ckpt_path)  # (preparing a cache trains nothing)
        if state is not None:
            _refuse_other_settings(output_dir, state, definition, but=("total_steps",))
            changed = [k for k, v in state.get("content", content).items() if content.get(k) != v]
            if changed:
                raise ValueError(f"{output_dir} holds a run on other data: the {' and '.join(changed)} files have the "
                                 "names and sizes it started from but other contents (edited since); use another "
                                 "output_dir, or the files it started from to resume it")
        elif not prepare_only:
            _refuse_a_finished_model(output_dir)
        replace_other = own_cache and state is None

        train_manifest = build_cache(files, tokenizer, cache_dir / "train", shard_size, max_length, limit=max_smiles,
                                     progress=progress, label="encoding corpus", n_jobs=n_jobs, smiles_column=smiles_column,
                                     limit_name="max_smiles", content=content["corpus"],
                                     replace_other=replace_other)
        train = EncodedCorpus(cache_dir / "train")
        cost = cache_cost(train_manifest)
        if cost["n_unknown"]:
            n_tokens = cost["n_tokens"] - 2 * cost["n_valid"]  # without [CLS] and [SEP], as fit's warning counts
            warnings.warn(f"{cost['n_unknown']} of {n_tokens} tokens of the corpus are not in the vocabulary "
                          f"{tokenizer.vocab_file} and are read as [UNK]", UnknownTokenWarning, stacklevel=2)
        if sum(train.shard_sizes) == 0:
            examples = [e["smiles"] for e in train_manifest["invalid_examples"][:3]]
            raise ValueError(f"{[Path(f).name for f in files]}: no valid SMILES to train on ({cost['n_read']} records "
                             f"read, {cost['n_invalid']} invalid, {cost['n_too_long']} too long"
                             + (f"; e.g. {examples})" if examples else ")"))
        train_targets = test_targets = None
        if objective == "mtr":
            build_targets(train, tokenizer, cache_dir / "train_targets", n_jobs=n_jobs, progress=progress,
                          replace_other=replace_other)
            train_targets = DescriptorTargets(cache_dir / "train_targets")
            if train_targets.n_targets == 0:  # a head of width 0: a loss of 0, an untrained encoder
                raise ValueError("objective='mtr': no RDKit descriptor varies across the rows its scaling was fitted "
                                 "on (the first shard's): nothing to regress; use a larger shard_size or corpus")
        evaluator = None
        if test_files:
            build_cache(test_files, tokenizer, cache_dir / "test", shard_size, max_length, limit=eval_size,
                        progress=progress, label="encoding test set", n_jobs=n_jobs, smiles_column=smiles_column,
                        limit_name="eval_size", content=content["test"], replace_other=replace_other)
            held_out = EncodedCorpus(cache_dir / "test")
            if sum(held_out.shard_sizes) == 0:
                warnings.warn(f"the held-out set {test_path} has no SMILES the tokenizer takes"
                              + (f" in its first {eval_size} records" if eval_size else "")
                              + ": no held-out evaluation", stacklevel=2)
            else:
                if train_targets is not None:
                    build_targets(held_out, tokenizer, cache_dir / "test_targets", n_jobs=n_jobs, progress=progress,
                                  label="descriptor targets, test set", replace_other=replace_other)
                    test_targets = DescriptorTargets(cache_dir / "test_targets", scaling=train_targets.manifest["scaling"])
                evaluator = _Evaluator(held_out, masker, tokenizer.pad_id, batch_size, seed, device, test_targets)

        if prepare_only:
            return {"prepared": True, "cache": cache_cost(train_manifest), "cache_dir": str(cache_dir)}
        plan = BatchPlan(train.shard_sizes, batch_size, seed, bucket=bucket_by_length)
        total_steps = max_steps if max_steps is not None else epochs * plan.steps_per_epoch
        warmup_steps = int(round(warmup * total_steps))
        definition["total_steps"] = total_steps
        fingerprint = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:20]

        torch.manual_seed(seed)
        mlm = build_model(model, tokenizer.vocab_size, tokenizer.pad_id, params, objective,
                          0 if train_targets is None else train_targets.n_targets).to(device)
        optimizer = _optimizer(mlm, lr, weight_decay, device)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: lr_factor(s, total_steps, warmup_steps, lr_schedule))
        counters = {"smiles_seen": 0, "tokens_seen": 0, "masked_seen": 0, "seconds": 0.0, "loss_sum": 0.0, "loss_n": 0}
        history: list[dict] = []
        start = 0
        if state is not None:
            if state["fingerprint"] != fingerprint:  # (the other settings were compared before the cache)
                _refuse_other_settings(output_dir, state, definition)
            load_stored_state(mlm, state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
            counters = dict(state["counters"])
            history = json.loads(state["history"])
            start = int(state["step"])

        def checkpoint(step):
            save_checkpoint(ckpt_path, {"fingerprint": fingerprint, "definition": json.dumps(definition), "content": content,
                                        "step": step,
                                        "position": plan.position(step) if step < total_steps else {"done": True},
                                        "model": stored_state(mlm), "optimizer": optimizer.state_dict(),
                                        "scheduler": scheduler.state_dict(), "rng": rng_state(), "counters": counters,
                                        "history": json.dumps(history)})

        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total_steps, initial=start, unit="step", desc=f"pretrain {model}")
        if start == 0 and evaluator is not None and not history:  # the untrained model's held-out numbers
            history.append({"step": 0, "epoch": 0.0, "smiles_seen": 0, "tokens_seen": 0, "seconds": 0.0, **evaluator(mlm)})
        if model == "gmnet" and torch.device(device).type == "cpu":
            from ..gm.cpu import cpu_kernels_available

            cpu_kernels_available()  # their one-time build (a minute) out of the run's seconds and SMILES/s
        t_start = t_ckpt = time.perf_counter()
        seconds_before = counters["seconds"]
        finished = True
        mlm.train()
        step = start
        try:
            while step < total_steps:
                if time_limit is not None and time.perf_counter() - t_start > time_limit:
                    finished = False
                    break
                pos = plan.position(step)
                ids, flags, offsets = train.shard(pos["shard"])
                rows = plan.shard_batches_rows(pos["epoch"], pos["shard"], np.diff(offsets))[pos["batch"]]
                b_ids, b_flags, b_mask = collate(ids, flags, offsets, rows, tokenizer.pad_id)
                if train_targets is None:
                    inputs, labels, b_flags = masker(b_ids, step_generator(seed, step), b_flags)
                    with autocast_context(device, precision):
                        loss, correct, n_masked = masked_lm_loss(mlm, inputs.to(device), b_flags.to(device),
                                                                 b_mask.to(device), labels.to(device))
                else:  # n_masked: the target values present (what the loss averages over)
                    with autocast_context(device, precision):
                        loss, n_masked = descriptor_loss(mlm, b_ids.to(device), b_flags.to(device), b_mask.to(device),
                                                         torch.as_tensor(train_targets.batch(pos["shard"], rows)).to(device))
                    correct = None
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(mlm.parameters(), max_grad_norm))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                loss_value = loss.item()
                counters["smiles_seen"] += len(rows)
                counters["tokens_seen"] += int(b_mask.sum())
                counters["masked_seen"] += n_masked
                counters["loss_sum"] += loss_value * n_masked
                counters["loss_n"] += n_masked
                counters["seconds"] = seconds_before + time.perf_counter() - t_start
                info = {"step": step, "loss": loss_value, "grad_norm": grad_norm,
                        "accuracy": None if correct is None else correct / max(n_masked, 1),
                        "lr": scheduler.get_last_lr()[0], "smiles": len(rows), **pos}
                if step % eval_every == 0 or step == total_steps:
                    record = {"step": step, "epoch": step / plan.steps_per_epoch, "smiles_seen": counters["smiles_seen"],
                              "tokens_seen": counters["tokens_seen"],
                              "train_loss": counters["loss_sum"] / max(counters["loss_n"], 1), "lr": info["lr"],
                              "seconds": counters["seconds"]}
                    counters["loss_sum"], counters["loss_n"] = 0.0, 0
                    if evaluator is not None:
                        record.update(evaluator(mlm))
                    history.append(record)
                    info["eval"] = record
                    if bar is not None:
                        bar.write(json.dumps(record))
                if step % checkpoint_every == 0 or time.perf_counter() - t_ckpt > 60 * checkpoint_minutes:
                    checkpoint(step)
                    t_ckpt = time.perf_counter()
                if bar is not None:
                    bar.update(1)
                    rate = counters["smiles_seen"] / max(counters["seconds"], 1e-9)
                    bar.set_postfix({"smi/s": f"{rate:.0f}", "loss": f"{loss_value:.3f}"})
                if callback is not None:
                    callback(info)
        finally:
            if bar is not None:
                bar.close()
        if step > start or state is None:
            checkpoint(step)
        summary = {"finished": finished, "steps": step, "total_steps": total_steps, "steps_per_epoch": plan.steps_per_epoch,
                   "epochs": step / plan.steps_per_epoch, "smiles_seen": counters["smiles_seen"],
                   "tokens_seen": counters["tokens_seen"], "masked_tokens_seen": counters["masked_seen"],
                   "seconds": counters["seconds"], "smiles_per_second": counters["smiles_seen"] / max(counters["seconds"], 1e-9),
                   "history": history, "definition": definition, "cache": cache_cost(train_manifest),
                   "hardware": _hardware(device), "path": str(output_dir)}
        if finished and (step > start or not (output_dir / "config.json").exists()):
            save_pretrained(output_dir, mlm, model, params, tokenizer, {k: v for k, v in summary.items() if k != "path"},
                            objective, None if train_targets is None else train_targets.describe())
        elif finished:  # a finished run called again: its folder stays as written, with the hardware that trained it
            summary["hardware"] = read_config(output_dir)["training"].get("hardware", summary["hardware"])
        return summary


#: The settings `pretrain` takes as floats (compared as numbers with a stored run's).
FLOAT_SETTINGS = ("lr", "weight_decay", "warmup", "max_grad_norm", "mask_prob")


def _check_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if value != value:  # NaN passes every comparison's check
        raise ValueError(f"{name} must be a real number, got nan")
    return value


def _refuse_a_finished_model(output_dir: Path) -> None:
    """A finished model without its checkpoint: training again would overwrite it only at the
    end, and a run stopped before would leave the old model looking like this run's."""
    if (output_dir / "config.json").exists() and not (output_dir / "checkpoint.pt").exists():
        raise ValueError(f"{output_dir} holds a pretrained model (config.json) but no checkpoint.pt to resume: "
                         "use another output_dir, or delete its config.json and model.safetensors to train "
                         "it again")


def _refuse_other_settings(output_dir: Path, state: dict, definition: dict, but: tuple = ()) -> None:
    """Raise if the checkpoint's run was defined otherwise than ``definition`` (keys in ``but``
    aside), naming the settings that differ, compared as the fingerprint sees them (as JSON: 1 is
    not 1.0)."""
    stored = json.loads(state["definition"])

    def same(key):
        a, b = stored.get(key), definition.get(key)
        if key in FLOAT_SETTINGS and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            return float(a) == float(b)  # (runs started before these became floats stored 0 for 0.0)
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    differ = {k: (stored.get(k), definition.get(k)) for k in sorted(set(stored) | set(definition))
              if k not in but and not same(k)}
    for key, (a, b) in differ.items():  # a dict (the model's params): the entries that differ, not all of both
        if isinstance(a, dict) and isinstance(b, dict):
            differ[key] = {k: (a.get(k, "<absent>"), b.get(k, "<absent>")) for k in sorted(set(a) | set(b))
                           if json.dumps(a.get(k), sort_keys=True) != json.dumps(b.get(k), sort_keys=True)}
    if differ:
        raise ValueError(f"{output_dir} holds a run with other settings (stored, given: {differ}); "
                         "use another output_dir, or the same arguments to resume it")


__all__ = ["pretrain", "masked_lm_loss", "descriptor_loss"]
