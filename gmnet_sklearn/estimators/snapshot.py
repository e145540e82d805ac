"""Resumable training: a skorch callback that snapshots a fit after every epoch, so a fit that was
killed (a session that ended, a machine that was taken back) goes on from its last finished epoch
and ends exactly as the uninterrupted fit would have.

    from gmnet_sklearn.estimators.snapshot import TrainingSnapshot
    est = GMNetRegressor(..., random_state=0, callbacks=[TrainingSnapshot("runs/esol")])
    est.fit(X, y)        # killed at epoch 37 ...
    est.fit(X, y)        # ... later, in a fresh process: trains epochs 38-100 only

skorch's own ``Checkpoint`` + ``LoadInitState`` restores weights, optimizer and history but then
trains ``max_epochs`` *more* epochs and restarts the random streams. Here a snapshot holds
everything the rest of the fit depends on: weights, Adam state, history (losses, validation
metric, best-epoch flags), the best weights so far (for ``Checkpoint(load_best=True)``; with
``average_epochs``, those of every epoch kept for the average), the
scorers' best scores and early stopping's count, torch's global random state (dropout) and the training loader's shuffling
state. On CPU with the same thread count the resumed fit is bit-identical to the uninterrupted one
(tests/test_training_snapshot.py).

Each fit has its own file, named by a fingerprint of what defines it (estimator parameters, the
seed, the training and validation data), so one folder serves a whole ``GridSearchCV`` and a
snapshot is never applied to a different fit. The files a parameter names (``vocab_file``, the
``pretrained`` folder) are compared by content when resuming: one rewritten in place since makes
the fit start afresh, with a warning. Other callbacks are not part of the fingerprint (a kill
switch or a logger must not change it): keep one that changes training, such as gradient
clipping, the same across the parts of a fit, or give the fit another folder.
``<fingerprint>.pt`` is written atomically; ``<fingerprint>.json`` beside it says, without
loading torch, which fit it is and how far it got. The files stay after the fit (like skorch's ``Checkpoint``); refitting the same estimator on the
same data then returns the same model without training. Delete them (:meth:`discard`) when the
fitted model has been stored. A snapshot is a torch pickle (it holds the history and random
states): resume only from folders you wrote yourself.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from skorch.callbacks import Callback, EarlyStopping

from ..utils.files import write_atomic
from .epoch_average import EPOCH_FILE
from ..utils.rng import set_cuda_rng_states
from ..utils.stacklevel import _caller_stacklevel

SNAPSHOT_FORMAT = "gmnet_sklearn.training_snapshot.v1"
# What the other callbacks carry from epoch to epoch: scorers' and Checkpoint's best score,
# EarlyStopping's count of epochs without improvement and its threshold.
_CALLBACK_STATE = ("best_score_", "misses_", "dynamic_threshold_", "best_epoch_")


def fit_fingerprint(params: dict, seed: int, arrays: list) -> str:
    """Hex digest of a fit's definition: parameters (sorted, repr), seed and data arrays."""
    h = hashlib.sha256()
    h.update(repr(sorted((k, _stable_repr(v)) for k, v in params.items())).encode())
    h.update(str(int(seed)).encode())
    for a in arrays:
        if a is None:
            h.update(b"<none>")
            continue
        a = np.asarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        if a.dtype == object:  # numpy's str_ items as the str they equal (their repr says np.str_)
            items = [str(v) if isinstance(v, str) and type(v) is not str else v for v in a.ravel().tolist()]
            h.update(repr(items if a.ndim == 1 else np.asarray(items, dtype=object).reshape(a.shape).tolist()).encode())
        else:
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:20]


