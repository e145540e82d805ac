"""CUDA graphs of a model's forward and backward, one per batch shape: a step replays a graph or
two instead of launching its kernels one by one.

Why: at batch 32 a Chem-GMNet training step on an H100 is bound by kernel launches (about 900 of
them, each a few microseconds of host time, against about 270 for ChemBERTa), not by arithmetic.
A captured graph launches all of a pass's kernels with one host call.

``CUDAGraphs(module, pad_id)`` is called like the module with keyword tensors (``module(**batch)``):
- in training mode with gradients on, the forward and its backward are captured with
  ``torch.cuda.make_graphed_callables`` (autograd-aware: ``loss.backward()`` replays the backward
  graph and accumulates into the parameters' ``.grad``); the optimiser step, the loss and the
  gradient clipping stay eager (a few fused launches);
- otherwise (validation, prediction) the forward alone is captured with ``torch.cuda.graph``.
Graphs are keyed by the batch's tensor shapes and dtypes, the module's mode and which parameters
train (a Freezer/Unfreezer changes that), so a new shape is captured once and replayed after.
Sequence tensors are right-padded (``padded_width``) to a multiple of ``pad_to_multiple_of`` tokens
(as Hugging Face collators' ``pad_to_multiple_of``), and of a coarser step for long batches (an
eighth of the width's power of two: at most about 12% more positions), so length-bucketed batches
of any length make at most about 8 shapes per doubling of the width: 32 up to 512 tokens, few
enough to keep every graph (HIV's widths reach 400). The models are invariant to padding
(tests/test_cuda_graphs.py), so outputs do not change.

All graphs share one memory pool. That is safe because each replay is self-contained: a training
forward is always followed by its own backward before another graph replays, and nothing a graph
wrote is read after the next replay (outputs are copied out). Not on CUDA, or with ``enabled=False``,
the call is the module's own forward, unchanged (the plain reference the graphs are tested against).
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from contextlib import nullcontext

import torch
from torch import nn

#: Batches pad to a multiple of this many tokens (and of a coarser step when long: `padded_width`).
PAD_TO_MULTIPLE_OF = 8
#: The batch entries that run along the tokens (padded); others (descriptor rows) are left alone,
#: whatever their width.
SEQUENCE_KEYS = ("input_ids", "attention_mask", "conj_flags", "token_type_ids")


def padded_width(width: int, multiple: int = PAD_TO_MULTIPLE_OF) -> int:
    """``width`` rounded up to a multiple of max(``multiple``, 2**floor(log2(width)) / 8)."""
    if multiple <= 1 or width <= 0:
        return width
    step = max(multiple, (1 << (int(width).bit_length() - 1)) >> 3)
    return -(-width // step) * step


def autocast_context(device: torch.device | str, precision: str):
    """``torch.autocast`` for ``precision`` "bf16" on CUDA (cache off: graphs require it), else
    nothing. CPU stays float32: its fused kernels take float32/float64, and without bf16 matrix
    units bf16 would not be faster there."""
    if precision not in ("float32", "bf16"):
        raise ValueError(f"precision must be 'float32' or 'bf16', got {precision!r}")
    if precision == "bf16" and torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
    return nullcontext()


class _Positional(nn.Module):
    """``module(**dict(zip(names, args)))`` as a positional module (graphed callables take
    positional tensors only), under autocast when asked; its parameters are the module's."""

    def __init__(self, module: nn.Module, names: tuple[str, ...], precision: str):
        super().__init__()
        self.module, self.names, self.precision = module, names, precision

    def forward(self, *tensors):
        with autocast_context(tensors[0].device, self.precision):
            out = self.module(**dict(zip(self.names, tensors)))
        return _full_precision(out)


def _full_precision(out: torch.Tensor) -> torch.Tensor:
    """Autocast's half-precision outputs as float32; float32 and float64 as they are."""
    return out.float() if out.dtype in (torch.bfloat16, torch.float16) else out


