"""Optional fused C++ kernels for CPU (compiled on first use with PyTorch's JIT extension builder).

docs/architecture.md, performance notes: eager PyTorch spends the attention step on memory-bound passes over
(B, H, T, T) tensors; a fused kernel keeps every pair in registers (`dual_ska.cpp`). The Phi
read-out builds its monomials per chunk of tokens in cache and multiplies them there
(`sphere_readout.cpp`, used by `ops.sphere_readout`). The build needs a C++ compiler
(and ninja) at first use; without them, or with ``GMNET_CPU_KERNELS=0``, `cpu_kernels_available()`
is False and the models use the eager fast path, which computes the same function.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["check_available", "cpu_kernels_available", "kernels_disabled", "load_extension"]

_log = logging.getLogger(__name__)
_SOURCE = Path(__file__).with_name("extension.cpp")  # includes dual_ska.cpp, sphere_readout.cpp, dropout.cpp
_lock = threading.Lock()
_module = None
_failed: str | None = None
_disabled = 0  # depth of `kernels_disabled` blocks


def _enabled() -> bool:
    return os.environ.get("GMNET_CPU_KERNELS", "1").strip().lower() not in ("0", "false", "off", "no")


def _cpu_tag() -> str:
    """Builds use -march=native, so the build folder is keyed by the CPU's feature flags; and by
    torch's and Python's versions: ninja tracks the sources, not torch's headers (``-isystem``),
    so a torch upgraded in place would otherwise load the old build against the new ABI; and by
    the source's path, so two installs (checkouts, environments) sharing torch's extension folder
    keep a build each instead of rebuilding over one another's at every first use."""
    import sys

    import torch

    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = next((line for line in text.splitlines() if line.startswith("flags")), text[:200])
    except OSError:
        import platform

        flags = platform.processor() or platform.machine()
    key = f"{flags}|torch {torch.__version__}|python {sys.version_info[:2]}|{_SOURCE.resolve()}"
    return hashlib.sha1(key.encode()).hexdigest()[:10]


@contextmanager
def kernels_disabled():
    """Within the block the kernels count as unavailable, so the models take the pure-PyTorch
    path of a machine without a compiler (benchmarks time both paths in one process)."""
    global _disabled
    _disabled += 1
    try:
        yield
    finally:
        _disabled -= 1


def _build_directory(name: str) -> Path | None:
    """The folder torch builds extension ``name`` in (``TORCH_EXTENSIONS_DIR`` or its user cache,
    as ``load`` would pick it); None where this torch does not say."""
    try:
        from torch.utils.cpp_extension import _get_build_directory  # private, stable since torch 1.x
    except ImportError:
        return None
    return Path(_get_build_directory(name, verbose=False))


@contextmanager
def _build_lock(build_dir: Path | None):
    """Hold an OS lock on ``build_dir`` while torch loads (and, the first time, builds) the
    extension, and clear torch's own lock file that a killed build left behind.

    Why: torch marks a build in progress with a ``lock`` file and every later ``load`` waits, with
    no timeout and no message, until that file is gone; a process killed mid-build (a job's time
    limit, a killed notebook) leaves it, and every fit after hangs. The OS releases a ``flock``
    when its process dies, so whoever holds this one knows no other gmnet_sklearn process is in
    ``load``, and a ``lock`` file it finds is stale."""
    try:
        import fcntl
    except ImportError:  # not POSIX: torch's lock file alone, as before
        fcntl = None
    if fcntl is None or build_dir is None:
        yield
        return
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / "gmnet_build.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            stale = build_dir / "lock"
            if stale.exists():
                _log.warning("removing %s, left by a build that was killed", stale)
                stale.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_extension():
    """The compiled extension module (gm/cpu/extension.cpp), built once per machine; None when it
    cannot be built or is disabled (``GMNET_CPU_KERNELS=0``, `kernels_disabled`)."""
    global _module, _failed
    if _disabled or not _enabled():  # the variable is read on every call: setting it later still counts
        return None
    if _module is not None or _failed is not None:
        return _module
    with _lock:
        if _module is None and _failed is None:
            try:
                from torch.utils.cpp_extension import load

                _log.info("building the fused CPU kernels (once per machine)")
                name = f"gmnet_cpu_kernels_{_cpu_tag()}"
                build_dir = _build_directory(name)
                with _build_lock(build_dir):
                    _module = load(
                        name=name,
                        sources=[str(_SOURCE)],
                        # -fopenmp: at::parallel_for is OpenMP in torch's CPU builds; without the
                        # flag the kernels' parallel loops would silently run on one thread.
                        extra_cflags=["-O3", "-march=native", "-fopenmp"],
                        extra_ldflags=["-fopenmp"],
                        build_directory=None if build_dir is None else str(build_dir),
                        verbose=False,
                    )
            except Exception as exc:  # no compiler, no ninja, read-only cache, ...
                _failed = f"{type(exc).__name__}: {exc}"
                _log.warning("fused CPU kernel unavailable, using the eager path (%s)", _failed.splitlines()[0])
    return _module


def cpu_kernels_available() -> bool:
    return load_extension() is not None


def check_available() -> None:
    """Raise if the extension cannot run (the ops call this before an explicit ``impl="cpu"``)."""
    if load_extension() is None:
        why = "disabled by GMNET_CPU_KERNELS=0" if not _enabled() else _failed or "disabled (kernels_disabled)"
        raise RuntimeError(f"the fused CPU kernel is not available: {why}")
