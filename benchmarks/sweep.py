"""Fill the missing runs of the benchmark sweep with several worker processes at once.

    python -m benchmarks.sweep --what table1 ablation --workers 12 --device cuda --deadline 540
    python -m benchmarks.sweep --what table1 --workers 2 --device cpu          # both cores, one run each
    python -m benchmarks.sweep --what table1 ablation extras --dry-run         # the plan and its cost

Plans every run missing from the results folder: Table 1 and the extras (``benchmarks.run``,
both arms, the protocol's seeds) and the (k, L) grid cells on ESOL and BBBP
(``benchmarks.ablation``; the cell at the protocol's own (k, L) is Table 1's run and is planned
once). Each run is a subprocess running exactly the one-run command a user would type
(``python -m benchmarks.run --arm chemberta --endpoints bbbp --seeds 2 ...`` or a one-cell
``python -m benchmarks.ablation --endpoints esol --k 6 --L 2 --seeds 1 ...``), so each result
file records the command that made it, and nothing here computes a figure.

Why several at once: at batch 32 these models are far too small to fill a GPU; a training step
is bound by the Python and kernel-launch overhead of one process, so one GPU serves many
processes side by side (one CPU thread each). On CPU, ``--workers`` = cores with ``--threads 1``
is what earlier sweeps ran by hand.

Scheduling: the runs of the first ``--protocol`` come first (several may be given), and within
a protocol those of the first ``--what`` group. Within a group, with a
``--deadline``, the longest run starts first (its cost, plus start-up: the mean measured epoch
of the committed runs of its like made the same way, on the same CPU and GPU model, with these
threads and workers, when there are some; otherwise training steps x ``--step-seconds`` of its
arm), and a run is started only if it is predicted to end before the deadline (with ``--safety``); without
one, the smallest first (``--order`` overrides). At the deadline, or when the sweep itself is
interrupted, the runs still going are stopped (their results are lost: a result file is written
only when a run ends), unless ``--snapshot-dir`` is given: then every run saves a training
snapshot each epoch, a stopped run resumes from its last finished epoch when the sweep runs
again (its prediction counts only the epochs left), and a run starts whenever two of its epochs
fit before the deadline. ``--archive`` rewrites one tar.gz of this sweep's result files and logs
after every finished run, for machines that hand back only a few files.

Exit status: 0 when every planned run finished, 1 when one failed, 3 when none failed but some
were stopped at the deadline or never started (run the sweep again for them).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import _common as C
from .protocols import ARMS, ENDPOINTS, KL_GRID_K, KL_GRID_L, PROTOCOLS, get_protocol

GROUPS = ("table1", "ablation", "extras")
ABLATION_ENDPOINTS = ("esol", "bbbp")
# Seconds per training step (batch 32, one process among several), by device type and arm:
# starting guesses, to be replaced (--step-seconds) by what a first batch of runs measured.
DEFAULT_STEP_SECONDS = {
    "cuda": {"gmnet": 0.02, "chemberta": 0.012},
    # benchmarks/README.md, one thread: Chem-GMNet 11.5 s / 52 steps (BBBP), ChemBERTa 40.7 s / 36 (SIDER)
    "cpu": {"gmnet": 0.22, "chemberta": 1.13},
}
STARTUP_SECONDS = 30.0  # interpreter, imports, data preparation, kernel compilation, scoring
_sleep = time.sleep  # the scheduler's poll (a name of its own, for the tests)


@dataclass
class Job:
    group: str
    arm: str
    endpoint: str
    seed: int
    k: Optional[int]
    L: Optional[int]
    path: Optional[Path]  # the result file it writes (None: found afterwards)
    argv: List[str]
    estimate_s: float
    name: str = ""
    # With --snapshot-dir a run saves a snapshot every epoch, so one stopped at the deadline
    # resumes later from its last epoch: it may start when only a part of it fits (min_part_s).
    resumable: bool = False
    epochs_done: int = 0
    min_part_s: float = 0.0
    basis: str = ""  # where estimate_s came from: measured runs of its like, or the step-cost model
    protocol: str = ""  # named in the label: a sweep may fill several protocols
    # filled in while running
    proc: Optional[subprocess.Popen] = field(default=None, repr=False)
    started: Optional[float] = None
    started_unix: Optional[float] = None  # time.time() at the start: is its result file this run's?
    ended: Optional[float] = None
    status: str = "planned"  # planned | running | done | failed | stopped | not started

    def wrote_result(self) -> bool:
        """Whether this run has written its result file (a run stopped at the deadline may have,
        while its interpreter was still shutting down)."""
        return (self.path is not None and self.started_unix is not None and self.path.exists()
                and self.path.stat().st_mtime >= self.started_unix)

    def label(self) -> str:
        kl = f" k={self.k} L={self.L}" if self.arm == "gmnet" else ""
        resumes = f" (resumes after epoch {self.epochs_done})" if self.epochs_done else ""
        return f"{self.protocol + ' ' if self.protocol else ''}{self.arm}{kl} {self.endpoint} seed{self.seed}{resumes}"

    def startable_s(self) -> float:
        """Time that must be left to start it: all of it, or a useful part when resumable."""
        return min(self.estimate_s, self.min_part_s) if self.resumable else self.estimate_s


def snapshot_progress(snapshot_root: Optional[Path], protocol_name: str, arm: str, endpoint: str, seed: int,
                      k: Optional[int], L: Optional[int], max_epochs: int) -> int:
    """Epochs already done by an interrupted run of this (arm, endpoint, seed, k, L), from the
    training snapshots' descriptions (0: none)."""
    if snapshot_root is None:
        return 0
    from gmnet_sklearn.estimators.snapshot import read_snapshot_infos

    done = 0
    for info in read_snapshot_infos(C.snapshot_dir(snapshot_root, protocol_name, arm, endpoint)):
        fit = info.get("fit", {})
        if (fit.get("random_state") == seed and info.get("max_epochs") == max_epochs
                and (arm != "gmnet" or (fit.get("k"), fit.get("L")) == (k, L))):
            done = max(done, int(info.get("epochs_done", 0)))
    return done


