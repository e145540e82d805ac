"""A read-only mapping that pickles and deep-copies: ``types.MappingProxyType`` does neither, so
an ``Endpoint`` or a preset could not go to a joblib worker, through ``copy.deepcopy`` or
``dataclasses.asdict``."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["FrozenDict"]


class FrozenDict(Mapping):
    """A ``dict``'s contents behind the read-only ``Mapping`` interface (``**`` unpacks it)."""

    __slots__ = ("_data",)

    def __init__(self, *args, **kwargs):
        self._data = dict(*args, **kwargs)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self):
        return type(self), (self._data,)

    # as MappingProxyType: a plain dict comes out of copy() and of | (PAPER_PROTOCOL | {"max_epochs": 5})
    def copy(self) -> dict:
        return dict(self._data)

    def __or__(self, other):
        return {**self._data, **other} if isinstance(other, Mapping) else NotImplemented

    def __ror__(self, other):
        return {**other, **self._data} if isinstance(other, Mapping) else NotImplemented
