"""How long a default fit takes: ``GMNetRegressor().fit(X, y)`` as a user calls it.

    python -m benchmarks.fit_time --threads 2                     # Chem-GMNet, the target endpoints, seed 0
    python -m benchmarks.fit_time --arm gmnet chemberta --endpoints esol --seeds 0 1
    python -m benchmarks.fit_time --threads 2 --host-label intel_avx512_host   # another host's, beside them

For each (arm, endpoint, seed): the DeepChem scaffold split's training part is fitted by the
estimator with no arguments but ``random_state`` and the vocabulary (the library's defaults, the
protocol ``tuned``; the estimator's own internal scaffold split picks the epochs whose weights
are averaged, as for a user), and the wall time of ``fit`` is written to
``benchmarks/results/fit_time/<arm>/<endpoint>/seed<s>.json`` with the machine, the thread count
and the load average before and after, so a timing taken beside other jobs shows it. The C++
kernels are built (and the data loaded) before the clock starts; what an earlier fit leaves warm
in the process (the descriptors' worker pool, the scaffold cache) is reset before each, as a
user's fresh process has it (``as_a_fresh_process``). Run it alone on the machine:
these are the figures the defaults' time targets (``TARGET_SECONDS``) are checked against.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from . import _common as C
from .protocols import ENDPOINTS, get_protocol, resolve_endpoints

SCHEMA = "gmnet-fit-time/1"
FIT_TIME_DIR = C.DEFAULT_RESULTS_DIR / "fit_time"

#: The defaults issue's targets: seconds per default fit (ensemble included) on both cores of the
#: project's 2-core CPU machine.
TARGET_SECONDS = {"esol": 120, "freesolv": 120, "bace_classification": 120, "bace_regression": 120, "bbbp": 120,
                  "clearance": 120, "lipophilicity": 360}


#: ``--without-forest``: the same fit with the network alone (forest=False), timed beside the
#: default to show what the forest adds; its records sit next to the default's.
NETWORK_ALONE = "network alone (forest=False)"


def max_epochs_variant(n: int) -> str:
    """``--max-epochs N``: the defaults with another epoch budget (a candidate recipe's time,
    e.g. recipe search round eight's 20 epochs), timed beside the defaults' records."""
    return f"max_epochs={n}"


def record_path(arm: str, endpoint: str, seed: int, root=FIT_TIME_DIR, variant: Optional[str] = None,
                host_label: Optional[str] = None, eager: bool = False) -> Path:
    """``eager``: Chem-GMNet timed without its C++ kernels (``--eager``), beside the kernels' record
    of the same host and seed, not over it."""
    suffix = "" if variant is None else "_network_alone" if variant == NETWORK_ALONE else "_" + variant.replace("=", "")
    if eager and arm == "gmnet":
        suffix += "_eager"
    if host_label:
        suffix += "_" + host_label
    return Path(root) / arm / endpoint / f"seed{seed}{suffix}.json"


def other_hosts_records(paths: Sequence[Path], hardware: dict) -> List[Path]:
    """Those of ``paths`` that hold a record timed on another host than ``hardware``'s."""
    out = []
    for path in paths:
        if path.is_file():
            try:
                old = json.loads(path.read_text()).get("hardware", {})
                if not isinstance(old, dict):
                    raise ValueError(f"its hardware is {old!r}")
            except (ValueError, AttributeError) as exc:  # (JSONDecodeError and UnicodeDecodeError are ValueErrors)
                # (a run killed mid-write before records were written atomically, or a hand edit)
                raise ValueError(f"{path}: not a fit-time record ({exc}); move it aside or delete it") from exc
            if any(old.get(k) != hardware.get(k) for k in C.HOST_KEYS):
                out.append(path)
    return out


def warm_up(arm: str, vocab_file: str) -> None:
    """One tiny fit, untimed, so the first timed fit does not include building the C++ kernels."""
    est = C.estimator_class(arm, ENDPOINTS["esol"])(max_epochs=1, vocab_file=vocab_file, random_state=0,
                                                    descriptors=False, d_model=16, n_layers=1, n_heads=2)
    est.fit(["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCC", "CCOC", "c1ccncc1", "CC(C)O"] * 2, list(range(16)))


def as_a_fresh_process() -> None:
    """Undo what an earlier fit in this process leaves warm that a user's first fit pays for:
    joblib's worker pool for the RDKit descriptors (loky keeps it 300 s; a fresh process starts
    it inside ``fit``) and the scaffold cache that loading the split filled (the estimator's
    internal split computes the same scaffolds). The compiled C++ kernels stay loaded: the
    timing leaves out building them (``warm_up``)."""
    from joblib.externals.loky import reusable_executor

    from gmnet_sklearn.model_selection.scaffold import _scaffold_of_str

    # (loky's module global: its get_reusable_executor() would start a pool of its own class to
    # shut down, or replace joblib's; joblib starts a new one after a shutdown)
    pool = reusable_executor._executor
    if pool is not None:
        pool.shutdown(wait=True)
    _scaffold_of_str.cache_clear()


def time_fit(arm: str, endpoint: str, seed: int, vocab_file: str, data_home=None, command: str = "",
             variant: Optional[str] = None) -> dict:
    ep = ENDPOINTS[endpoint]
    data = C.load_endpoint(ep, data_home=data_home)
    protocol = get_protocol("tuned")
    params = protocol.estimator_params(arm, endpoint, random_state=seed, vocab_file=vocab_file, device="cpu")
    if variant == NETWORK_ALONE:
        params["forest"] = False
    elif variant is not None and variant.startswith("max_epochs="):
        params["max_epochs"] = int(variant.split("=", 1)[1])
    est = C.estimator_class(arm, ep)(**params)
    as_a_fresh_process()
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    est.fit(data.X_train, data.to_fit(data.y_train))
    fit_seconds = time.perf_counter() - t0
    import torch

    return {
        "schema": SCHEMA, "arm": arm, "endpoint": endpoint, "seed": seed, "variant": variant, "fit_seconds": fit_seconds,
        "target_seconds": TARGET_SECONDS.get(endpoint), "n_train": len(data.X_train),
        "n_epochs": len(est.history_), "n_estimators": est.n_estimators, "best_epoch": int(est.best_epoch_),
        "averaged_epochs": est.history_[-1].get("averaged_epochs"),
        "hyperparameters": C.estimator_params_record(est), "torch_threads": torch.get_num_threads(),
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "hardware": C.hardware_info("cpu"), "versions": C.versions(),
        "git": C._GIT_AT_START if C._GIT_AT_START is not None else C.git_info(),
        "command": command, "timestamp_utc": C.utc_now(),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fit_time", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arm", nargs="+", default=["gmnet"], choices=["gmnet", "chemberta"])
    p.add_argument("--endpoints", nargs="+", default=list(TARGET_SECONDS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--results-dir", default=str(FIT_TIME_DIR))
    p.add_argument("--data-home", default=None)
    p.add_argument("--vocab-file", default=None)
    p.add_argument("--without-forest", action="store_true",
                   help="time the network alone (forest=False) instead, beside the default's records")
    p.add_argument("--max-epochs", type=int, default=None,
                   help="time the defaults with this many epochs instead, beside the default's records")
    p.add_argument("--eager", action="store_true",
                   help="time Chem-GMNet without its C++ kernels (where they cannot be built); without this flag "
                        "a run that would time the eager path stops")
    p.add_argument("--host-label", default=None,
                   help="write seed<s>_<LABEL>.json: another host's timings, kept beside this one's (the report "
                        "groups them by host)")
    args = p.parse_args(argv)
    if args.host_label is not None and not re.fullmatch(r"[A-Za-z0-9_]+", args.host_label):
        p.error(f"--host-label {args.host_label!r}: letters, digits and underscores only (it becomes part of a file name)")
    if args.without_forest and args.max_epochs is not None:
        p.error("--without-forest and --max-epochs are separate variants: time them one at a time")
    variant = NETWORK_ALONE if args.without_forest else None if args.max_epochs is None else max_epochs_variant(args.max_epochs)
    try:
        resolve_endpoints(args.endpoints)
    except ValueError as exc:  # a usage error, as argparse's own
        p.error(str(exc))
    C.set_threads(args.threads)
    from gmnet_sklearn.gm.cpu import cpu_kernels_available

    eager = "gmnet" in args.arm and not cpu_kernels_available()  # (GMNET_CPU_KERNELS=0, or no compiler)
    if eager and not args.eager:  # not the defaults' fit
        p.error("Chem-GMNet's C++ kernels are not available here (GMNET_CPU_KERNELS=0, or they cannot be built), "
                "so this would time the eager path: unset GMNET_CPU_KERNELS, or pass --eager to time it")
    try:
        others = other_hosts_records([record_path(arm, endpoint, seed, args.results_dir, variant, args.host_label, eager)
                                      for arm in args.arm for endpoint in resolve_endpoints(args.endpoints)
                                      for seed in args.seeds], C.hardware_info("cpu"))
    except ValueError as exc:
        p.error(str(exc))
    if others:  # a record is one host's timing: another host's is kept, not replaced
        p.error(f"{len(others)} record(s) were timed on another host ({', '.join(map(str, others[:3]))}"
                f"{', ...' if len(others) > 3 else ''}): pass --host-label to keep them beside this host's")
    vocab_file = C.resolve_vocab_file(args.vocab_file)
    data_home = C.resolve_data_home(args.data_home)
    command = C.command_line("benchmarks.fit_time", list(sys.argv[1:] if argv is None else argv))
    with C.git_at_start():
        for arm in args.arm:
            warm_up(arm, vocab_file)
            for endpoint in resolve_endpoints(args.endpoints):
                for seed in args.seeds:
                    rec = time_fit(arm, endpoint, seed, vocab_file, data_home, command, variant)
                    C.write_json_atomic(record_path(arm, endpoint, seed, args.results_dir, variant, args.host_label,
                                                    eager), rec)
                    target = rec["target_seconds"]
                    print(f"{arm} {endpoint} seed{seed}: fit {rec['fit_seconds']:.1f} s"
                          + (f" (target {target} s)" if target else "")
                          + f", load {rec['load_average_before'][0]:.2f} -> {rec['load_average_after'][0]:.2f}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