def training_steps(endpoint: str, batch_size: int, epochs: int) -> int:
    """Approximate training steps of one run: 80 % of the file's rows in batches, per epoch."""
    n_train = 0.8 * ENDPOINTS[endpoint].n_rows
    return int(math.ceil(n_train / batch_size)) * epochs


def cost_factor(k: Optional[int], L: Optional[int], device_type: str) -> float:
    """Relative cost of a Chem-GMNet (k, L) against k=8, L=3: the read-outs grow with D*(k, L).
    One thread on CPU, k=10 L=4 (D* 6x) took 2.6x the k=8 L=3 epoch and k=8 L=4 (D* 2.9x) 1.6x
    (benchmarks/README.md); on a GPU, where kernel launches dominate, assume less."""
    if k is None or L is None:
        return 1.0
    from gmnet_sklearn.gm.functional import harmonic_dim

    excess = max(0.0, harmonic_dim(k, L) / harmonic_dim(8, 3) - 1.0)
    return 1.0 + (0.3 if device_type == "cpu" else 0.15) * excess


def _per_epoch_if_made_alike(rec: dict, arm: str, *, threads: int, workers: int,
                             here: Dict[str, object]) -> Optional[float]:
    """A record's mean seconds per epoch when it was made the way this sweep makes its runs: same
    device, CPU and GPU model (``here``: this machine's ``hardware_info``), torch threads, runs at
    once (``sweep_workers``) and, for Chem-GMNet, attention path; else None."""
    hw, wall = rec.get("hardware"), rec.get("wall_time_s")
    if not isinstance(hw, dict) or not isinstance(wall, dict):
        return None  # a foreign or older file: not a measurement
    per_epoch = wall.get("per_epoch_mean")
    if not per_epoch or hw.get("torch_threads") != threads or rec.get("sweep_workers") != workers:
        return None
    same = ("device", "cpu_model", "gpu_name") + (("gmnet_path",) if arm == "gmnet" else ())
    # a run resumed from a snapshot averages the epochs of every part: each part must match too
    parts = [(p.get("meta") or {}).get("hardware") or {} for p in ((rec.get("resumed") or {}).get("parts") or [])]
    if any(h.get(key) != here.get(key) for h in (hw, *parts) for key in same):
        return None
    return float(per_epoch)


