"""The one ``impl`` vocabulary of the ops, and how a model's ``impl`` reaches each op.

Every op (``OPS``) takes the same names: "auto" (the fastest form this device and build have),
"reference" (the plain form the fast ones are tested against), "parallel" (eager PyTorch: the
zonal forms of the attention, the slice-wise read-out, torch's own dropout), "cpu" (the C++
extension, `gm/cpu`) and "triton" (fused Triton kernels: DualSKA and the read-out). Each op's
``__init__`` holds its one dispatch from these names to its forms.

A model's (and a composite module's) ``impl`` is either one name, which picks the attention's
form as it always has while the read-outs and dropout stay on "auto" (so "reference" and a fast
path draw the same dropout masks where both run on the same layout: the encoder packs the tokens
on CPU for every name but "reference", and a packed tensor's masks differ; ``pack=False`` keeps
them alike), or a mapping from op to name, e.g.
``{"dual_ska": "parallel", "sphere_readout": "reference"}``, ops left out running "auto".
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from typing import Union

IMPLS = ("auto", "parallel", "reference", "triton", "cpu")
# "dual_ska" also names the branches of the ablation variants (Gated SFA, Bidir SFA, SKA).
OPS = ("dual_ska", "sphere_readout", "dropout")

Impl = Union[str, Mapping]


def check_impl(impl: str) -> str:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    return impl


def impl_for(impl: Impl, op: str) -> str:
    """The name ``op`` runs under a model-level ``impl`` (a name or a mapping {op: name})."""
    if isinstance(impl, Mapping):
        unknown = set(impl) - set(OPS)
        if unknown:
            raise ValueError(f"impl names unknown ops {sorted(unknown)}; the ops are {OPS}")
        return check_impl(impl.get(op, "auto"))
    check_impl(impl)
    return impl if op == "dual_ska" else "auto"


# What "auto" runs instead, per op, inside `prefer` (empty: each op's own choice).
_PREFERRED: dict[str, str] = {}


@contextmanager
def prefer(**forms: str):
    """Within the block, "auto" runs these forms, e.g. ``prefer(sphere_readout="triton")``: for
    code that does not pass ``impl`` down (the pretraining loop, the estimators), and for
    benchmarks that time one form inside whole models. Explicit names are not changed."""
    unknown = set(forms) - set(OPS)
    if unknown:
        raise ValueError(f"prefer() names unknown ops {sorted(unknown)}; the ops are {OPS}")
    for name in forms.values():
        check_impl(name)
    saved = dict(_PREFERRED)
    _PREFERRED.update(forms)
    try:
        yield
    finally:
        _PREFERRED.clear()
        _PREFERRED.update(saved)


def resolve_auto(op: str, impl: str) -> str:
    """``impl``, or the form `prefer` set for ``op`` when ``impl`` is "auto"."""
    return _PREFERRED.get(op, impl) if impl == "auto" else impl
