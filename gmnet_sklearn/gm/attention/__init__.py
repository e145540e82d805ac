"""The four sphere-attention variants of Chem-GMNet, sharing projections in `_base`."""

from ._base import SphereAttention
from .bidir_sfa import BidirSFA
from .dual_ska import DualSKA
from .gated_sfa import GatedSFA
from .ska import SKA

ATTENTION_VARIANTS = {"gated_sfa": GatedSFA, "bidir_sfa": BidirSFA, "ska": SKA, "dual_ska": DualSKA}


def make_attention(name: str, **kwargs) -> SphereAttention:
    try:
        cls = ATTENTION_VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown attention {name!r}; choose one of {sorted(ATTENTION_VARIANTS)}") from None
    return cls(**kwargs)


__all__ = ["SphereAttention", "GatedSFA", "BidirSFA", "SKA", "DualSKA", "ATTENTION_VARIANTS", "make_attention"]
