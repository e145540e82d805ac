"""Descriptor targets for multi-task regression pretraining (``objective="mtr"``).

ChemBERTa-2 (Ahmad et al., 2022) pretrains by regressing the RDKit 2D descriptors of each
molecule from its SMILES ("MTR") as well as by masked-LM. Here the targets are the descriptors
the estimators' ``descriptors=True`` fuses (``gmnet_sklearn.descriptors``: every one of RDKit's
``Descriptors._descList``, RDKit's values bit for bit), computed once per shard of the encoded
corpus (``cache.py``) and stored beside it:

* ``shard_NNNNN.safetensors``: ``raw`` (float32, the shard's valid SMILES x descriptors, NaN where
  RDKit fails or the value is not finite), rows in the cache's order;
* ``manifest.json``: what they were computed from (the cache's shards and identity, RDKit's version, the
  descriptor names), per shard the seconds spent, and the scaling.

The SMILES are the cache's token ids decoded: the regex tokenizer's tokens join back into the
SMILES that was read (a row holding ``[UNK]`` does not parse and gets NaNs, which the loss leaves
out). Scaling, fixed once: per descriptor the median and the interquartile range / 1.349 (a
standard deviation that heavy tails such as ``Ipc`` do not inflate) of the first shard, a bounded
sample, so memory does not grow with the corpus; targets are clipped to +-``CLIP`` after
scaling; a descriptor constant on that sample is left out. The build resumes shard by shard, as
the cache's does, with ``n_jobs`` worker processes (``compute_descriptors``'s).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from ..utils.files import write_json_atomic, write_safetensors
from .cache import build_lock, clear_stale

TARGETS_FORMAT = "gmnet_sklearn.descriptor_targets.v1"
CLIP = 6.0


def _rows(smiles: list[str], n_jobs: int) -> np.ndarray:
    """Raw descriptors of ``smiles`` as float32 (NaN where RDKit fails or a value does not fit)."""
    from ..descriptors import compute_descriptors

    with np.errstate(over="ignore"):  # a float64 too large for float32 becomes inf, then NaN below
        rows = compute_descriptors(smiles, on_invalid="nan", n_jobs=n_jobs).astype(np.float32)
    rows[~np.isfinite(rows)] = np.nan
    return rows


def scaling(raw: np.ndarray) -> dict:
    """Median, scale and the kept descriptors of a sample ``raw`` (n x descriptors); none kept
    from an empty sample."""
    if len(raw) == 0:
        return {"center": [0.0] * raw.shape[1], "scale": [1.0] * raw.shape[1], "kept": [False] * raw.shape[1]}
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        q25, median, q75 = np.nanpercentile(raw.astype(np.float64), [25, 50, 75], axis=0)
        spread = np.nanmax(raw, axis=0) - np.nanmin(raw, axis=0) if len(raw) else np.zeros(raw.shape[1])
    scale = (q75 - q25) / 1.349
    # a descriptor with no spread between its quartiles but some outside them (a count that is
    # mostly 0): scaled by its standard deviation instead
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        std = np.nanstd(raw.astype(np.float64), axis=0) if len(raw) else np.zeros(raw.shape[1])
    scale = np.where(np.nan_to_num(scale) > 0, scale, std)
    kept = np.isfinite(median) & (np.nan_to_num(spread) > 0) & (np.nan_to_num(scale) > 0)
    return {"center": np.where(kept, median, 0.0).tolist(), "scale": np.where(kept, scale, 1.0).tolist(),
            "kept": kept.tolist()}


def build_targets(corpus, tokenizer, out_dir, n_jobs: int = 1, progress: bool = False,
                  label: str = "descriptor targets", replace_other: bool = False) -> dict:
    """Compute the descriptor targets of every shard of the encoded ``corpus`` (an
    ``EncodedCorpus``) into ``out_dir``, resuming a partial build; returns the manifest. Targets of
    other data raise ``ValueError``, or with ``replace_other`` (a run's own, no checkpoint
    trained on them) where unfinished are computed again, with a warning."""
    n_jobs = (os.cpu_count() or 1) if n_jobs == -1 else int(n_jobs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with build_lock(out_dir):
        return _build_targets(corpus, tokenizer, out_dir, n_jobs, progress, label, replace_other)


def _build_targets(corpus, tokenizer, out_dir: Path, n_jobs: int, progress: bool, label: str,
                   replace_other: bool = False) -> dict:
    import rdkit

    from ..descriptors import descriptor_names

    source = [{"file": s["file"], "n_valid": s["n_valid"], "n_tokens": s["n_tokens"]} for s in corpus.manifest["shards"]]
    # what the shards hold, not only their names and sizes: the cache's own identity, with its
    # corpus files' contents digest (a cache built again from an edited corpus of the same counts
    # kept the old molecules' targets: a review)
    cache = {k: corpus.manifest.get(k) for k in ("files", "vocab", "max_length", "shard_size", "limit",
                                                   "smiles_column", "content")}
    identity = {"format": TARGETS_FORMAT, "corpus": hashlib.sha256(json.dumps(source).encode()).hexdigest()[:20],
                "cache": hashlib.sha256(json.dumps(cache, sort_keys=True).encode()).hexdigest()[:20],
                "rdkit": rdkit.__version__, "names": descriptor_names()}
    path = out_dir / "manifest.json"
    manifest = {**identity, "complete": False, "shards": []}
    if path.exists():
        old = json.loads(path.read_text())
        # (targets built before "cache" was recorded have none to compare, as caches before their
        # contents digest: they are taken on the shards' names and sizes)
        differ = [k for k in identity if old.get(k) != identity[k] and (k != "cache" or "cache" in old)]
        if differ and replace_other and not old.get("complete"):  # (a finished set: refused, as a prepared cache)
            clear_stale(out_dir, f"descriptor targets of other data ({', '.join(differ)} differ)")
            old, differ = {**manifest}, []
        if differ:
            raise ValueError(f"{out_dir} holds descriptor targets of other data ({', '.join(differ)} differ); "
                             "use another folder or delete it")
        manifest = old
        if manifest["complete"]:
            return manifest
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc=label, unit="smi", total=corpus.n_smiles,
                   initial=sum(corpus.shard_sizes[:len(manifest["shards"])]))
    try:
        for i in range(len(manifest["shards"]), len(corpus.shard_sizes)):
            ids, _, offsets = corpus.shard(i)
            smiles = [tokenizer.decode(ids[offsets[j]:offsets[j + 1]]) for j in range(len(offsets) - 1)]
            t0 = time.perf_counter()
            raw = _rows(smiles, n_jobs).reshape(len(smiles), len(identity["names"]))
            name = f"shard_{i:05d}.safetensors"
            write_safetensors(out_dir / name, {"raw": raw})
            manifest["shards"].append({"file": name, "n": len(smiles), "n_unparsed": int(np.isnan(raw).all(1).sum()),
                                       "seconds": time.perf_counter() - t0, "n_jobs": n_jobs})
            if "scaling" not in manifest and len(smiles):  # the first shard with rows (a shard may have none)
                manifest["scaling"] = scaling(raw)
            write_json_atomic(path, manifest)
            if bar is not None:
                bar.update(len(smiles))
    finally:
        if bar is not None:
            bar.close()
    if "scaling" not in manifest:  # no shard with rows
        manifest["scaling"] = scaling(np.zeros((0, len(identity["names"])), np.float32))
    manifest["complete"] = True
    write_json_atomic(path, manifest)
    return manifest


class DescriptorTargets:
    """Scaled targets of a complete build, one shard in memory at a time: ``batch(shard, rows)``
    is a float32 (len(rows), n_kept) array with NaN where a value is missing."""

    def __init__(self, out_dir, scaling: dict | None = None):
        self.out_dir = Path(out_dir)
        self.manifest = json.loads((self.out_dir / "manifest.json").read_text())
        if not self.manifest.get("complete"):
            raise ValueError(f"{self.out_dir}: the descriptor targets are not complete; run build_targets first")
        s = scaling or self.manifest["scaling"]  # a held-out set is scaled as the training corpus
        self.kept = np.asarray(s["kept"], dtype=bool)
        self.center = np.asarray(s["center"], dtype=np.float64)[self.kept]
        self.scale = np.asarray(s["scale"], dtype=np.float64)[self.kept]
        self.names = [n for n, k in zip(self.manifest["names"], self.kept) if k]
        self._loaded = (None, None)

    @property
    def n_targets(self) -> int:
        return int(self.kept.sum())

    def shard(self, i: int) -> np.ndarray:
        if self._loaded[0] != i:
            from safetensors.numpy import load_file

            raw = load_file(str(self.out_dir / self.manifest["shards"][i]["file"]))["raw"][:, self.kept]
            with np.errstate(invalid="ignore"):
                z = np.clip((raw - self.center) / self.scale, -CLIP, CLIP).astype(np.float32)
            self._loaded = (i, z)
        return self._loaded[1]

    def batch(self, shard: int, rows: np.ndarray) -> np.ndarray:
        return self.shard(shard)[rows]

    def describe(self) -> dict:
        """The targets as a pretrained folder's ``config.json`` records them."""
        return {"names": self.names, "center": self.center.tolist(), "scale": self.scale.tolist(), "clip": CLIP}


__all__ = ["build_targets", "DescriptorTargets", "scaling", "CLIP", "TARGETS_FORMAT"]