def _records(folder: Path):
    import json

    for path in sorted(folder.glob("seed*.json")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a partial or foreign file: not a measurement
        if isinstance(rec, dict):
            yield rec


def measured_epoch_seconds(results_dir: Path, protocol_name: str, arm: str, endpoint: str, k: Optional[int],
                           L: Optional[int], *, threads: int, workers: int,
                           machine: Callable[[], Dict[str, object]]) -> Tuple[Optional[float], int]:
    """Mean seconds per epoch of the finished runs of this (arm, endpoint, k, L) made the way this
    sweep would make it (``_per_epoch_if_made_alike``). Returns (seconds, number of runs); (None, 0)
    where none match.

    Why: the step-cost model (``--step-seconds`` x ``cost_factor``) knows neither sequence length
    nor the machine; a measured epoch of the same run does (SR-p53's short SMILES made the model
    2.6x too high)."""
    folder = C.result_path(results_dir, protocol_name, arm, endpoint, 0, k, L).parent
    times = []
    for rec in _records(folder):
        if arm == "gmnet" and (rec.get("k"), rec.get("L")) != (k, L):
            continue
        per_epoch = _per_epoch_if_made_alike(rec, arm, threads=threads, workers=workers, here=machine())
        if per_epoch is not None:
            times.append(per_epoch)
    return (sum(times) / len(times), len(times)) if times else (None, 0)


def measured_step_seconds(results_dir: Path, protocol_name: str, arm: str, *, batch_size: int, threads: int,
                          workers: int, machine: Callable[[], Dict[str, object]],
                          device_type: str) -> Tuple[Optional[float], int]:
    """Seconds per training step (at k=8, L=3 for Chem-GMNet, ``cost_factor``) of this arm under
    this protocol, the median over its finished runs on any endpoint made the way this sweep would
    make them. For a run with no measured like this is closer than the per-device guess, which knows
    neither the machine nor the protocol's model shape (``tuned`` ChemBERTa runs on the 2-core CPU
    took a fifth of the guess), but still rough: a step's cost grows with the SMILES' length, which
    differs between endpoints. Returns (seconds, number of runs); (None, 0) where none."""
    import statistics

    per_step = []
    for endpoint in ENDPOINTS:
        for rec in _records(C.result_path(results_dir, protocol_name, arm, endpoint, 0, 8, 3).parent):
            per_epoch = _per_epoch_if_made_alike(rec, arm, threads=threads, workers=workers, here=machine())
            if per_epoch is not None:
                factor = cost_factor(rec.get("k"), rec.get("L"), device_type) if arm == "gmnet" else 1.0
                per_step.append(per_epoch / training_steps(endpoint, batch_size, 1) / factor)
    return (statistics.median(per_step), len(per_step)) if per_step else (None, 0)


def redone_by_run(path: Path) -> bool:
    """Whether an existing record is planned again: ``benchmarks.run --resume`` and
    ``benchmarks.ablation --resume`` (the commands the sweep gives) redo a file that is no complete
    record, or one made under parameters its protocol no longer builds (`_common.redo_reason`)."""
    return C.redo_reason(path) is not None


def plan(*, groups: Sequence[str], protocol_name: str, results_dir: Path, device: str, step_seconds: Dict[str, float],
         seeds: Optional[Sequence[int]], threads: int, extra_args: Sequence[str] = (),
         startup_s: float = STARTUP_SECONDS, arms: Optional[Sequence[str]] = None,
         endpoints: Optional[Sequence[str]] = None, skip: Sequence[str] = (), order: str = "longest",
         snapshot_dir: Optional[Path] = None, workers: Optional[int] = None,
         machine: Optional[Callable[[], Dict[str, object]]] = None) -> List[Job]:
    """The missing runs, each with its predicted time. With ``workers``, a run whose like was
    already made the same way (``measured_epoch_seconds``) is predicted from that run's measured
    epochs; otherwise from the step-cost model, at the arm's step cost measured under the protocol
    (``measured_step_seconds``) where there is one, else (and always without ``workers``) at
    ``step_seconds``."""
    protocol = get_protocol(protocol_name)
    seeds = list(seeds) if seeds is not None else list(protocol.seeds)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    batch, epochs = int(protocol.training["batch_size"]), int(protocol.training["max_epochs"])
    k0, L0 = protocol.gmnet.get("k"), protocol.gmnet.get("L")
    common = ["--protocol", protocol_name, "--device", device, "--results-dir", str(results_dir), "--resume",
              "--threads", str(threads), *extra_args]
    if snapshot_dir is not None:
        common += ["--snapshot-dir", str(snapshot_dir)]
    py = [sys.executable, "-m"]
    jobs: List[Job] = []
    seen = set()
    machine = functools.lru_cache(maxsize=None)(machine or (lambda: C.hardware_info(device)))

    @functools.lru_cache(maxsize=None)  # one read of a cell's records, not one per missing seed
    def measured(arm, ep, k, L):
        return measured_epoch_seconds(results_dir, protocol_name, arm, ep, k, L, threads=threads, workers=workers,
                                      machine=machine)

    @functools.lru_cache(maxsize=None)
    def step_cost(arm):
        """(seconds per step, basis) for runs with no measured like."""
        sec, n = (measured_step_seconds(results_dir, protocol_name, arm, batch_size=batch, threads=threads,
                                        workers=workers, machine=machine, device_type=device_type)
                  if workers is not None else (None, 0))
        if sec is None:
            return step_seconds[arm], "step-cost model"
        return sec, f"step-cost model, {n} measured run(s) of other endpoints"

    def add(group, arm, ep, seed, k, L, argv):
        path = C.result_path(results_dir, protocol_name, arm, ep, seed, k, L)
        if path in seen or (path.exists() and not redone_by_run(path)):
            return
        if (arms and arm not in arms) or (endpoints and ep not in endpoints) or f"{arm}:{ep}" in skip:
            return
        seen.add(path)
        epoch_s, n_measured = measured(arm, ep, k, L) if workers is not None else (None, 0)
        basis = f"measured, {n_measured} run(s)"
        if epoch_s is None:
            per_step, basis = step_cost(arm)
            epoch_s = training_steps(ep, batch, 1) * per_step * cost_factor(k, L, device_type)
        done = min(snapshot_progress(snapshot_dir, protocol_name, arm, ep, seed, k, L, epochs), epochs)
        jobs.append(Job(group, arm, ep, seed, k, L, path, argv, startup_s + epoch_s * (epochs - done),
                        name=f"{protocol_name}-{arm}-{ep}-seed{seed}" + (f"-k{k}-L{L}" if arm == "gmnet" else ""),
                        resumable=snapshot_dir is not None, epochs_done=done,
                        min_part_s=startup_s + 2 * epoch_s,  # two epochs: at least one is kept
                        basis=basis, protocol=protocol_name))

    for group in groups:
        if group in ("table1", "extras"):
            names = [n for n, e in ENDPOINTS.items() if e.table1 == (group == "table1")]
            for ep in names:
                for seed in seeds:
                    for arm in ARMS:
                        k, L = (k0, L0) if arm == "gmnet" else (None, None)
                        add(group, arm, ep, seed, k, L,
                            py + ["benchmarks.run", "--arm", arm, "--endpoints", ep, "--seeds", str(seed), *common])
        elif group == "ablation":
            for ep in ABLATION_ENDPOINTS:
                for k in KL_GRID_K:
                    for L in KL_GRID_L:
                        for seed in seeds:
                            if (k, L) == (k0, L0):  # Table 1's run: one file, one computation
                                argv = py + ["benchmarks.run", "--arm", "gmnet", "--endpoints", ep, "--seeds", str(seed),
                                             *common]
                            else:
                                # (ablation has no --cuda-graphs, the estimators' default on CUDA anyway, and
                                # no --descriptor-cache, which only saves time)
                                argv = py + ["benchmarks.ablation", "--endpoints", ep, "--k", str(k), "--L", str(L),
                                             "--seeds", str(seed), *_without(common, {"--cuda-graphs": 0,
                                                                                      "--descriptor-cache": 1})]
                            add(group, "gmnet", ep, seed, k, L, argv)
        else:
            raise ValueError(f"unknown group {group!r}; choose from {GROUPS}")
    # Within a group: longest first, so that against a deadline the long runs start early enough
    # to end in time; or smallest first, so that an open-ended sweep finishes the most runs soonest.
    rank = {g: i for i, g in enumerate(groups)}
    sign = -1.0 if order == "longest" else 1.0
    jobs.sort(key=lambda j: (rank[j.group], sign * j.estimate_s))
    return jobs


def _without(argv: Sequence[str], options: dict) -> List[str]:
    """``argv`` less the given options, each with its number of values."""
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a in options:
            skip = options[a]
        else:
            out.append(a)
    return out


def write_archive(archive: Path, results_dir: Path, jobs: Sequence[Job], log_dir: Path) -> None:
    """One tar.gz of the finished runs' result files (paths relative to the results folder) and
    every started run's log, written atomically."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for job in jobs:
            if job.status == "done" and job.path is not None and job.path.exists():
                tar.add(job.path, arcname=str(job.path.relative_to(results_dir)))
        for log in sorted(log_dir.glob("*.log")):
            tar.add(log, arcname=f"logs/{log.name}")
    os.replace(tmp, archive)


def _stop(job: Job) -> None:
    try:
        os.killpg(job.proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def run_jobs(jobs: List[Job], *, workers: int, deadline: float, safety: float, log_dir: Path, results_dir: Path,
             archive: Optional[Path], threads: int = 1, poll: float = 1.0) -> None:
    t0 = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1",
               GMNET_SWEEP_WORKERS=str(workers))
    pending = list(jobs)
    running: List[Job] = []

    def elapsed() -> float:
        return time.monotonic() - t0

    try:
        _schedule(pending, running, jobs, workers=workers, deadline=deadline, safety=safety, log_dir=log_dir,
                  results_dir=results_dir, archive=archive, env=env, elapsed=elapsed, poll=poll)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): the runs live in their own sessions
        for job in running:
            _stop(job)
            job.status = "done" if job.wrote_result() else "stopped"  # (one may have just finished)
        raise
    finally:
        for job in pending:
            job.status = "not started"
        if archive is not None:
            write_archive(archive, results_dir, jobs, log_dir)


def _schedule(pending, running, jobs, *, workers, deadline, safety, log_dir, results_dir, archive, env, elapsed, poll):
    while pending or running:
        for job in list(running):
            rc = job.proc.poll()
            if rc is None:
                continue
            job.ended = elapsed()
            job.status = "done" if rc == 0 and (job.path is None or job.path.exists()) else "failed"
            running.remove(job)
            print(f"[{job.ended:7.1f} s] {job.status:6s} {job.label()} in {job.ended - job.started:.0f} s "
                  f"(predicted {job.estimate_s:.0f} s), rc {rc}", flush=True)
            if archive is not None:
                write_archive(archive, results_dir, jobs, log_dir)
        if elapsed() >= deadline:
            for job in running:
                _stop(job)
                # a run that wrote its result before the stop is done (and goes into the archive)
                job.status, job.ended = ("done" if job.wrote_result() else "stopped"), elapsed()
                print(f"[{job.ended:7.1f} s] {job.status} {job.label()} at the deadline", flush=True)
            for job in running:
                try:
                    job.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(job.proc.pid, signal.SIGKILL)
            running.clear()
            break
        while len(running) < workers:
            fits = [j for j in pending if elapsed() + j.startable_s() * safety <= deadline]
            if not fits:
                break
            job = fits[0]
            pending.remove(job)
            job.started, job.started_unix, job.status = elapsed(), time.time(), "running"
            log = open(log_dir / f"{job.name}.log", "w")
            job.proc = subprocess.Popen(job.argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True, cwd=C.REPO)
            log.close()
            running.append(job)
            print(f"[{job.started:7.1f} s] start  {job.label()} (predicted {job.estimate_s:.0f} s)", flush=True)
        if not running and pending:  # nothing fits before the deadline any more
            break
        _sleep(poll)


def calibrate(*, protocol_name: str, device: str, workers: int, threads: int, endpoint: str, epochs: int,
              scratch: Path, extra_args: Sequence[str] = ()) -> Dict[str, float]:
    """Seconds per training step of each arm with ``workers`` runs at once: that many short runs
    (``--max-epochs``, half of each arm) side by side into a scratch folder; an arm's figure is
    the median over its runs of (median epoch time after the first) / steps per epoch, where an
    epoch's time includes its validation pass. Also ``startup``: the run time outside the epochs."""
    import json
    import statistics

    protocol = get_protocol(protocol_name)
    batch = int(protocol.training["batch_size"])
    jobs = []
    for i in range(max(workers, len(ARMS))):  # at least one run per arm (with one worker, one at a time)
        arm = ARMS[i % len(ARMS)]
        argv = [sys.executable, "-m", "benchmarks.run", "--arm", arm, "--endpoints", endpoint, "--seeds", str(i),
                "--protocol", protocol_name, "--device", device, "--results-dir", str(scratch), "--threads", str(threads),
                "--max-epochs", str(epochs), *extra_args]
        k, L = (protocol.gmnet.get("k"), protocol.gmnet.get("L")) if arm == "gmnet" else (None, None)
        # (the result's folder also depends on extra arguments such as --limit: found after the run)
        jobs.append(Job("calibration", arm, endpoint, i, k, L, None, argv, 0.0, name=f"calibration-{arm}-seed{i}"))
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)  # a fresh folder: one result per calibration run
    print(f"calibrating: {workers} runs of {epochs} epochs on {endpoint} at once", flush=True)
    run_jobs(jobs, workers=workers, deadline=float("inf"), safety=1.0, log_dir=scratch / "logs", results_dir=scratch,
             archive=None, threads=threads)
    per_step: Dict[str, list] = {arm: [] for arm in ARMS}
    startup = []
    for job in jobs:
        found = sorted(scratch.glob(f"*/{job.arm}/{endpoint}/seed{job.seed}*.json"))
        if job.status != "done" or len(found) != 1:
            raise RuntimeError(f"calibration run failed: {job.label()} (log: {scratch / 'logs' / (job.name + '.log')})")
        rec = json.loads(found[0].read_text())
        epoch_s = rec["wall_time_s"]["per_epoch"]
        steps = math.ceil(rec["sizes"]["train"] / batch)
        per_step[job.arm].append(statistics.median(epoch_s[1:] or epoch_s) / steps)
        startup.append(job.ended - job.started - sum(epoch_s))
    out = {arm: statistics.median(v) for arm, v in per_step.items()}
    out["startup"] = max(startup)
    print("calibrated: " + ", ".join(f"{k} {v:.4g} s" + ("/step" if k in ARMS else "") for k, v in out.items()), flush=True)
    return out


