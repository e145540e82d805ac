"""The encoded corpus: token ids and RDKit conjugation flags of every SMILES, computed once.

Tokenising a SMILES and parsing it with RDKit for Chem-GMNet's conjugation flags costs far more
than a training step's share of it, so the corpus is encoded once, streamed in shards of
``shard_size`` records, into ``cache_dir``:

* ``shard_NNNNN.safetensors``: ``ids`` (int16, all the shard's valid SMILES one after another,
  [CLS] and [SEP] included), ``flags`` (uint8, the same layout) and ``offsets`` (int64, n + 1);
* ``manifest.json``: what the cache was built from (files, sizes, vocabulary digest,
  ``max_length``; the files' content digest beside them, so an edit that keeps the sizes is
  refused too), per shard the records read, kept, invalid and too long, the tokens and the
  [UNK] among them, the seconds spent encoding and the bytes written, and a few of the invalid
  SMILES with RDKit's reason.

Invalid SMILES (RDKit rejects them, or characters outside the tokenizer's regex) and ones longer
than ``max_length`` are counted and skipped, never fatal. The build is resumable shard by shard
(each file is written atomically, the manifest after it), and the manifest is the measurement of
what the cache costs: :func:`cache_cost` sums it up. ``n_jobs`` worker processes encode each
shard's records in contiguous pieces, joined in order: the cache is the same byte for byte. (RDKit's
parse, most of the cost, runs on one core per process: a machine with many cores, such as a GPU
machine's, encodes with as many processes.) Training reads one shard at a time, so
memory stays bounded by ``shard_size`` whatever the corpus size; both model families can share
one cache (the baseline ignores the flags but sees the same molecules).
"""

from __future__ import annotations

import itertools
import json
import numbers
import os
import time
import warnings
from pathlib import Path

import numpy as np

from ..utils.files import write_json_atomic, write_safetensors
from ..utils.locks import exclusive_lock
from ..utils.stacklevel import _caller_stacklevel
from .corpus import content_digest, describe, iter_file, read_chunks

CACHE_FORMAT = "gmnet_sklearn.smiles_cache.v1"
_N_EXAMPLES = 20  # invalid SMILES kept in the manifest, with their reason


def vocab_digest(tokenizer) -> str:
    return tokenizer.vocabulary_digest()[:16]  # 16 hex digits: the caches' and checkpoints' identity


def clear_stale(folder: Path, why: str) -> None:
    """Empty ``folder`` (a run's own cache or targets, of other data: left by an attempt that
    stopped before training, so nothing was trained on it) but for its lock, with a warning."""
    for entry in folder.iterdir():
        if entry.name != ".lock" and entry.is_file():
            entry.unlink()
    warnings.warn(f"{folder}: {why}, left by an earlier attempt on this run folder that stopped before training "
                  "(no checkpoint.pt): built again", UserWarning, stacklevel=_caller_stacklevel())


def build_lock(folder: Path):
    """Held while one process builds ``folder`` (a cache, descriptor targets): runs sharing a
    cache (``--cache-dir``, one per arm) take turns, the later one finding it complete, instead of
    writing the same shard and manifest files at once. Where there is no lock (Windows, some
    network file systems), build a shared cache once first (``prepare_only``)."""
    return exclusive_lock(folder / ".lock", without_lock="Build a shared cache from one process (prepare_only) first.")


def encode_chunk(tokenizer, smiles: list[str], max_length: int | None):
    """Encoded arrays of a chunk's valid SMILES and counts; invalid ones listed with a reason."""
    ids, flags, invalid, too_long = [], [], [], 0
    for smi in smiles:
        res = tokenizer._encode_one(smi) if smi else "empty record"
        if isinstance(res, str):
            invalid.append((smi, res))
            continue
        if max_length is not None and len(res[0]) > max_length:
            too_long += 1
            continue
        ids.append(res[0])
        flags.append(res[1])
    return ids, flags, invalid, too_long


