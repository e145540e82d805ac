"""``python -m benchmarks.report``."""

import sys

from . import main

sys.exit(main())
