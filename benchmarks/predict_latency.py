"""How long a fitted model takes to predict: ``est.predict(smiles)`` as a service or a screen calls it.

    python -m benchmarks.predict_latency --threads 2                 # FreeSolv's default model
    python -m benchmarks.predict_latency --threads 2 --sizes 1 10 100 1000 --repeats 7

The endpoint's DeepChem scaffold training part is fitted once with the library's defaults (protocol
``tuned``, seed 0, the estimator's own internal split), and beside it the peer a chemist tries
first, RF-ECFP4 (``benchmarks.peers``: 500 trees on Morgan bits, here its fingerprints and
forest's predict, on one thread and on ``--threads``). Each then predicts the first N SMILES of
Lipophilicity for N in ``--sizes`` (molecules the fit did not see, as in a screen; the warning
about tokens outside the vocabulary is silenced), each size ``--repeats`` times after one untimed
call; the median and the fastest wall time go to
``benchmarks/results/predict_latency/<endpoint>_<threads>threads.json`` with the machine and the
command. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from . import _common as C
from .peers import fit_rf, morgan_fingerprints, predict_rf
from .protocols import ENDPOINTS, get_protocol

SCHEMA = "gmnet-predict-latency/1"
LATENCY_DIR = C.DEFAULT_RESULTS_DIR / "predict_latency"
SCREEN = "lipophilicity"  # the molecules predicted


def timed(call: Callable[[], object], repeats: int) -> Dict[str, object]:
    """Seconds of ``call()``: one untimed call first, then ``repeats`` timed ones."""
    call()
    seconds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t0)
    return {"median_seconds": statistics.median(seconds), "min_seconds": min(seconds), "seconds": seconds}


def measure(endpoint: str, sizes: Sequence[int], repeats: int, threads: int, vocab_file: str,
            data_home=None, command: str = "") -> dict:
    import numpy as np
    import torch

    ep = ENDPOINTS[endpoint]
    data = C.load_endpoint(ep, data_home=data_home)
    screen = C.load_endpoint(ENDPOINTS[SCREEN], data_home=data_home)
    molecules = [*screen.X_train, *screen.X_valid, *screen.X_test][:max(sizes)]
    if len(molecules) < max(sizes):
        raise ValueError(f"{SCREEN} has {len(molecules)} SMILES, fewer than --sizes' largest {max(sizes)}")
    params = get_protocol("tuned").estimator_params("gmnet", endpoint, random_state=0, vocab_file=vocab_file,
                                                    device="cpu")
    t0 = time.perf_counter()
    est = C.estimator_class("gmnet", ep)(**params).fit(data.X_train, data.to_fit(data.y_train))
    fit_seconds = time.perf_counter() - t0
    bits, _ = morgan_fingerprints(data.X_train)
    forests = fit_rf(ep.task_type, bits, np.asarray(data.to_fit(data.y_train)), seed=0, n_jobs=threads)

    def rf(smiles: List[str], n_jobs: int):
        for forest in forests:
            if not isinstance(forest, float):
                forest.n_jobs = n_jobs
        return predict_rf(ep.task_type, forests, morgan_fingerprints(smiles)[0])

    predict = est.predict if ep.task_type == "regression" else est.predict_proba
    arms: Dict[str, Callable[[List[str]], object]] = {"gmnet": predict, "rf_ecfp_1_thread": lambda s: rf(s, 1)}
    if threads > 1:
        arms[f"rf_ecfp_{threads}_threads"] = lambda s: rf(s, threads)
    results: Dict[str, Dict[str, object]] = {arm: {} for arm in arms}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # tokens outside the vocabulary: expected in a screen
        for n in sizes:
            for arm, call in arms.items():
                results[arm][str(n)] = timed(lambda: call(molecules[:n]), repeats)
    return {
        "schema": SCHEMA, "endpoint": endpoint, "screen": SCREEN, "sizes": list(sizes), "repeats": repeats,
        "n_train": len(data.X_train), "fit_seconds": fit_seconds, "forest_weight": float(getattr(est, "forest_weight_", 0.0)),
        "hyperparameters": C.estimator_params_record(est), "torch_threads": torch.get_num_threads(),
        "arms": results, "hardware": C.hardware_info("cpu"), "versions": C.versions(),
        "git": C._GIT_AT_START if C._GIT_AT_START is not None else C.git_info(),
        "command": command, "timestamp_utc": C.utc_now(),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.predict_latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", default="freesolv", choices=sorted(ENDPOINTS))
    p.add_argument("--sizes", nargs="+", type=int, default=[1, 10, 100, 1000])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--results-dir", default=str(LATENCY_DIR))
    p.add_argument("--data-home", default=None)
    p.add_argument("--vocab-file", default=None)
    args = p.parse_args(argv)
    if min(args.sizes) < 1 or args.repeats < 1 or args.threads < 1:
        p.error("--sizes, --repeats and --threads must be positive")
    C.set_threads(args.threads)
    command = C.command_line("benchmarks.predict_latency", list(sys.argv[1:] if argv is None else argv))
    with C.git_at_start():
        record = measure(args.endpoint, sorted(set(args.sizes)), args.repeats, args.threads,
                         C.resolve_vocab_file(args.vocab_file), C.resolve_data_home(args.data_home), command)
    path = C.write_json_atomic(Path(args.results_dir) / f"{args.endpoint}_{args.threads}threads.json", record)
    for arm, by_size in record["arms"].items():
        print(arm, {n: f"{r['median_seconds'] * 1000:.1f} ms" for n, r in by_size.items()})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
