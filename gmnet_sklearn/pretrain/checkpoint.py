"""Atomic, resumable checkpoints of a pretraining run.

``checkpoint.pt`` holds the weights, the optimiser's and the scheduler's state, torch's random
states (dropout draws from the global generator), the step (from which the data position and
the masks follow, ``batches.py`` and ``masking.py``), the counters and the evaluation history.
It is written to a temporary file and renamed over the old one, so a run killed at any moment
leaves either the previous checkpoint or the new one, never half of one. It is stored with
``torch.save`` and read back with ``torch.load(weights_only=True)``: tensors, numbers, strings
and containers only, no code runs when it loads. One process trains a run folder at a time
(``run_lock``): two writing one checkpoint would leave a run that neither can resume.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from ..utils.files import write_atomic
from ..utils.locks import exclusive_lock
from ..utils.rng import set_cuda_rng_states

CHECKPOINT_FORMAT = "gmnet_sklearn.pretrain_checkpoint.v1"


class RunInProgressError(RuntimeError):
    """Another process is training the same run folder."""


def run_lock(output_dir: Path):
    """Held while this process trains ``output_dir``; a second process on it fails at once rather
    than waiting (a run may take hours) or writing the same checkpoint."""
    path = Path(output_dir) / ".run.lock"
    return exclusive_lock(path, wait=False, without_lock="Train this folder from one process only.",
                          held_error=lambda: RunInProgressError(
                              f"{output_dir}: another process is training this run (it holds {path}); "
                              "wait for it to stop, or use another output_dir"))


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    set_cuda_rng_states(state.get("cuda"))


def save_checkpoint(path, state: dict) -> None:
    buffer = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, **state}, buffer)
    write_atomic(path, buffer.getvalue())  # on disk before it replaces the old checkpoint


def load_checkpoint(path) -> dict | None:
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch's own errors do not name the file
        raise ValueError(f"{path}: not a readable pretraining checkpoint ({type(exc).__name__}: {exc}); "
                         "delete it to start the run again") from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a gmnet_sklearn pretraining checkpoint")
    return state


__all__ = ["save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]
