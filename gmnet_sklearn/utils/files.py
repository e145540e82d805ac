"""Files written whole or not at all: a reader (another process, a resumed run) never sees half
of one, whatever kills the writer; a new file gets the mode the umask gives (safetensors'
``save_file`` would make it owner-only, so :func:`write_safetensors` writes its bytes here instead).
And the readers of a model folder's files, whose errors name the file: a JSON or safetensors
parser's own message (``Unterminated string``, ``invalid header length``) does not."""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path


def write_atomic(path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, on disk, then rename it over ``path``.
    The temporary file is new (``O_EXCL``: never a file or link someone placed there; its name is
    random, so two writers never share one) and gets the mode the umask gives."""
    path = Path(path)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"write_atomic writes bytes, got {type(data).__name__}")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    # (O_BINARY: Windows would otherwise write "\n" bytes as "\r\n", as tempfile knows)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0),
                 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
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


def write_safetensors(path, tensors: dict, metadata: dict | None = None) -> None:
    """``tensors`` (all torch tensors or all numpy arrays) as a safetensors file, written with
    :func:`write_atomic`: whole or not at all, and readable by whoever the umask lets read the
    rest of the folder (safetensors' ``save_file`` creates its files 0600, so a model folder saved
    by one account could not be served by another). The file's bytes are held once in memory."""
    import torch

    if any(isinstance(v, torch.Tensor) for v in tensors.values()):
        from safetensors.torch import save
    else:
        from safetensors.numpy import save
    write_atomic(path, save(tensors, metadata=metadata))


def unreadable(path, exc: Exception) -> ValueError:
    """The ``ValueError`` for a file that is there but cannot be read as what its name says."""
    return ValueError(f"{path}: not readable ({type(exc).__name__}: {exc}); the file is cut short or not what "
                      "its name says")


def check_regular_file(path) -> Path:
    """``path``, where it is (or links to) a regular file: a FIFO would hang a reader and a
    device (``/dev/zero``) fill its memory, from a folder someone else wrote."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: not a regular file")
    return path


def read_json(path):
    """A JSON file's object; a file that is not JSON (or not a regular file) raises
    ``ValueError`` naming it."""
    check_regular_file(path)
    try:
        return json.loads(Path(path).read_text())
    except ValueError as exc:  # (UnicodeDecodeError is one)
        raise unreadable(path, exc) from exc


#: torch's dtypes by the names safetensors' headers give them
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                       "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def safetensors_shapes(path, dtypes: bool = False) -> dict[str, tuple]:
    """A safetensors file's tensor names and shapes (with ``dtypes``, (shape, torch dtype) pairs;
    None for a dtype torch has no name for here), from its header: the tensors are not read."""
    import safetensors
    from safetensors import safe_open

    check_regular_file(path)
    errors = (ValueError, OSError, *([safetensors.SafetensorError] if hasattr(safetensors, "SafetensorError") else []))
    try:
        with safe_open(str(path), framework="pt") as fh:
            slices = {name: fh.get_slice(name) for name in fh.keys()}
            shapes = {name: tuple(s.get_shape()) for name, s in slices.items()}
            if not dtypes:
                return shapes
            import torch

            named = {name: _SAFETENSORS_DTYPES.get(s.get_dtype()) for name, s in slices.items()}
            return {name: (shapes[name], getattr(torch, named[name]) if named[name] else None) for name in slices}
    except errors as exc:
        raise unreadable(path, exc) from exc


def check_weights_fit(paths, make_module, skip_tied: bool = False, n_layers: int | None = None) -> None:
    """Refuse the safetensors file ``paths`` (one, or several of one architecture: an ensemble's
    members, against one meta build) unless each holds the state (names, shapes and kinds of
    dtype: floating point, integer, bool; the precision may differ, as ``load_state_dict`` casts)
    of the module ``make_module()`` builds (with ``skip_tied``, less the tied copies named in its
    ``tied_keys``, which a pretrained folder does not store), before the module's tensors take any
    memory: it is built on torch's meta device and compared with the file's header. So a
    config.json from someone else that asks for larger tensors than its weights file holds fails
    here, not in the allocator. ``n_layers`` (the config's) is checked against the file's tensor
    count first: building a million layers would take hours even on the meta device. (What the
    module computes at construction and does not store, e.g. Chem-GMNet's harmonic tables, which
    grow with k and L, is not bounded by the file.)"""
    import torch

    headers = {}
    for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        headers[path] = safetensors_shapes(path, dtypes=True)
        if isinstance(n_layers, int) and n_layers > len(headers[path]):
            raise ValueError(f"{path} does not hold the weights of the model its config.json describes: "
                             f"{n_layers} layers, more than the file's {len(headers[path])} tensors")
    with torch.device("meta"):
        module = make_module()
    skip = set(getattr(module, "tied_keys", {})) if skip_tied else set()
    state = {name: t for name, t in module.state_dict().items() if name not in skip}
    for path, header in headers.items():
        _compare_weights(path, header, state)


def _compare_weights(path, have: dict, state: dict) -> None:
    """``check_weights_fit``'s comparison of one file's header with the meta-built state."""
    want = {name: tuple(t.shape) for name, t in state.items()}
    types = {name: dtype for name, (_, dtype) in have.items()}
    have = {name: shape for name, (shape, _) in have.items()}
    dtypes = [f"{name} holds {types[name]} where the model has {t.dtype}" for name, t in sorted(state.items())
              if name in types and _dtype_kind(types[name]) != _dtype_kind(t.dtype)]
    if have == want and not dtypes:
        return
    missing = sorted(set(want) - set(have))
    unexpected = sorted(set(have) - set(want))
    shapes = [f"{name} is {have[name]} where the model has {want[name]}" for name in sorted(set(want) & set(have))
              if have[name] != want[name]]
    raise ValueError(f"{path} does not hold the weights of the model its config.json describes: "
                     + "; ".join(f"{what}: {', '.join(items[:3])}{f' and {len(items) - 3} more' if len(items) > 3 else ''}"
                                 for what, items in (("missing", missing), ("unexpected", unexpected), ("shapes", shapes),
                                                     ("dtypes", dtypes))
                                 if items))


def _dtype_kind(dtype) -> str | None:
    import torch

    if dtype is None:
        return None
    return "bool" if dtype == torch.bool else "floating" if dtype.is_floating_point else "integer"


def read_safetensors(path, device: str = "cpu") -> dict:
    """A safetensors file's tensors, on ``device``; one that is not readable (safetensors'
    ``SafetensorError`` is no ``ValueError``) raises ``ValueError`` naming it. The file is read on
    the CPU, so a device's own errors (no CUDA, out of memory) are not put down to the file."""
    import safetensors
    from safetensors.torch import load_file

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such file")
    errors = (ValueError, OSError, *([safetensors.SafetensorError] if hasattr(safetensors, "SafetensorError") else []))
    try:
        tensors = load_file(str(path))
    except errors as exc:
        raise unreadable(path, exc) from exc
    return tensors if str(device) == "cpu" else {name: t.to(device) for name, t in tensors.items()}
