"""Files written whole or not at all: a reader (another process, a resumed run) never sees half
of one, whatever kills the writer. (Files a library writes itself, ``torch.save`` and
safetensors' ``save_file``, go to a temporary path and are renamed where they are written.)"""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_atomic(path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, on disk, then rename it over ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # the pid: two writers never share one
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves nothing behind
        raise


def write_json_atomic(path, obj, indent: int = 1) -> None:
    """``obj`` as JSON (Python's ``json.dumps``, NaN allowed), written with :func:`write_atomic`."""
    write_atomic(path, json.dumps(obj, indent=indent).encode())
