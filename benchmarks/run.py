"""Run benchmark fits: one JSON per (arm, endpoint, seed).

    python -m benchmarks.run --arm gmnet --endpoints esol freesolv --seeds 0 1 2 --protocol chemberta3
    python -m benchmarks.run --arm gmnet chemberta --endpoints table1 --resume
    python -m benchmarks.run --arm gmnet --endpoints freesolv --seeds 0 --max-epochs 2   # quick check
    python -m benchmarks.run --arm rf_ecfp chemprop --endpoints table1 --seeds 0 1 2 --threads 1 --resume

For each run: load the DeepChem 2.8.0 file, DeepChem-exact scaffold split (80/10/10, SMILES
longer than 200 characters dropped after the split), drop missing labels of single-task
classification endpoints (after the split), fit with the valid split as ``X_valid``/``y_valid``
(it picks the epochs kept: the best one restored, or the best ones' weights averaged), score valid and test in original units, and write
``<results-dir>/<protocol>/<arm>/<endpoint>/seed<s>[_k<k>_L<L>].json`` atomically. With
``--snapshot-dir`` a run killed mid-fit (a session that ends) resumes from its last finished epoch
when run again; the record's ``resumed`` then says from which epoch, and where each part ran.

``--max-epochs`` and ``--limit`` change what a run means, so such runs go to a separate
protocol folder (``chemberta3@max_epochs=2``), never among the full runs.

The peer arms ``rf_ecfp`` and ``chemprop`` (benchmarks/peers.py) run on the same splits with
their own defaults; ``--protocol`` and ``--max-epochs`` do not apply to them, and their records go
to ``<results-dir>/peers/<arm>/<endpoint>/seed<s>.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from typing import Optional, Sequence

from . import _common as C
from . import peers
from .peers import PEER_ARMS
from .protocols import ARMS, ENDPOINTS, PROTOCOLS, by_size, get_protocol, resolve_endpoints


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arm", nargs="+", required=True, choices=[*ARMS, "both", *PEER_ARMS],
                   help="gmnet (Chem-GMNet), chemberta (same-shape baseline) or both; peers: rf_ecfp "
                        "(random forest on Morgan fingerprints), chemprop (Chemprop v2 CLI, its own venv)")
    p.add_argument("--endpoints", nargs="+", default=["table1"],
                   help=f"endpoint names ({', '.join(ENDPOINTS)}) or table1 / extras / all (default: table1)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the protocol's seeds")
    p.add_argument("--protocol", default="chemberta3", choices=sorted(PROTOCOLS))
    p.add_argument("--k", type=int, default=None, help="gmnet sphere dimension (default: the protocol's)")
    p.add_argument("--L", type=int, default=None, help="gmnet harmonic degree (default: the protocol's)")
    p.add_argument("--device", default="auto", help="the transformer arms': auto (CUDA when present), cpu, cuda, cuda:1, ... "
                   "(the peer arms run on the CPU, as their protocol says)")
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--max-epochs", type=int, default=None,
                   help="override the protocol's epochs (results go to <protocol>@max_epochs=N)")
    p.add_argument("--limit", type=int, default=None,
                   help="use only the first N rows of each data file (tests; results go to <protocol>@limit=N)")
    p.add_argument("--resume", action="store_true", help="skip runs whose JSON already exists")
    p.add_argument("--snapshot-dir", default=None,
                   help="save a training snapshot after every epoch here, and resume a run killed mid-fit "
                        "from its last finished epoch (the same fit, bit for bit on the same machine)")
    p.add_argument("--order", choices=("size", "given"), default="size",
                   help="size: smallest data set first (default); given: as listed")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: torch's); the peers' RF n_jobs and Chemprop's OMP threads")
    p.add_argument("--chemprop-bin", default=None,
                   help="Chemprop executable for the chemprop arm (default: GMNET_CHEMPROP_BIN, "
                        ".venv-chemprop/bin/chemprop, or chemprop on PATH)")
    p.add_argument("--data-home", default=None, help="MoleculeNet folder (default: GMNET_DATA or ../shared/data/moleculenet)")
    p.add_argument("--vocab-file", default=None, help="DeepChem vocabulary (default: GMNET_TOKENIZER_VOCAB or ../shared/...)")
    p.add_argument("--allow-download", action="store_true", help="let the loader download missing files")
    p.add_argument("--dry-run", action="store_true", help="print the planned runs and exit")
    p.add_argument("--verbose", type=int, default=0, help="estimator verbosity (1: progress bar)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="record cuda_graphs=True among the run's overrides (the estimators' default already: on "
                        "CUDA each batch shape's steps replay from graphs with or without this flag)")
    p.add_argument("--descriptor-cache", default=None, metavar="DIR",
                   help="the estimators' memory: cache the RDKit descriptors of each split's SMILES in DIR, so the "
                        "seeds and arms of an endpoint, and a resumed run, compute them once (a fit's largest fixed "
                        "cost); changes no result; recorded")
    return p


def run_one(*, protocol, protocol_name, overrides, arm, data, seed, k, L, device, vocab_file, command,
            max_epochs, verbose=0, snapshot_dir=None, estimator_params=None):
    """Fit and score one (arm, endpoint, seed); returns the result record and the estimator.
    ``estimator_params``: how the fit runs on top of the protocol (e.g. ``cuda_graphs``), recorded
    among the overrides."""
    from gmnet_sklearn.estimators._base import resolve_device

    if arm == "gmnet" and str(resolve_device(device)).startswith("cpu"):
        from gmnet_sklearn.gm.cpu import cpu_kernels_available

        cpu_kernels_available()  # their one-time build (a minute where TORCH_EXTENSIONS_DIR is fresh) out of epoch 1
    t0 = time.perf_counter()
    snapshots = None if snapshot_dir is None else C.snapshot_dir(snapshot_dir, protocol_name, arm, data.endpoint.name)
    est = C.make_estimator(protocol, arm, data.endpoint, seed, vocab_file=vocab_file, device=device,
                           max_epochs=max_epochs, k=k, L=L, verbose=verbose, snapshots=snapshots,
                           data_prep_seconds=data.prep_seconds)
    if estimator_params:
        est.set_params(**estimator_params)
        overrides = {**overrides, **estimator_params}
    est.fit(data.X_train, data.to_fit(data.y_train), X_valid=data.X_valid, y_valid=data.to_fit(data.y_valid))
    resumed = C.resumed_entry(est)
    fit_s = time.perf_counter() - t0  # the last part of a resumed fit; whole_wall adds the earlier ones
    t1 = time.perf_counter()
    valid = C.score(data.endpoint, est, data.X_valid, data.y_valid, data)
    test = C.score(data.endpoint, est, data.X_test, data.y_test, data)
    score_s = time.perf_counter() - t1
    wall = C.whole_wall(data.prep_seconds, fit_s, score_s, resumed)
    return C.build_record(source="benchmarks.run", protocol=protocol, protocol_name=protocol_name, overrides=overrides,
                          arm=arm, data=data, est=est, seed=seed, valid=valid, test=test, wall=wall,
                          command=command, vocab_file=vocab_file), est


def summary_line(rec) -> str:
    kl = f" k{rec['k']} L{rec['L']}" if rec["arm"] == "gmnet" else ""
    w = rec["wall_time_s"]
    per_epoch = w.get("per_epoch_mean")
    return (f"[{rec['protocol']}] {rec['arm']}{kl} {rec['endpoint']} seed{rec['seed']}: "
            f"test {rec['metric']} {C.fmt_metric(rec['test_metric'], rec['metric'])}, "
            f"valid {C.fmt_metric(rec['valid_metric'], rec['metric'])}, best epoch {rec['best_epoch']}/{rec['n_epochs']}, "
            f"n {rec['sizes']['train']}/{rec['sizes']['valid']}/{rec['sizes']['test']}, "
            f"{rec['n_parameters']:,} params, {w['total']:.1f} s"
            + (f" ({per_epoch:.2f} s/epoch)" if per_epoch else "") + f", {rec['hardware']['device']}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    with C.git_at_start():  # records name the code this command started with
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    protocol = get_protocol(args.protocol)
    arms = list(dict.fromkeys(a for name in args.arm for a in (ARMS if name == "both" else (name,))))
    peer_arms = [a for a in arms if a in PEER_ARMS]
    if peer_arms and args.max_epochs is not None:
        build_parser().error("--max-epochs applies to the transformer arms, not to " + ", ".join(peer_arms))
    try:
        endpoints = resolve_endpoints(args.endpoints)
    except ValueError as exc:
        build_parser().error(str(exc))
    if args.order == "size":
        endpoints = by_size(endpoints)
    seeds = list(args.seeds) if args.seeds is not None else list(protocol.seeds)
    if args.seeds is None and not any(a in ARMS for a in arms):
        seeds = list(peers.PEER_SEEDS)
    if (args.k is not None or args.L is not None) and arms != ["gmnet"]:
        build_parser().error("--k/--L apply to the gmnet arm only; run the chemberta arm separately")
    k = args.k if args.k is not None else protocol.gmnet.get("k")
    L = args.L if args.L is not None else protocol.gmnet.get("L")
    pname = C.protocol_id(protocol, args.max_epochs, args.limit)
    overrides = {"max_epochs": args.max_epochs, "limit": args.limit}
    command = C.command_line("benchmarks.run", argv)
    vocab_file = C.resolve_vocab_file(args.vocab_file) if any(a in ARMS for a in arms) else None  # peers need none
    data_home = C.resolve_data_home(args.data_home)
    C.set_threads(args.threads)
    import torch

    threads = int(args.threads or torch.get_num_threads())

    def path_of(arm, ep, seed):
        if arm in PEER_ARMS:
            return peers.peer_result_path(args.results_dir, arm, ep, seed, args.limit)
        return C.result_path(args.results_dir, pname, arm, ep, seed, k, L)

    # how the transformer arms' fits run on top of the protocol (recorded among the overrides)
    how_fits_run = {**({"cuda_graphs": True} if args.cuda_graphs else {}),
                    **({"memory": str(args.descriptor_cache)} if args.descriptor_cache else {})}
    plan = [(ep, seed, arm) for ep in endpoints for seed in seeds for arm in arms]
    if args.dry_run:
        for ep, seed, arm in plan:
            path = path_of(arm, ep, seed)
            reason = C.redo_reason(path) if path.exists() and args.resume else None
            print(("todo   " if not path.exists() else f"redo ({reason}) " if reason else "exists ") + str(path))
        return 0

    failures, done, skipped = [], 0, 0
    cache = {}
    for ep, seed, arm in plan:
        path = path_of(arm, ep, seed)
        if args.resume and path.exists():
            reason = C.redo_reason(path)
            if reason is None:
                print(f"skip (exists): {path}", flush=True)
                skipped += 1
                continue
            # unreadable, incomplete, or made under parameters its protocol no longer builds: made again
            print(f"redo ({reason}): {path}", flush=True)
        if ep not in cache:
            cache.clear()  # one endpoint's data at a time
            try:
                cache[ep] = C.load_endpoint(ENDPOINTS[ep], data_home=data_home, limit=args.limit,
                                            download=args.allow_download)
                bad = cache[ep].invalid_smiles_rows
                if bad:  # also in each record: sizes.dropped_invalid_smiles, sizes.invalid_smiles_rows
                    print(f"{ep}: {len(bad)} SMILES RDKit cannot parse left out before the split "
                          f"(file rows {', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''})", flush=True)
            except Exception as exc:  # e.g. a data file that is not there: skip the endpoint
                cache[ep] = exc
                C.eprint(f"FAILED to load {ep}: {type(exc).__name__}: {exc}")
        if isinstance(cache[ep], Exception):
            exc = cache[ep]
            failures.append((arm, ep, seed, f"data not loaded: {type(exc).__name__}: {exc}"))
            continue
        if arm in PEER_ARMS:
            try:
                rec = peers.run_peer(arm, cache[ep], seed, threads=threads, command=command, limit=args.limit,
                                     chemprop_bin=args.chemprop_bin)
                C.write_json_atomic(path, rec)
                done += 1
                print(peers.summary_line(rec) + f" -> {path}", flush=True)
            except KeyboardInterrupt:
                raise
            except peers.ChempropNotFound as exc:
                failures.append((arm, ep, seed, f"{type(exc).__name__}: {exc}"))
                C.eprint(f"FAILED {arm} {ep} seed{seed}: {exc}")
            except Exception as exc:
                failures.append((arm, ep, seed, f"{type(exc).__name__}: {exc}"))
                C.eprint(f"FAILED {arm} {ep} seed{seed}:")
                traceback.print_exc()
            continue
        try:
            rec, est = run_one(protocol=protocol, protocol_name=pname, overrides=overrides, arm=arm, data=cache[ep],
                               seed=seed, k=k if arm == "gmnet" else None, L=L if arm == "gmnet" else None,
                               device=args.device, vocab_file=vocab_file, command=command, max_epochs=args.max_epochs,
                               verbose=args.verbose, snapshot_dir=args.snapshot_dir,
                               estimator_params=how_fits_run or None)
            C.write_json_atomic(path, rec)
            C.discard_snapshot(est)  # the result is stored: the snapshot has served
            done += 1
            print(summary_line(rec) + f" -> {path}", flush=True)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # keep going: one failing endpoint must not stop a sweep
            hint = ""
            if isinstance(exc, FileNotFoundError) and "best.pt" in str(exc):
                hint = " (no epoch had a finite validation score: did training diverge to NaN?)"
            failures.append((arm, ep, seed, f"{type(exc).__name__}: {exc}{hint}"))
            C.eprint(f"FAILED {arm} {ep} seed{seed}:")
            traceback.print_exc()
    print(f"{done} run(s) written, {skipped} skipped, {len(failures)} failed", flush=True)
    for arm, ep, seed, msg in failures:
        C.eprint(f"  failed: {arm} {ep} seed{seed}: {msg.splitlines()[0][:300]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
