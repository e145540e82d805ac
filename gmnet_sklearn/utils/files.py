"""Files written whole or not at all: a reader (another process, a resumed run) never sees half
of one, whatever kills the writer. (Files a library writes itself, ``torch.save`` and
safetensors' ``save_file``, go to a temporary path and are renamed where they are written.)
And the readers of a model folder's files, whose errors name the file: a JSON or safetensors
parser's own message (``Unterminated string``, ``invalid header length``) does not."""

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


def _unreadable(path, exc: Exception) -> ValueError:
    return ValueError(f"{path}: not readable ({type(exc).__name__}: {exc}); the file is cut short or not what "
                      "its name says")


def read_json(path):
    """A JSON file's object; a file that is not JSON raises ``ValueError`` naming it."""
    try:  # (a missing file: FileNotFoundError, which names it)
        return json.loads(Path(path).read_text())
    except ValueError as exc:  # (UnicodeDecodeError is one)
        raise _unreadable(path, exc) from exc


def read_safetensors(path, device: str = "cpu") -> dict:
    """A safetensors file's tensors, on ``device``; one that is not readable (safetensors'
    ``SafetensorError`` is no ``ValueError``) raises ``ValueError`` naming it. The file is read on
    the CPU, so a device's own errors (no CUDA, out of memory) are not put down to the file."""
    import safetensors
    from safetensors.torch import load_file

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such file")
    unreadable = (ValueError, OSError, *([safetensors.SafetensorError] if hasattr(safetensors, "SafetensorError") else []))
    try:
        tensors = load_file(str(path))
    except unreadable as exc:
        raise _unreadable(path, exc) from exc
    return tensors if str(device) == "cpu" else {name: t.to(device) for name, t in tensors.items()}


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask, read from /proc where it
    can be (``os.umask`` reads it only by setting it, for every thread at once)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o077)  # (no /proc: in the brief window another thread's new file is private, not open)
    os.umask(mask)
    return 0o666 & ~mask


def with_umask_mode(path) -> None:
    """Give a file the mode a new file gets under the umask: safetensors' ``save_file`` creates its
    files 0600 (owner only), so a model folder saved by one account could not be served by another
    whose umask lets it read the rest of the folder."""
    os.chmod(path, _new_file_mode())
