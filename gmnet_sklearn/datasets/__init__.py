"""MoleculeNet benchmark loaders (DeepChem 2.8.0 ``dc.molnet`` files)."""

from .moleculenet import (
    BASE_URL,
    DOWNLOAD_TIMEOUT,
    ChecksumError,
    DatasetNotFoundError,
    REGISTRY,
    fetch_moleculenet,
    get_cache_dir,
    list_moleculenet,
)

__all__ = [
    "BASE_URL",
    "DOWNLOAD_TIMEOUT",
    "ChecksumError",
    "DatasetNotFoundError",
    "REGISTRY",
    "fetch_moleculenet",
    "get_cache_dir",
    "list_moleculenet",
]
