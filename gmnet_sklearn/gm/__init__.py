"""The geometric library: sphere-native building blocks of Chem-GMNet (docs/architecture.md)."""

from . import functional

# The modules load on first use, so importing a lower layer (`gm.functional`, `gm.ops`) does not
# import the layers above it (the `gm.ops` docstring lists the layers).
_LAZY = {
    "GMNet": "transformer", "GMNetEncoder": "transformer", "GMEncoderLayer": "encoder_layer",
    "SHEmbedding": "embedding", "SHFFN": "harmonic_linear", "GMNetForMaskedLM": "lm_head", "SphereLMHead": "lm_head",
    "DualSKA": "attention", "BidirSFA": "attention", "GatedSFA": "attention", "SKA": "attention",
    "ATTENTION_VARIANTS": "attention", "make_attention": "attention",
}

__all__ = [
    "functional", "GMNet", "GMNetEncoder", "GMEncoderLayer", "SHEmbedding", "SHFFN", "GMNetForMaskedLM",
    "SphereLMHead", "DualSKA", "BidirSFA", "GatedSFA", "SKA", "ATTENTION_VARIANTS", "make_attention",
]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
