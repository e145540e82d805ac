"""The (k, L) ablation of the paper's appendix, as a scikit-learn ``GridSearchCV``.

    python -m benchmarks.ablation --endpoints esol bbbp --seeds 0 1 2 --protocol chemberta3 [--resume]

For each endpoint, ``GridSearchCV(GMNet*, {"k": [6, 8, 10], "L": [2, 3, 4], "random_state": seeds},
cv=PredefinedSplit(...), refit=False, n_jobs=1)`` runs over the concatenation train + test of the
DeepChem scaffold split, with ``test_fold`` -1 on the train rows (always trained on) and 0 on the
test rows (the one scored fold). The DeepChem valid split goes in as the fit parameters
``X_valid`` / ``y_valid``, so every fit restores its best validation epoch exactly as
``benchmarks.run`` does; a cell (k, L, seed) is the same computation as
``python -m benchmarks.run --arm gmnet --k K --L L --seeds SEED`` and is written to the same file,
``<results>/<protocol>/gmnet/<endpoint>/seed<s>_k<k>_L<L>.json``.

Scoring is multi-metric: ``test`` (neg RMSE or ROC-AUC on the test fold, original units) and
``valid`` (the same metric of the restored model on the DeepChem valid split: a custom scorer
that scores the fitted estimator on the valid split it holds). ``error_score=nan``: a cell whose
fit or scoring fails (e.g. non-finite predictions) is reported and written nowhere, and the
other cells go on. The per-cell JSON takes its test
and valid metrics and fit/score times from ``cv_results_``; the remaining fields (curves, best
epoch, per-task values, parameter count) are recorded by the scorer while the estimator is at
hand. Each cell is written as soon as it is scored (``grid_search.cv_results_verified`` false),
then rewritten from ``cv_results_`` when the grid finishes (true), so an interrupted grid loses at
most the cell in progress. ``--resume`` builds the grid from the missing cells only; with
``--snapshot-dir`` not even that: the cell in progress resumes from its last finished epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from . import _common as C
from .protocols import ENDPOINTS, KL_GRID_K, KL_GRID_L, PROTOCOLS, by_size, get_protocol, resolve_endpoints


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ablation", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoints", nargs="+", default=["esol", "bbbp"])
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="default: the protocol's seeds")
    p.add_argument("--protocol", default="chemberta3", choices=sorted(PROTOCOLS))
    p.add_argument("--k", nargs="+", type=int, default=list(KL_GRID_K), help="sphere dimensions (default 6 8 10)")
    p.add_argument("--L", nargs="+", type=int, default=list(KL_GRID_L), help="harmonic degrees (default 2 3 4)")
    p.add_argument("--device", default="auto")
    p.add_argument("--results-dir", default=str(C.DEFAULT_RESULTS_DIR))
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--resume", action="store_true", help="skip cells whose JSON already exists")
    p.add_argument("--snapshot-dir", default=None,
                   help="save a training snapshot after every epoch here; a cell killed mid-fit resumes from it")
    p.add_argument("--order", choices=("size", "given"), default="size")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--data-home", default=None)
    p.add_argument("--vocab-file", default=None)
    p.add_argument("--allow-download", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--verbose", type=int, default=0)
    return p


Cell = Tuple[int, int, int]  # (k, L, seed)


def missing_grid(cells: Sequence[Cell]) -> list:
    """A ``param_grid`` list covering exactly ``cells``: one dict per (k, L) with its seeds."""
    seeds_by_kl: Dict[Tuple[int, int], list] = defaultdict(list)
    for k, L, s in cells:
        seeds_by_kl[k, L].append(s)
    return [{"k": [k], "L": [L], "random_state": sorted(seeds)} for (k, L), seeds in sorted(seeds_by_kl.items())]


class CellRecorder:
    """Multi-metric scorer for the grid: ``test`` and ``valid`` (numbers for ``cv_results_``),
    and, on the side, the full result record of each fitted cell, written at once."""

    def __init__(self, *, data, protocol, protocol_name, overrides, results_dir, command, vocab_file, param_grid):
        self.data = data
        self.protocol = protocol
        self.protocol_name = protocol_name
        self.overrides = overrides
        self.results_dir = results_dir
        self.command = command
        self.vocab_file = vocab_file
        self.param_grid = param_grid
        self.records: Dict[Cell, dict] = {}
        self._last = None  # (estimator, record) of the cell being scored
        self.sign = -1.0 if data.endpoint.metric == "rmse" else 1.0  # GridSearchCV maximises

    @staticmethod
    def cell(est) -> Cell:
        p = est.get_params()
        return int(p["k"]), int(p["L"]), int(p["random_state"])

    def path(self, cell: Cell):
        k, L, seed = cell
        return C.result_path(self.results_dir, self.protocol_name, "gmnet", self.data.endpoint.name, seed, k, L)

    def _record(self, est, X, y) -> dict:
        if self._last is not None and self._last[0] is est:
            return self._last[1]
        data = self.data
        if len(X) != len(data.X_test) or not np.array_equal(np.asarray(X, dtype=object), data.X_test):
            raise RuntimeError("the scored fold is not the test split: check the PredefinedSplit")
        t0 = time.perf_counter()
        test = C.score(data.endpoint, est, data.X_test, data.y_test, data)
        valid = C.score(data.endpoint, est, data.X_valid, data.y_valid, data)
        score_s = time.perf_counter() - t0
        fit_s = float(sum(r.get("dur") or 0.0 for r in est.history_))  # provisional: epochs only
        wall = {"total": fit_s + score_s, "data_prep": data.prep_seconds, "fit": fit_s, "score": score_s}
        cell = self.cell(est)
        rec = C.build_record(source="benchmarks.ablation", protocol=self.protocol, protocol_name=self.protocol_name,
                             overrides=self.overrides, arm="gmnet", data=data, est=est, seed=cell[2], valid=valid,
                             test=test, wall=wall, command=self.command, vocab_file=self.vocab_file,
                             extra={"grid_search": {"cv_results_verified": False, "param_grid": self.param_grid,
                                                    "cv": "PredefinedSplit(train=-1, test=0) over train+test",
                                                    "fit_params": ["X_valid", "y_valid"],
                                                    "valid_metric_from": "custom scorer on the DeepChem valid split"}})
        self.records[cell] = rec
        self._last = (est, rec)
        C.write_json_atomic(self.path(cell), rec)
        C.discard_snapshot(est)  # the cell is stored: its training snapshot (if any) has served
        return rec

    def _signed(self, value) -> float:
        return float("nan") if value is None else self.sign * float(value)

    def test(self, est, X, y) -> float:
        return self._signed(self._record(est, X, y)["test_metric"])

    def valid(self, est, X, y) -> float:
        return self._signed(self._record(est, X, y)["valid_metric"])


def run_endpoint(*, endpoint, cells, protocol, protocol_name, overrides, results_dir, command, vocab_file,
                 data_home, limit, download, device, max_epochs, verbose=0, snapshot_dir=None) -> list:
    from sklearn.model_selection import GridSearchCV, PredefinedSplit

    data = C.load_endpoint(endpoint, data_home=data_home, limit=limit, download=download)
    n_tr, n_te = len(data.X_train), len(data.X_test)
    if len(data.X_valid) == n_tr + n_te:  # would be sliced as a per-sample fit parameter
        raise RuntimeError("valid split as long as train + test: GridSearchCV would split X_valid")
    X = np.concatenate([data.X_train, data.X_test])
    y = np.concatenate([data.to_fit(data.y_train), data.to_fit(data.y_test)])
    test_fold = np.concatenate([np.full(n_tr, -1), np.zeros(n_te, dtype=int)])
    grid = missing_grid(cells)
    snapshots = None if snapshot_dir is None else C.snapshot_dir(snapshot_dir, protocol_name, "gmnet", endpoint.name)
    base = C.make_estimator(protocol, "gmnet", endpoint, seed=cells[0][2], vocab_file=vocab_file, device=device,
                            max_epochs=max_epochs, verbose=verbose, snapshots=snapshots,
                            data_prep_seconds=data.prep_seconds)
    rec = CellRecorder(data=data, protocol=protocol, protocol_name=protocol_name, overrides=overrides,
                       results_dir=results_dir, command=command, vocab_file=vocab_file, param_grid=grid)
    search = GridSearchCV(base, grid, scoring={"test": rec.test, "valid": rec.valid}, cv=PredefinedSplit(test_fold),
                          refit=False, n_jobs=1, error_score=np.nan, return_train_score=False)
    search.fit(X, y, X_valid=data.X_valid, y_valid=data.to_fit(data.y_valid))

    res = search.cv_results_
    written, failed = [], []
    for i, params in enumerate(res["params"]):
        cell = (int(params["k"]), int(params["L"]), int(params["random_state"]))
        record = rec.records.get(cell)
        if record is None:  # the fit or its scoring failed (sklearn warned with the traceback)
            failed.append(cell)
            continue
        test = rec.sign * float(res["split0_test_test"][i])
        valid = rec.sign * float(res["split0_test_valid"][i])
        if record["test_metric"] is not None and not math.isclose(test, record["test_metric"], rel_tol=1e-9, abs_tol=1e-12):
            raise RuntimeError(f"cv_results_ and the recorded test metric disagree for {cell}")
        record["test_metric"] = None if math.isnan(test) else test
        record["valid_metric"] = None if math.isnan(valid) else valid
        # cv_results_ timed the last part of a resumed fit only; whole_wall adds the earlier ones
        record["wall_time_s"].update(C.whole_wall(data.prep_seconds, float(res["mean_fit_time"][i]),
                                                  float(res["mean_score_time"][i]), record.get("resumed")))
        record["grid_search"].update(cv_results_verified=True, cv_results_index=i,
                                     rank_test=int(res["rank_test_test"][i]), n_candidates=len(res["params"]))
        path = C.write_json_atomic(rec.path(cell), record)
        written.append((record, path))
    return written, failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    with C.git_at_start():  # records name the code this command started with
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    protocol = get_protocol(args.protocol)
    try:
        endpoints = resolve_endpoints(args.endpoints)
    except ValueError as exc:
        parser.error(str(exc))
    if args.order == "size":
        endpoints = by_size(endpoints)
    seeds = list(args.seeds) if args.seeds is not None else list(protocol.seeds)
    pname = C.protocol_id(protocol, args.max_epochs, args.limit)
    overrides = {"max_epochs": args.max_epochs, "limit": args.limit}
    command = C.command_line("benchmarks.ablation", argv)
    vocab_file = C.resolve_vocab_file(args.vocab_file)
    data_home = C.resolve_data_home(args.data_home)
    C.set_threads(args.threads)

    from .run import summary_line

    failed = []
    for ep in endpoints:
        all_cells = [(k, L, s) for k in args.k for L in args.L for s in seeds]
        todo = []
        for cell in all_cells:
            path = C.result_path(args.results_dir, pname, "gmnet", ep, cell[2], cell[0], cell[1])
            reason = C.redo_reason(path) if args.resume and path.exists() else None
            if args.resume and path.exists() and reason is None:
                verified = (json.loads(path.read_text()).get("grid_search") or {}).get("cv_results_verified")
                print(f"skip (exists{'' if verified is not False else ', from a grid that stopped: its time is the epochs and scoring only'}): {path}", flush=True)
            else:
                if reason is not None:
                    print(f"redo ({reason}): {path}", flush=True)
                todo.append(cell)
        if args.dry_run:
            print(f"{ep}: {len(todo)} cell(s) to run: {missing_grid(todo)}")
            continue
        if not todo:
            continue
        print(f"{ep}: GridSearchCV over {len(todo)} cell(s): {missing_grid(todo)}", flush=True)
        try:
            written, failed_cells = run_endpoint(endpoint=ENDPOINTS[ep], cells=todo, protocol=protocol, protocol_name=pname,
                                   overrides=overrides, results_dir=args.results_dir, command=command,
                                   vocab_file=vocab_file, data_home=data_home, limit=args.limit,
                                   download=args.allow_download, device=args.device, max_epochs=args.max_epochs,
                                   verbose=args.verbose, snapshot_dir=args.snapshot_dir)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            import traceback

            traceback.print_exc()
            failed.append((ep, f"{type(exc).__name__}: {exc}"))
            continue
        for record, path in written:
            print(summary_line(record) + f" -> {path}", flush=True)
        for k, L, seed in failed_cells:
            failed.append((ep, f"cell k={k} L={L} seed={seed} failed (see the FitFailedWarning / scoring warning above)"))
    for ep, msg in failed:
        C.eprint(f"failed: {ep}: {msg.splitlines()[0][:300]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
