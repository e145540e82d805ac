"""An exclusive ``flock`` on a file, for folders that one process at a time may write.

``fcntl.flock`` is the standard library's; a package such as ``filelock`` adds nothing the two
users here need (a lock held while a cache is built, or while a run trains). Where there is no
``fcntl`` (Windows) or the file system cannot lock (some NFS and Lustre mounts), the block runs
without a lock, with a warning saying how to stay safe.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Callable


@contextlib.contextmanager
def exclusive_lock(path: Path, *, wait: bool = True, held_error: Callable[[], Exception] | None = None,
                   without_lock: str = ""):
    """Hold an exclusive lock on ``path`` (created if absent) for the block. ``wait=False``: if
    another process holds it, raise ``held_error()`` at once instead of waiting. ``without_lock``:
    what the warning tells the user to do where the file system cannot lock."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        fcntl = None
    fh = None
    if fcntl is not None:
        try:
            fh = open(path, "a")
        except OSError as exc:  # a read-only folder
            warnings.warn(f"{path}: cannot open the lock ({exc}); going on without it. {without_lock}",
                          UserWarning, stacklevel=3)
    if fh is None:
        yield
        return
    with fh:
        locked = True
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            if held_error is None:
                raise
            raise held_error() from None
        except OSError as exc:  # a file system without flock
            warnings.warn(f"{path}: this file system cannot lock it ({exc}); going on without the lock. {without_lock}",
                          UserWarning, stacklevel=3)
            locked = False
        try:
            yield
        finally:
            if locked:
                fcntl.flock(fh, fcntl.LOCK_UN)


__all__ = ["exclusive_lock"]
