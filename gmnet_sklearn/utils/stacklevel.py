"""Which frame a warning names: the first outside the package (the user's call, or the
scikit-learn tool that made it), as scikit-learn's own warnings point at the user's line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])  # .../gmnet_sklearn
_SET_OUTPUT_WRAPPER = str(Path("sklearn", "utils", "_set_output.py"))


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning raised by our caller to the first frame
    outside the ``gmnet_sklearn`` package (the user's ``fit`` call, or the scikit-learn tool
    that made it)."""
    frame = sys._getframe(2)  # the caller of the function that warns
    level = 2
    # (scikit-learn's set_output wrapper around transform and fit_transform is no caller either,
    # nor skorch, which calls the callbacks of the estimators' own nets)
    skorch = sys.modules.get("skorch")
    library = (_PACKAGE_DIR + os.sep,) + ((str(Path(skorch.__file__).resolve().parent) + os.sep,) if skorch else ())
    while frame is not None and (str(Path(frame.f_code.co_filename).resolve()).startswith(library)
                                 or frame.f_code.co_filename.endswith(_SET_OUTPUT_WRAPPER)):
        frame = frame.f_back
        level += 1
    return level
