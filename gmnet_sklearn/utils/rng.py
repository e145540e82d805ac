"""Restoring saved CUDA random states, shared by the estimators' training snapshots and the
pretraining checkpoints."""

from __future__ import annotations

__all__ = ["set_cuda_rng_states"]


def set_cuda_rng_states(states) -> None:
    """Restore per-device CUDA random states saved with ``torch.cuda.get_rng_state_all()``, on as
    many devices as both machines have: torch's ``set_rng_state_all`` fails on a host with fewer
    GPUs than the one that saved them (an invalid device ordinal), and a run resumed there must go
    on. Nothing happens without CUDA."""
    import torch

    if not states or not torch.cuda.is_available():
        return
    for i, state in enumerate(list(states)[:torch.cuda.device_count()]):
        torch.cuda.set_rng_state(state, device=i)
