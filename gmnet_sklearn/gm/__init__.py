"""The geometric library: sphere-native building blocks of Chem-GMNet (docs/architecture.md)."""

from . import functional
from .attention import ATTENTION_VARIANTS, SKA, BidirSFA, DualSKA, GatedSFA, make_attention
from .embedding import SHEmbedding
from .encoder_layer import GMEncoderLayer
from .harmonic_linear import SHFFN
from .lm_head import GMNetForMaskedLM, SphereLMHead
from .transformer import GMNet, GMNetEncoder

__all__ = [
    "functional", "GMNet", "GMNetEncoder", "GMEncoderLayer", "SHEmbedding", "SHFFN", "GMNetForMaskedLM",
    "SphereLMHead", "DualSKA", "BidirSFA", "GatedSFA", "SKA", "ATTENTION_VARIANTS", "make_attention",
]
