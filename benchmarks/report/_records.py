"""Reading the result JSONs: the index of runs by protocol, arm, endpoint, (k, L) and seed, and
the mean and spread over seeds."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .. import _common as C
from ..peers import PEER_ARM_LABELS
from ..protocols import ARM_LABELS, PROTOCOLS


ALL_ARM_LABELS: Dict[str, str] = {**ARM_LABELS, **PEER_ARM_LABELS}


def load_results(results_dir) -> List[dict]:
    """Every result JSON under ``<results>/<protocol>/<arm>/<endpoint>/``, with its path (the
    files there that are no complete record of any kind: :func:`defective_results`)."""
    results_dir = Path(results_dir)
    out = []
    for path in sorted(results_dir.glob("*/*/*/*.json")):
        rec, defect = C.read_record(path)  # (fit-time and embedder records share the depth: another schema)
        if defect is not None:
            continue
        rec["_path"] = path
        out.append(rec)
    return out


def code_provenance(records: Iterable[dict]) -> Dict[str, Dict[str, int]]:
    """Per protocol, how many records ran (in whole or in a resumed part) from a tree with
    uncommitted changes, and how many were resumed at another commit than they started."""
    dirty: Dict[str, int] = defaultdict(int)
    mixed: Dict[str, int] = defaultdict(int)
    for r in records:
        gits = [r.get("git") or {}] + [((p.get("meta") or {}).get("git") or {})
                                        for p in ((r.get("resumed") or {}).get("parts") or [])]
        if any(g.get("dirty") for g in gits):
            dirty[r["protocol"]] += 1
        if len({g.get("commit") for g in gits} - {None}) > 1:
            mixed[r["protocol"]] += 1
    return {"dirty": dict(dirty), "resumed_across_commits": dict(mixed)}


def read_json(path) -> Optional[dict]:
    """A record file's JSON, or None where it does not parse (the sections leave it out;
    :func:`defective_results` lists it under "Record checks")."""
    return C.read_record(path, schema=None)[0]


def defective_results(results_dir) -> List[tuple]:
    """``(path, what is wrong)`` of the files the report leaves out: any JSON file that does not
    parse (a run killed while writing a non-atomic file, an edit), and where result records live
    a file that is no record of any schema, or a result record without its required fields
    (``run --resume`` redoes those)."""
    results_dir = Path(results_dir)
    records = set(results_dir.glob("*/*/*/*.json"))
    return [(path, defect) for path in sorted(results_dir.rglob("*.json"))
            if (defect := C.record_defect(path, schema=None)) is not None
            and (path in records or defect.startswith("unreadable"))]


def stats(values: Sequence[float]) -> Optional[Dict[str, float]]:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None
    arr = np.asarray(vals, dtype=np.float64)
    return {"mean": float(arr.mean()), "sd": float(arr.std(ddof=0)), "n": int(arr.size)}


def default_kl(protocol_base: str) -> Tuple[Optional[int], Optional[int]]:
    p = PROTOCOLS.get(protocol_base)
    return (p.gmnet.get("k"), p.gmnet.get("L")) if p else (None, None)


class Index:
    """Result records grouped by protocol / arm / endpoint / (k, L) / seed."""

    def __init__(self, records: Iterable[dict]):
        self.records = list(records)
        self.by: Dict[str, Dict[str, Dict[str, Dict[Tuple, Dict[int, dict]]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(dict))))
        self.base: Dict[str, str] = {}
        for r in self.records:
            kl = (r.get("k"), r.get("L")) if r["arm"] == "gmnet" else (None, None)
            cell = self.by[r["protocol"]][r["arm"]][r["endpoint"]][kl]
            if int(r["seed"]) in cell:  # two files of one run: the report would count one of them silently
                raise ValueError(f"two records of one run ({r['protocol']}, {r['arm']}, {r['endpoint']}, k, L = {kl}, "
                                 f"seed {r['seed']}): {cell[int(r['seed'])].get('_path')} and {r.get('_path')}")
            cell[int(r["seed"])] = r
            self.base[r["protocol"]] = r.get("protocol_base", r["protocol"].split("@")[0])

    @property
    def protocols(self) -> List[str]:
        return sorted(self.by)

    def runs(self, protocol: str, arm: str, endpoint: str, kl=None) -> Dict[int, dict]:
        if kl is None:
            kl = default_kl(self.base.get(protocol, protocol.split("@")[0])) if arm == "gmnet" else (None, None)
        return self.by.get(protocol, {}).get(arm, {}).get(endpoint, {}).get(kl, {})

    def kl_cells(self, protocol: str, endpoint: str) -> Dict[Tuple[int, int], Dict[int, dict]]:
        return {kl: seeds for kl, seeds in self.by.get(protocol, {}).get("gmnet", {}).get(endpoint, {}).items()}


def summarise_runs(runs: Dict[int, dict]) -> Optional[dict]:
    s = stats([runs[s]["test_metric"] for s in sorted(runs)])
    if s is None:
        return None
    s["seeds"] = sorted(runs)
    s["values"] = [runs[k]["test_metric"] for k in sorted(runs)]
    s["valid"] = stats([runs[k].get("valid_metric") for k in sorted(runs)])
    s["valid_values"] = [runs[k].get("valid_metric") for k in sorted(runs)]  # by seed, as "values"
    return s


def run_machines(rec: dict) -> List[dict]:
    """The hardware records of a run: one per part for a run resumed from a training snapshot."""
    parts = (rec.get("resumed") or {}).get("parts") or []
    found = [((p.get("meta") or {}).get("hardware")) for p in parts]
    return [h for h in found if h] or [rec.get("hardware", {})]


def run_device(rec: dict) -> str:
    """"cpu", "cuda", or "cpu+cuda" for a run resumed across both: timings of different devices
    are never averaged together (a GPU run's seconds beside CPU runs' would be meaningless)."""
    return "+".join(sorted({(h.get("device") or "cpu") for h in run_machines(rec)}))


def by_device(recs: Iterable[dict]) -> Dict[str, List[dict]]:
    """The runs grouped by :func:`run_device`, the CPU's first."""
    groups: Dict[str, List[dict]] = defaultdict(list)
    for r in recs:
        groups[run_device(r)].append(r)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != "cpu", kv[0])))