def _stable_repr(value) -> str:
    """``repr(value)``, but a function (a callable ``activation``) by its module, name and what it
    computes (its code, defaults and closure): its repr holds its address, another in every
    process, and no later fit would ever resume; its name alone would take two lambdas for one."""
    import functools

    if isinstance(value, functools.partial):
        return f"<partial {_stable_repr(value.func)} {value.args!r} {value.keywords!r}>"
    code = getattr(value, "__code__", None)
    if code is not None and hasattr(value, "__qualname__"):
        closure = [_stable_repr(cell.cell_contents) for cell in (value.__closure__ or ())]
        return (f"<callable {getattr(value, '__module__', None)}.{value.__qualname__} {_code_digest(code)} "
                f"{_stable_repr(value.__defaults__)} {closure}>")
    return repr(value)


def _code_digest(code) -> str:
    """Digest of a code object's bytecode, constants (nested code by its own digest: their repr
    holds an address) and names."""
    consts = [_code_digest(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts]
    return hashlib.sha256(code.co_code + repr((consts, code.co_names)).encode()).hexdigest()[:16]


class TrainingSnapshot(Callback):
    """Write a snapshot of the fit to ``dirname`` after every epoch; a later fit of the same
    estimator on the same data resumes from it (the estimators' ``fit`` does the resuming).

    ``meta``: a JSON-able dict stored with each part of the fit (e.g. the code version it ran),
    returned in ``parts`` of the estimator's ``resume_info_``. Each part also records when its
    ``fit`` call began and when it last saved a snapshot (``fit_started_unix``,
    ``last_saved_unix``), so the wall time of the earlier parts, their data preparation
    included, can be added up (:func:`earlier_fit_wall_seconds`).
    """

    def __init__(self, dirname, meta: Optional[dict] = None):
        self.dirname = dirname
        self.meta = meta

    # ---- set by the estimator's fit ---------------------------------------------------------
    def bind(self, *, fingerprint: str, summary: dict, max_epochs: int, loader, checkpoint_dir: Optional[str],
             fit_started: Optional[float] = None, inputs: Optional[dict] = None):
        """Called by ``fit`` before training: which fit this is, where its moving parts live,
        when (``time.time()``) the ``fit`` call began, and ``inputs``: digests of the files the fit
        reads (vocabulary, pretrained checkpoint), which a snapshot must share to be resumed."""
        self.fingerprint_ = fingerprint
        self.inputs_ = dict(inputs or {})
        self.fit_started_ = fit_started
        self.summary_ = summary
        self.max_epochs_ = int(max_epochs)
        self.loader_ = loader
        self.checkpoint_dir_ = checkpoint_dir
        self.parts_ = []
        self.elapsed_before_ = 0.0
        if not summary.get("member"):  # a fit's first (or only) ensemble member: a new fit
            self.fit_paths_ = []
        self.fit_paths_.append(self.path_)

    @property
    def path_(self) -> Path:
        return Path(self.dirname) / f"{self.fingerprint_}.pt"

    @property
    def info_path_(self) -> Path:
        return Path(self.dirname) / f"{self.fingerprint_}.json"

    def load(self) -> Optional[dict]:
        """The snapshot of this fit, or None when there is none."""
        if not self.path_.exists():
            return None
        try:
            state = torch.load(self.path_, map_location="cpu", weights_only=False)
        except Exception as exc:  # a copy cut short, another torch's or numpy's pickle
            raise ValueError(f"{self.path_} is not a readable training snapshot ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); delete it to start afresh") from exc
        if not isinstance(state, dict) or state.get("format") != SNAPSHOT_FORMAT or state.get("fingerprint") != self.fingerprint_:
            raise ValueError(f"{self.path_} is not a training snapshot of this fit; delete it to start afresh")
        return state

    def prepare(self) -> int:
        """Called by ``fit`` once the net is initialized: load this fit's snapshot, if any, to be
        restored when training begins (``on_train_begin``). Returns the epochs it has done;
        ``finished_`` says whether the fit ended there (early stopping) with epochs to spare."""
        self.pending_ = self.load()
        # (snapshots written before the inputs were recorded are taken as they are)
        saved = None if self.pending_ is None else self.pending_.get("inputs")
        if saved is not None and saved != self.inputs_:
            changed = sorted(k for k in set(saved) | set(self.inputs_) if saved.get(k) != self.inputs_.get(k))
            why = "other contents at the same path" + ("; or vocab_file=None, which meant a fitted vocabulary before it "
                                                       "meant DeepChem's" if "vocabulary" in changed else "")
            warnings.warn(f"{self.path_} is a snapshot of this fit's parameters and data, but its {' and '.join(changed)} "
                          f"changed since ({why}): it is not resumed; the fit starts afresh and replaces it", UserWarning,
                          stacklevel=_caller_stacklevel())
            self.pending_ = None
        self.finished_ = self.pending_ is not None and bool(self.pending_.get("stopped_early"))
        return 0 if self.pending_ is None else int(self.pending_["epochs_done"])

    def discard(self) -> None:
        """Delete the snapshots of the last fit that used this callback, one per ensemble member
        (once its result is stored). Searches fit clones, whose callbacks are clones too: the
        fitted estimators' ``resume_info_["snapshot"]`` names their files."""
        if not hasattr(self, "fit_paths_"):
            raise ValueError("this TrainingSnapshot has not been used by a fit (GridSearchCV and clone fit copies of "
                             "it: remove_snapshot(path) for the paths in a fitted estimator's resume_info_)")
        for path in self.fit_paths_:
            remove_snapshot(path)

    # ---- restoring --------------------------------------------------------------------------
    def restore(self, net, state: dict) -> None:
        """Put an initialized net back where the snapshot left it."""
        from skorch.history import History

        net.module_.load_state_dict(state["module"])
        net.optimizer_.load_state_dict(state["optimizer"])
        net.history_ = History(state["history"])
        # (snapshots written before early stopping kept the scorers' best scores only)
        states = state.get("callback_states") or {n: {"best_score_": v} for n, v in state.get("best_scores", {}).items()}
        for name, cb in net.callbacks_:
            for attr, value in states.get(name, {}).items():
                setattr(cb, attr, value)
        if state["best_params"] is not None and self.checkpoint_dir_ is not None:
            write_atomic(Path(self.checkpoint_dir_) / "best.pt", state["best_params"])
        for name, data in (state.get("epoch_params") or {}).items():  # AverageBestEpochs' (snapshots before: none)
            if self.checkpoint_dir_ is not None and EPOCH_FILE.fullmatch(name):  # (a file name, nothing else)
                write_atomic(Path(self.checkpoint_dir_) / name, data)
        torch.set_rng_state(state["torch_rng"])
        set_cuda_rng_states(state.get("cuda_rng"))  # (a host with fewer GPUs too)
        self.loader_.resume_state = state["loader_rng"]
        self.parts_ = list(state["parts"])
        self.elapsed_before_ = float(state["elapsed_s"])

    # ---- skorch hooks -----------------------------------------------------------------------
    def on_train_begin(self, net, **kwargs):
        # Last among the callbacks, so their own on_train_begin resets come before the restore.
        if getattr(self, "pending_", None) is not None:
            self.restore(net, self.pending_)
            self.pending_ = None
        self.t0_ = time.perf_counter()
        self.parts_.append({"from_epoch": len(net.history), "meta": self.meta,
                            "fit_started_unix": getattr(self, "fit_started_", None), "last_saved_unix": None})

    def on_epoch_end(self, net, **kwargs):
        self._write(net)

    def on_train_end(self, net, **kwargs):
        # Early stopping ends the fit inside an epoch's end, before this callback's turn: that
        # epoch is written here, marked so that a refit trains no further. (skorch also ends
        # training this way on Ctrl-C; then no early-stopping count is full and a refit resumes.)
        stopped = any(isinstance(cb, EarlyStopping) and cb.misses_ >= cb.patience
                      for _, cb in net.callbacks_ if hasattr(cb, "misses_"))
        if stopped:  # on the last epoch too: that epoch was not written either
            self._write(net, stopped_early=True)

    def _write(self, net, stopped_early: bool = False):
        best, epochs = None, {}
        if self.checkpoint_dir_ is not None and (Path(self.checkpoint_dir_) / "best.pt").exists():
            best = (Path(self.checkpoint_dir_) / "best.pt").read_bytes()
        if self.checkpoint_dir_ is not None:  # the epochs AverageBestEpochs keeps (average_epochs > 1)
            epochs = {p.name: p.read_bytes() for p in Path(self.checkpoint_dir_).iterdir() if EPOCH_FILE.fullmatch(p.name)}
        elapsed = self.elapsed_before_ + time.perf_counter() - self.t0_
        self.parts_[-1]["last_saved_unix"] = time.time()
        state: dict[str, Any] = {
            "format": SNAPSHOT_FORMAT,
            "fingerprint": self.fingerprint_,
            "inputs": self.inputs_,
            "epochs_done": len(net.history),
            "module": net.module_.state_dict(),
            "optimizer": net.optimizer_.state_dict(),
            "history": list(net.history),
            "best_params": best,
            "epoch_params": epochs,
            "callback_states": {name: {attr: getattr(cb, attr) for attr in _CALLBACK_STATE if hasattr(cb, attr)}
                                for name, cb in net.callbacks_},
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "loader_rng": self.loader_.generator_.get_state(),
            "parts": self.parts_,
            "elapsed_s": elapsed,
            "stopped_early": stopped_early,
        }
        Path(self.dirname).mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(state, buf)
        write_atomic(self.path_, buf.getvalue())
        info = {"format": SNAPSHOT_FORMAT, "fingerprint": self.fingerprint_, "fit": self.summary_,
                "epochs_done": len(net.history), "max_epochs": self.max_epochs_, "stopped_early": stopped_early,
                "elapsed_s": elapsed,
                "parts": self.parts_, "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_atomic(self.info_path_, json.dumps(info, indent=1, default=str).encode())


def parts_of_earlier_calls(parts: list, fit_started: Optional[float]) -> Optional[dict]:
    """The parts of the ``fit`` calls before the one that began at ``fit_started``, grouped by
    their call's start (``fit_started_unix``; the members of an ensemble share their call, so one
    call may hold several parts). None when a part was written without that time (a snapshot from
    before it was recorded)."""
    calls: dict = {}
    for part in parts:
        started = part.get("fit_started_unix")
        if fit_started is not None and started == fit_started:
            continue  # the call under way
        if started is None:
            return None
        calls.setdefault(started, []).append(part)
    return calls


def earlier_fit_wall_seconds(parts: list, fit_started: Optional[float]) -> Optional[float]:
    """Wall seconds of the ``fit`` calls before the one that began at ``fit_started``: for each,
    from the call's start to its last saved snapshot (its data preparation included, an epoch a
    kill cut short not). None when a part was written without these times."""
    calls = parts_of_earlier_calls(parts, fit_started)
    if calls is None or any(p.get("last_saved_unix") is None for ps in calls.values() for p in ps):
        return None
    return float(sum(max([started] + [p["last_saved_unix"] for p in ps]) - started for started, ps in calls.items()))


def remove_snapshot(path) -> None:
    """Delete a snapshot ``<fingerprint>.pt`` and its ``<fingerprint>.json``."""
    for suffix in (".pt", ".json"):
        Path(path).with_suffix(suffix).unlink(missing_ok=True)


def read_snapshot_infos(dirname) -> list:
    """The ``<fingerprint>.json`` descriptions in ``dirname`` (no torch needed), oldest first
    (by when each was last written)."""
    out = []
    for p in Path(dirname).glob("*.json") if Path(dirname).is_dir() else []:
        try:
            info, written = json.loads(p.read_text()), p.stat().st_mtime
        except (OSError, ValueError):
            continue
        if info.get("format") == SNAPSHOT_FORMAT and (p.with_suffix(".pt")).exists():
            out.append((written, p.name, info))
    return [info for _, _, info in sorted(out, key=lambda t: t[:2])]
