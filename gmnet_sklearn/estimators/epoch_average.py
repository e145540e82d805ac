"""AverageBestEpochs: the weights of a fit's best epochs, averaged when training ends.

A uniform average of the weights of several epochs of one training run (a "soup" of epochs:
Wortsman et al. 2022; stochastic weight averaging, Izmailov et al. 2018, averages along the
trajectory the same way) often generalises better than any one of them, at no training cost.
Recipe-search round twenty-one measured it on the validation splits
(``python -m benchmarks.epoch_average``). torch's ``swa_utils.AveragedModel`` keeps a running
average of every step it is given; here the epochs are chosen by their validation metric, known
only once each ends, so the kept epochs' weights are files and the average is made at the end.
"""

from __future__ import annotations

import io
import math
import numbers
import os
import re

import torch
from skorch.callbacks import Callback

from ..utils.files import write_atomic

#: The files the callback writes in its folder (a TrainingSnapshot carries them: ``EPOCH_FILE``).
EPOCH_FILE = re.compile(r"epoch_([0-9]+)\.pt")


class AverageBestEpochs(Callback):
    """skorch callback: keep the weights of the ``k`` epochs with the best ``monitor`` score
    (one file each in ``dirname``) and load their uniform average into the module when training
    ends. Floating-point tensors are averaged; any other (a counter) is the best epoch's.

    Which epochs are kept is read from the history on every call, and the weights from the files,
    so the callback holds no state of its own: a fit resumed from a ``TrainingSnapshot`` (which
    restores the history and carries the files) goes on as if it had not stopped. Epochs whose
    score is missing or not finite are never kept; ties go to the earlier epoch (as skorch's best
    flag). Place it after the callback that restores the best epoch, so its average is what stays,
    and before a ``TrainingSnapshot``, so the snapshot sees this epoch's file. The epochs averaged
    are recorded in the last history row as ``averaged_epochs``."""

    def __init__(self, monitor: str, k: int, lower_is_better: bool, dirname: str):
        self.monitor = monitor
        self.k = k
        self.lower_is_better = lower_is_better
        self.dirname = dirname

    def kept_epochs(self, net) -> list:
        """The epochs (1-based) whose weights are kept, best first."""
        # (numbers.Real: a scorer's numpy float counts as skorch's best flag counts it; bools do not)
        scored = [(float(row[self.monitor]), row["epoch"]) for row in net.history
                  if isinstance(row.get(self.monitor), numbers.Real) and not isinstance(row[self.monitor], bool)
                  and math.isfinite(row[self.monitor])]
        scored.sort(key=lambda s: (s[0] if self.lower_is_better else -s[0], s[1]))
        return [epoch for _, epoch in scored[:self.k]]

    def _path(self, epoch: int) -> str:
        return os.path.join(self.dirname, f"epoch_{epoch}.pt")

    def on_epoch_end(self, net, **kwargs):
        kept = self.kept_epochs(net)
        epoch = net.history[-1, "epoch"]
        if epoch in kept:
            state = {name: t.detach().cpu() for name, t in net.module_.state_dict().items()}
            write_atomic(self._path(epoch), _to_bytes(state))
        for name in os.listdir(self.dirname):  # an epoch no longer among the k best
            match = EPOCH_FILE.fullmatch(name)
            if match and int(match.group(1)) not in kept:
                os.remove(os.path.join(self.dirname, name))

    def on_train_end(self, net, **kwargs):
        kept = [epoch for epoch in self.kept_epochs(net) if os.path.exists(self._path(epoch))]
        if not kept:  # no finite score (RestoreBest warns), or interrupted before the first epoch ended
            return
        states = [torch.load(self._path(epoch), map_location="cpu", weights_only=True) for epoch in kept]
        net.module_.load_state_dict(average_states(states))
        net.history.record("averaged_epochs", kept)


def average_states(states: list) -> dict:
    """The uniform average of the floating-point tensors of ``states`` (state dicts of one
    module), summed in float64 and cast back, so a tensor equal in every state (a fixed buffer, a
    frozen layer) stays exactly what it was (a float32 mean of equal values can be 1 ulp off);
    every other tensor is the first state's."""
    return {name: torch.stack([s[name] for s in states]).double().mean(0).to(t.dtype) if t.is_floating_point()
            else t for name, t in states[0].items()}


def _to_bytes(state: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()