class CUDAGraphs:
    """Replays ``module(**batch)`` from CUDA graphs captured per batch shape (see the module docstring)."""

    def __init__(self, module: nn.Module, pad_id: int = 0, pad_to_multiple_of: int = PAD_TO_MULTIPLE_OF,
                 precision: str = "float32", max_graphs: int = 128, enabled: bool = True, warmup: int = 3):
        autocast_context("cpu", precision)  # validates precision
        self.module, self.pad_id, self.multiple = module, int(pad_id), int(pad_to_multiple_of)
        self.precision, self.max_graphs, self.enabled, self.warmup = precision, int(max_graphs), enabled, int(warmup)
        self.graphs: OrderedDict = OrderedDict()
        self.captures = 0  # graphs captured so far (the benchmarks report it)
        self._pools: dict = {}  # one memory pool per GPU

    # -- padding ------------------------------------------------------------------------------
    def pad(self, batch: dict) -> dict:
        """Right-pad the token-wise entries of ``batch`` (`SEQUENCE_KEYS`) to ``padded_width(T)``
        positions: ``input_ids`` with the pad id, the others (mask, flags) with zeros."""
        ids = batch.get("input_ids")
        if ids is None or ids.dim() != 2 or self.multiple <= 1:
            return batch
        B, T = ids.shape
        extra = padded_width(T, self.multiple) - T
        if not extra:
            return batch
        out = {}
        for name, t in batch.items():
            if name in SEQUENCE_KEYS and isinstance(t, torch.Tensor) and tuple(t.shape[:2]) == (B, T):
                fill = self.pad_id if name == "input_ids" else 0
                t = torch.cat([t, t.new_full((B, extra, *t.shape[2:]), fill)], dim=1)
            out[name] = t
        return out

    # -- calls --------------------------------------------------------------------------------
    def __call__(self, **batch):
        tensors = list(batch.values())
        # eval mode with gradients on (attribution, say) runs eagerly: an eval graph is captured
        # without autograd, so its output would carry no gradient
        if (not self.enabled or not tensors or not all(isinstance(t, torch.Tensor) and t.is_cuda for t in tensors)
                or torch.cuda.is_current_stream_capturing() or (not self.module.training and torch.is_grad_enabled())):
            with autocast_context(tensors[0].device if tensors else "cpu", self.precision):
                out = self.module(**batch)
            return _full_precision(out)
        with torch.cuda.device(tensors[0].device):  # streams, pools and graphs of the batch's GPU (cuda:1 too)
            return self._replay(self.pad(batch))

    def _replay(self, batch: dict):
        names = tuple(batch)
        args = tuple(batch[n] for n in names)
        train = self.module.training and torch.is_grad_enabled()
        key = (args[0].device, train, self.module.training, torch.is_inference_mode_enabled(), names,
               tuple((tuple(t.shape), t.dtype) for t in args), tuple(p.requires_grad for p in self.module.parameters()))
        entry = self.graphs.get(key)
        if entry is None:
            entry = self.graphs[key] = self._capture_train(names, args) if train else self._capture_eval(names, args)
            self.captures += 1
            while len(self.graphs) > self.max_graphs:  # the least recently used shape goes
                self.graphs.popitem(last=False)
        else:
            self.graphs.move_to_end(key)
        if train:
            # a copy: callbacks may keep a batch's outputs after the next replay overwrites them
            return entry(*args).clone()
        static_in, static_out, graph = entry
        for s, t in zip(static_in, args):
            s.copy_(t)
        graph.replay()
        return static_out.clone()

    def _pool_handle(self):
        device = torch.cuda.current_device()
        if device not in self._pools:
            self._pools[device] = torch.cuda.graph_pool_handle()
        return self._pools[device]

    def _capture_train(self, names, args):
        wrapper = _Positional(self.module, names, self.precision).train(self.module.training)
        sample = tuple(t.clone() for t in args)
        options = {"num_warmup_iters": self.warmup}
        if "pool" in inspect.signature(torch.cuda.make_graphed_callables).parameters:
            options["pool"] = self._pool_handle()
        return torch.cuda.make_graphed_callables(wrapper, sample, **options)

    def _capture_eval(self, names, args):
        wrapper = _Positional(self.module, names, self.precision)
        static_in = tuple(t.clone() for t in args)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():  # lazy initialisation stays out of the capture
            for _ in range(max(self.warmup, 1)):
                wrapper(*static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph, pool=self._pool_handle()):
            static_out = wrapper(*static_in)
        return static_in, static_out, graph

    def clear(self):
        self.graphs.clear()

    def __getstate__(self):  # graphs live on one device in one process; they are recaptured on use
        return {**self.__dict__, "graphs": OrderedDict(), "_pools": {}}
