"""Optional fused Triton kernels (docs/architecture.md, performance notes: fusion on GPU is where the speed is).

Triton is imported lazily: this package imports, and `triton_available()` answers, without it.
Kernels run on CUDA tensors, or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``,
which must be set before `gmnet_sklearn.gm.ops.dual_ska.triton` is first imported: ``triton.jit``
reads it when the kernels are defined). The kernels live beside their op (`gm/ops/dual_ska/triton.py`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import lru_cache

__all__ = ["triton_available", "interpret_mode", "dot_precision", "module_settings"]


@contextmanager
def module_settings(namespace: dict, known: tuple, settings: dict, check=None):
    """A kernel module's settings (names in ``known``, globals in ``namespace``, read at each
    launch) set to ``settings`` for a block, restored after: the kernels' `tiles` contexts.
    ``check(name, value)`` refuses a bad value (after unknown names are refused)."""
    unknown = set(settings) - set(known)
    if unknown:
        raise ValueError(f"unknown tile settings {sorted(unknown)}; known: {known}")
    if check is not None:
        for name, value in settings.items():
            check(name, value)
    before = {name: namespace[name] for name in settings}
    namespace.update(settings)
    try:
        yield
    finally:
        namespace.update(before)


@lru_cache(maxsize=None)
def _triton_importable() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a broken install (missing driver libraries, ...)
        return False
    return True


def interpret_mode() -> bool:
    """True when the Triton interpreter is requested (kernels then run on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() not in ("", "0", "false", "off", "no")


def triton_available() -> bool:
    """Triton is importable and there is something to run it on: a CUDA device or the interpreter."""
    if not _triton_importable():
        return False
    import torch

    return torch.cuda.is_available() or interpret_mode()



def dot_precision() -> str:
    """The fused kernels' ``tl.dot`` precision: IEEE float32 while PyTorch's float32 matmul
    precision is "highest" (its default), TF32 tensor cores when it is "high" or "medium"
    (``torch.set_float32_matmul_precision``, or ``torch.backends.cuda.matmul.fp32_precision =
    "tf32"``), so one setting governs torch's matmuls and these kernels alike. Read when a kernel is launched (a CUDA graph keeps what its capture used)."""
    import torch

    # torch's newer switch (torch.backends.cuda.matmul.fp32_precision, "none" = its parent's) also
    # reflects the legacy one; mixing the two makes get_float32_matmul_precision raise, so read it first
    mp = getattr(getattr(torch.backends.cuda, "matmul", None), "fp32_precision", None)
    if mp is None:  # a torch before that API
        return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    if mp == "none":
        mp = getattr(torch.backends, "fp32_precision", "ieee")
    return "tf32" if mp == "tf32" else "ieee"
