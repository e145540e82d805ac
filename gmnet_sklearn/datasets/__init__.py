"""MoleculeNet benchmark loaders (DeepChem 2.8.0 ``dc.molnet`` files) and the endpoint table."""

from .endpoints import ENDPOINTS, Endpoint

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
    "ENDPOINTS",
    "Endpoint",
    "BASE_URL",
    "DOWNLOAD_TIMEOUT",
    "ChecksumError",
    "DatasetNotFoundError",
    "REGISTRY",
    "fetch_moleculenet",
    "get_cache_dir",
    "list_moleculenet",
]