def _encode_in_pieces(pool, n_jobs: int, tokenizer, smiles: list[str], max_length: int | None):
    """`encode_chunk` of ``smiles`` split into contiguous pieces over ``pool``, joined in order."""
    if pool is None:
        return encode_chunk(tokenizer, smiles, max_length)
    step = -(-len(smiles) // (4 * n_jobs))  # a few pieces a worker, so one slow piece does not idle the rest
    pieces = [smiles[i:i + step] for i in range(0, len(smiles), step)]
    ids, flags, invalid, too_long = [], [], [], 0
    for p_ids, p_flags, p_invalid, p_long in pool.map(encode_chunk, [tokenizer] * len(pieces), pieces,
                                                      [max_length] * len(pieces)):
        ids += p_ids
        flags += p_flags
        invalid += p_invalid
        too_long += p_long
    return ids, flags, invalid, too_long


def build_cache(files, tokenizer, cache_dir, shard_size: int = 100_000, max_length: int | None = None,
                limit: int | None = None, progress: bool = False, label: str = "encoding corpus",
                n_jobs: int = 1, smiles_column: str | None = None, limit_name: str = "limit",
                content: str | None = None, replace_other: bool = False) -> dict:
    """Encode the SMILES of ``files`` (the first ``limit`` records, or all; a CSV's
    ``smiles_column``, default "smiles") into ``cache_dir``, resuming a partial build, with
    ``n_jobs`` processes (-1: one per core); returns the manifest. A cache built from other files,
    vocabulary, ``max_length``, ``shard_size``, ``limit`` or column, or from files edited since
    (their contents' digest: ``content``, computed here unless the caller has it), raises
    ``ValueError`` (naming ``limit`` as the caller's ``limit_name``), or, with ``replace_other``
    (a run's own cache, no checkpoint trained on it) where it is unfinished or holds no SMILES
    (what a failed attempt leaves), is built again with a warning."""
    n_jobs = (os.cpu_count() or 1) if n_jobs == -1 else n_jobs
    if not (isinstance(n_jobs, numbers.Integral) and n_jobs >= 1):
        raise ValueError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}")
    if tokenizer.vocab_size > np.iinfo(np.int16).max:
        raise ValueError(f"vocabulary of {tokenizer.vocab_size} tokens does not fit the cache's int16 ids")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with build_lock(cache_dir):
        return _build_cache(files, tokenizer, cache_dir, shard_size, max_length, limit, progress, label, n_jobs,
                            smiles_column, limit_name, content_digest(files) if content is None else content,
                            replace_other)


def _build_cache(files, tokenizer, cache_dir: Path, shard_size, max_length, limit, progress, label, n_jobs,
                 smiles_column, limit_name, content: str, replace_other: bool = False) -> dict:
    identity = {"format": CACHE_FORMAT, "files": describe(files), "vocab": vocab_digest(tokenizer),
                "max_length": max_length, "shard_size": int(shard_size), "limit": None if limit is None else int(limit)}
    if smiles_column is not None:  # only then: caches built before the option keep their identity
        identity["smiles_column"] = smiles_column
    path = cache_dir / "manifest.json"
    manifest = {**identity, "content": content, "complete": False, "shards": [], "invalid_examples": []}
    if path.exists():
        old = json.loads(path.read_text())
        # smiles_column on both sides: a cache of another column must not pass for the default's
        differ = [k for k in [*identity, *(["smiles_column"] if "smiles_column" not in identity else [])]
                  if old.get(k) != identity.get(k)]
        # only what a failed attempt leaves (a build cut short, or no SMILES to train on), never a
        # finished cache (one prepared on purpose, prepare_only, may have taken hours)
        failed = not old.get("complete") or not sum(s.get("n_valid", 0) for s in old.get("shards", []))
        if replace_other and failed and (differ or old.get("content", content) != content):
            clear_stale(cache_dir, f"a cache of other data ({', '.join(differ) or 'contents'} differ)")
            old = {**manifest}
            differ = []
        if differ:
            raise ValueError(f"{cache_dir} holds a cache of other data ({', '.join(differ)} differ"
                             + (f"; limit is {limit_name}" if "limit" in differ and limit_name != "limit" else "")
                             + "); use another cache_dir or delete it")
        if old.get("content", content) != content:  # (caches built before the digest have none to compare)
            raise ValueError(f"{cache_dir} holds a cache of other data: the corpus files {[Path(f).name for f in files]} "
                             "have the names and sizes it was built from but other contents (edited since); delete "
                             f"{cache_dir} or use another cache_dir")
        manifest = old
        if manifest["complete"]:
            return manifest
    done = len(manifest["shards"])
    records = (smi for f in files for smi in iter_file(f, smiles_column))
    if limit is not None:
        records = itertools.islice(records, int(limit))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=label, unit="smi", initial=done * shard_size)
    for _ in itertools.islice(records, done * shard_size):  # records of the shards already written
        pass
    pool = None
    if n_jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a forked child of a process that has started torch's threads can hang
        pool = ProcessPoolExecutor(n_jobs, mp_context=multiprocessing.get_context("spawn"))
    try:
        for chunk in read_chunks(records, shard_size):
            t0 = time.perf_counter()
            ids, flags, invalid, too_long = _encode_in_pieces(pool, n_jobs, tokenizer, chunk, max_length)
            seconds = time.perf_counter() - t0  # wall time, with the n_jobs the manifest records
            _write_shard(cache_dir, manifest, chunk, ids, flags, invalid, too_long, seconds, n_jobs, tokenizer.unk_id)
            write_json_atomic(path, manifest)
            if bar is not None:
                bar.update(len(chunk))
                bar.set_postfix(invalid=sum(s["n_invalid"] for s in manifest["shards"]))
    finally:
        if pool is not None:
            pool.shutdown()
    if bar is not None:
        bar.close()
    manifest["complete"] = True
    write_json_atomic(path, manifest)
    return manifest