def parse_step_seconds(values: Sequence[str], device: str) -> Dict[str, float]:
    out = dict(DEFAULT_STEP_SECONDS["cuda" if device.startswith("cuda") else "cpu"])
    for item in values or ():
        arm, _, sec = item.partition("=")
        if arm not in ARMS or not sec:
            raise ValueError(f"--step-seconds takes ARM=SECONDS with ARM in {ARMS}, got {item!r}")
        out[arm] = float(sec)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--what", nargs="+", default=["table1", "ablation"], choices=GROUPS,
                   help="run groups, in priority order (default: table1 ablation)")
    p.add_argument("--protocol", nargs="+", default=["chemberta3"], choices=sorted(PROTOCOLS),
                   help="one or more, in priority order: each one's missing runs after the previous one's")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the protocol's seeds")
    p.add_argument("--arms", nargs="+", default=None, choices=ARMS, help="only these arms (default: both)")
    p.add_argument("--endpoints", nargs="+", default=None, help="only these endpoints (default: all of the groups')")
    p.add_argument("--skip", nargs="+", default=[], metavar="ARM:ENDPOINT",
                   help="leave these out (e.g. runs going on elsewhere): gmnet:lipophilicity ...")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    p.add_argument("--workers", type=int, default=None, help="runs at once (default: 12 on CUDA, the cores on CPU)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="pass benchmarks.run --cuda-graphs (records cuda_graphs=True; the estimators' default)")
    p.add_argument("--descriptor-cache", default=None, metavar="DIR",
                   help="the runs share a cache of RDKit descriptors in DIR (benchmarks.run --descriptor-cache)")
    p.add_argument("--deadline", type=float, default=None, help="seconds: start only runs predicted to end by then, "
                                                                "stop what still runs then (default: none)")
    p.add_argument("--order", choices=("longest", "smallest"), default=None,
                   help="within a group: longest run first (default with --deadline) or smallest first (default without)")
    p.add_argument("--safety", type=float, default=1.25, help="factor on the predicted time when checking the deadline")
    p.add_argument("--step-seconds", nargs="*", default=None, metavar="ARM=SECONDS",
                   help="seconds per training step of each arm with this many workers (default: a guess per device), "
                        "for runs with no measured like (see above)")
    p.add_argument("--calibrate", action="store_true",
                   help="first measure --step-seconds: --workers short runs at once (--calibrate-epochs on "
                        "--calibrate-endpoint) into a scratch folder")
    p.add_argument("--calibrate-endpoint", default="bbbp")
    p.add_argument("--calibrate-epochs", type=int, default=3)
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--log-dir", default=None, help="one log per run (default: <results-dir>/../sweep_logs)")
    p.add_argument("--archive", default=None, help="tar.gz of this sweep's result files and logs, rewritten after each run")
    p.add_argument("--snapshot-dir", default=None,
                   help="runs save a training snapshot every epoch here and resume from it: a run stopped at the "
                        "deadline loses at most one epoch, so runs start when two epochs fit, not the whole run")
    p.add_argument("--data-home", default=None)
    p.add_argument("--vocab-file", default=None)
    p.add_argument("--dry-run", action="store_true", help="print the plan and its predicted cost, run nothing")
    return p


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.workers is not None and args.workers < 1:
        build_parser().error(f"--workers must be at least 1, got {args.workers}")
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # stop the runs too (run_jobs cleans up)
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    workers = args.workers or (12 if device.startswith("cuda") else (len(os.sched_getaffinity(0))
                                                                     if hasattr(os, "sched_getaffinity") else os.cpu_count()))
    results_dir = Path(args.results_dir).resolve()
    extra = []
    # the runs start in the repository (cwd=C.REPO): paths given relative to here are made absolute
    if args.data_home:
        extra += ["--data-home", str(Path(args.data_home).resolve())]
    if args.vocab_file:
        extra += ["--vocab-file", str(Path(args.vocab_file).resolve())]
    if args.cuda_graphs:
        extra += ["--cuda-graphs"]
    if args.descriptor_cache:
        extra += ["--descriptor-cache", str(Path(args.descriptor_cache).resolve())]
    try:
        step_seconds = parse_step_seconds(args.step_seconds, device)
        for name in [*(args.endpoints or []), *(item.partition(":")[2] for item in args.skip)]:
            if name not in ENDPOINTS:
                raise ValueError(f"unknown endpoint {name!r}; known: {', '.join(ENDPOINTS)}")
    except ValueError as exc:
        build_parser().error(str(exc))
    startup_s = STARTUP_SECONDS
    log_dir = Path(args.log_dir) if args.log_dir else results_dir.parent / "sweep_logs"
    t_start = time.monotonic()
    if args.calibrate and not args.dry_run:
        # under the first protocol: the step costs it measures stand for all of them
        measured = calibrate(protocol_name=args.protocol[0], device=device, workers=workers, threads=args.threads,
                             endpoint=args.calibrate_endpoint, epochs=args.calibrate_epochs,
                             scratch=log_dir / "calibration", extra_args=extra)
        startup_s = measured.pop("startup")
        step_seconds.update(measured)
    jobs = [job for protocol_name in dict.fromkeys(args.protocol)  # each protocol's runs after the previous one's
            for job in plan(groups=args.what, protocol_name=protocol_name, results_dir=results_dir, device=device,
                            step_seconds=step_seconds, seeds=args.seeds, threads=args.threads, extra_args=extra,
                            startup_s=startup_s, arms=args.arms, endpoints=args.endpoints, skip=args.skip,
                            order=args.order or ("longest" if args.deadline is not None else "smallest"),
                            snapshot_dir=Path(args.snapshot_dir).resolve() if args.snapshot_dir else None,
                            workers=workers)]
    total = sum(j.estimate_s for j in jobs)
    print(f"{len(jobs)} run(s) missing; predicted {total / 3600:.2f} h of one worker, "
          f"{total / workers / 3600:.2f} h with {workers} workers (step seconds {step_seconds})", flush=True)
    if args.dry_run:
        for j in jobs:
            print(f"  [{j.group}] {j.label()}: predicted {j.estimate_s:.0f} s ({j.basis})")
        return 0
    # The deadline counts from this command's start (calibration included).
    deadline = args.deadline - (time.monotonic() - t_start) if args.deadline is not None else float("inf")
    run_jobs(jobs, workers=workers, deadline=deadline, safety=args.safety, log_dir=log_dir, results_dir=results_dir,
             archive=Path(args.archive) if args.archive else None, threads=args.threads)
    counts: Dict[str, int] = {}
    for j in jobs:
        counts[j.status] = counts.get(j.status, 0) + 1
    print("summary: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), flush=True)
    for j in jobs:
        if j.status == "failed":
            C.eprint(f"  failed: {j.label()} (log: {log_dir / (j.name + '.log')})")
    return exit_code(counts)


def exit_code(counts: Dict[str, int]) -> int:
    """1 when a run failed; 3 when none failed but some were stopped at the deadline or never
    started (the sweep is not complete: run it again, with --resume's records kept); else 0."""
    if counts.get("failed"):
        return 1
    return 3 if counts.get("stopped") or counts.get("not started") else 0


if __name__ == "__main__":
    sys.exit(main())
