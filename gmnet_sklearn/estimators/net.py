"""The estimators' skorch net: skorch's ``NeuralNet`` whose forward can replay CUDA graphs and run
under bf16 autocast.

Only ``infer`` (skorch's one place where the module is called, for training and validation
batches alike) changes, so skorch's training loop, callbacks, checkpoints and pickling stay as
they are. The graphs (``gm/cuda_graphs.py``) are made for the current ``module_`` on first use and
never pickled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from skorch import NeuralNet
from skorch.utils import to_tensor

from ..gm.cuda_graphs import CUDAGraphs


class SmilesNet(NeuralNet):
    """``NeuralNet`` plus ``cuda_graphs`` (bool), ``precision`` ("float32" or "bf16"), ``pad_id``
    (the token that pads a batch to the graphs' widths, `gm.cuda_graphs.padded_width`) and
    ``layer_lr_decay`` (1: one learning rate; below 1, the encoder's layers get less the deeper
    they are, ``warm_start.layerwise_lr_scales``)."""

    def __init__(self, module, criterion, *, cuda_graphs: bool = True, precision: str = "float32", pad_id: int = 0,
                 layer_lr_decay: float = 1.0, **kwargs):
        super().__init__(module, criterion, **kwargs)
        self.cuda_graphs = cuda_graphs
        self.precision = precision
        self.pad_id = pad_id
        self.layer_lr_decay = layer_lr_decay

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's parameter groups, each split by layer-wise learning-rate factor: a group's
        ``lr`` is its factor times the base rate, and ``lr_scale`` keeps the factor for the
        schedule (``schedule.WarmupDecay``)."""
        named = list(named_parameters)
        args, kwargs = super().get_params_for_optimizer(prefix, named)
        decay = getattr(self, "layer_lr_decay", 1.0)  # nets pickled before it existed
        if decay == 1.0:
            return args, kwargs
        from .warm_start import layerwise_lr_scales

        scale_of = {id(param): scale for (_, param), scale in zip(named, layerwise_lr_scales([n for n, _ in named], decay))}
        groups = []
        for group in args[0]:
            by_scale = defaultdict(list)
            for param in group["params"]:
                by_scale[scale_of[id(param)]].append(param)
            base = group.get("lr", kwargs["lr"])
            groups += [{**group, "params": params, "lr": base * scale, "lr_scale": scale}
                       for scale, params in by_scale.items()]
        return (groups, *args[1:]), kwargs

    def initialize_optimizer(self, *args, **kwargs):
        """skorch's, but ``optimizer=None`` (a loaded model's nets: they predict) builds none: the
        first torch optimizer of a process imports ``torch._dynamo``, a second and more on CPU,
        which was most of loading a model in a fresh process."""
        if self.optimizer is None:
            self.optimizer_ = None
            return self
        return super().initialize_optimizer(*args, **kwargs)

    def check_training_readiness(self):
        # (skorch asks at initialize too, where a net without an optimizer is what load wants)
        if self.optimizer is None and getattr(self, "initialized_", False):
            from skorch.exceptions import SkorchTrainingImpossibleError

            raise SkorchTrainingImpossibleError("this net was loaded to predict and has no optimizer: fit the "
                                                "estimator to train it")
        super().check_training_readiness()

    def graphs(self) -> CUDAGraphs:
        """The graph cache of the current ``module_`` (a new one when skorch re-initialised it)."""
        graphs = getattr(self, "graphs_", None)
        if graphs is None or graphs.module is not self.module_:
            graphs = self.graphs_ = CUDAGraphs(self.module_, pad_id=self.pad_id, precision=self.precision,
                                               enabled=bool(self.cuda_graphs))
        return graphs

    def infer(self, x, **fit_params):
        on_cuda = str(self.device).startswith("cuda")  # on CPU both options stand aside: skorch's own call
        if on_cuda and (self.cuda_graphs or self.precision != "float32") and isinstance(x, Mapping) and not fit_params:
            return self.graphs()(**to_tensor(x, device=self.device))
        return super().infer(x, **fit_params)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("graphs_", None)  # device state of one process, remade on use
        return state