def _write_shard(cache_dir: Path, manifest: dict, chunk, ids, flags, invalid, too_long: int, seconds: float,
                 n_jobs: int, unk_id: int) -> None:
    """One shard's arrays (atomically) and its line in the manifest."""
    lengths = np.fromiter((len(a) for a in ids), dtype=np.int64, count=len(ids))
    arrays = {"ids": np.concatenate(ids).astype(np.int16) if ids else np.zeros(0, np.int16),
              "flags": np.concatenate(flags).astype(np.uint8) if flags else np.zeros(0, np.uint8),
              "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)}
    name = f"shard_{len(manifest['shards']):05d}.safetensors"
    write_safetensors(cache_dir / name, arrays)
    manifest["shards"].append({"file": name, "n_read": len(chunk), "n_valid": len(ids),
                               "n_invalid": len(invalid), "n_too_long": too_long,
                               "n_tokens": int(lengths.sum()), "n_unknown": int((arrays["ids"] == unk_id).sum()),
                               "encode_seconds": seconds, "n_jobs": n_jobs,
                               "bytes": (cache_dir / name).stat().st_size})
    room = _N_EXAMPLES - len(manifest["invalid_examples"])
    manifest["invalid_examples"] += [{"smiles": s, "reason": r} for s, r in invalid[:max(room, 0)]]


def cache_cost(manifest: dict) -> dict:
    """What the cache cost: records, kept, invalid, too long, tokens ([UNK] among them: None for a
    cache written before they were counted), encode seconds in all and per SMILES, bytes in all
    and per kept SMILES."""
    shards = manifest["shards"]
    n_read = sum(s["n_read"] for s in shards)
    n_valid = sum(s["n_valid"] for s in shards)
    seconds = sum(s["encode_seconds"] for s in shards)
    nbytes = sum(s["bytes"] for s in shards)
    return {"n_read": n_read, "n_valid": n_valid, "n_invalid": sum(s["n_invalid"] for s in shards),
            "n_too_long": sum(s["n_too_long"] for s in shards), "n_tokens": sum(s["n_tokens"] for s in shards),
            "n_unknown": sum(s["n_unknown"] for s in shards) if all("n_unknown" in s for s in shards) else None,
            "encode_seconds": seconds, "encode_us_per_smiles": 1e6 * seconds / max(n_read, 1),
            "bytes": nbytes, "bytes_per_smiles": nbytes / max(n_valid, 1)}


class EncodedCorpus:
    """Read access to a complete cache, one shard in memory at a time."""

    def __init__(self, cache_dir):
        self.cache_dir = Path(cache_dir)
        self.manifest = json.loads((self.cache_dir / "manifest.json").read_text())
        if not self.manifest.get("complete"):
            raise ValueError(f"{self.cache_dir}: the cache is not complete; run build_cache first")
        self.shard_sizes = [s["n_valid"] for s in self.manifest["shards"]]
        self._loaded = (None, None)

    @property
    def n_smiles(self) -> int:
        return sum(self.shard_sizes)

    def shard(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids int64, flags int64, offsets)`` of shard ``i``."""
        if self._loaded[0] != i:
            from safetensors.numpy import load_file

            a = load_file(str(self.cache_dir / self.manifest["shards"][i]["file"]))
            self._loaded = (i, (a["ids"].astype(np.int64), a["flags"].astype(np.int64), a["offsets"]))
        return self._loaded[1]


__all__ = ["build_cache", "cache_cost", "EncodedCorpus", "encode_chunk", "vocab_digest"]