def device_note(device: str) -> str:
    """How a device shows beside a time: nothing for the CPU (most runs), else its name."""
    return "" if device == "cpu" else {"cuda": "GPU", "cpu+cuda": "CPU and GPU parts"}.get(device, device)


def machines_text(ids: List[str], device: str) -> str:
    """Where a time was measured: the machine ids, then the device where it is not the CPU."""
    note = device_note(device)
    return ", ".join(ids + ([note] if note else []))


def paired(a: Optional[dict], b: Optional[dict]) -> Optional[Tuple[float, float, List[int]]]:
    """Two columns (``summarise_runs`` summaries) compared fairly: their means over the seeds both
    have, and those seeds; None when they share none. A mean over seeds 0-2 against one over
    seed 0 alone would compare different draws."""
    if not a or not b:
        return None
    return paired_by_seed(dict(zip(a["seeds"], a["values"])), dict(zip(b["seeds"], b["values"])))


def valid_by_seed(summary: Optional[dict]) -> Dict[int, float]:
    """A ``summarise_runs`` summary's validation metric by seed."""
    return dict(zip((summary or {}).get("seeds", []), (summary or {}).get("valid_values", [])))


def paired_by_seed(a: Dict[int, float], b: Dict[int, float]) -> Optional[Tuple[float, float, List[int]]]:
    """Means of two {seed: value} over the seeds both have, and those seeds; None when none. A
    seed whose value is undefined (NaN, null in the JSON) on either side is not shared."""
    common = sorted(s for s in set(a) & set(b) if all(v is not None and math.isfinite(v) for v in (a[s], b[s])))
    if not common:
        return None
    return float(np.mean([a[s] for s in common])), float(np.mean([b[s] for s in common])), common


def seeds_text(seeds: Sequence[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def split_fingerprints(idx: Index) -> Dict[str, Dict[str, List[str]]]:
    """Per endpoint, each split fingerprint (``sizes.split_sha256``) its records carry and the
    protocols that carry it, over every protocol without overrides (``@limit`` runs use other
    rows on purpose). One fingerprint per endpoint: every table compares runs on the same rows."""
    found: Dict[str, Dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for r in idx.records:
        sha = (r.get("sizes") or {}).get("split_sha256")
        if sha and "@" not in r["protocol"]:
            found[r["endpoint"]][sha].add(r["protocol"])
    return {ep: {sha: sorted(ps) for sha, ps in sorted(shas.items())} for ep, shas in sorted(found.items())}
