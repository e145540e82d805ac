"""Recipe round twenty-one in the report: the weights of several epochs averaged against the best
epoch's, on the valid split only (``benchmarks/epoch_average.py`` writes the cells and the table)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

EPOCH_AVERAGE_INTRO = """\
Recipe-search round twenty-one, on the DeepChem **valid** splits only (the test split is dropped as
the endpoint is read): one default fit per endpoint and seed, exactly as a user's `fit(X_train,
y_train)` (its internal split picks the epochs and the forest's weight), keeps every epoch's
weights; each variant loads its average and chooses the forest's weight again on the fit's own
split. `best` is the epoch alone (the defaults before, `tuned_avg1`), `top<k>` the k epochs with the
best internal-validation metric, `last<k>` the last k. Each cell: the variant's validation error
(RMSE, or 1 - ROC-AUC) over `best`'s, per seed, then averaged; below 1 is better. The rule was set
before any cell; `top3` met it and is the estimators' default (`average_epochs=3`, protocol `tuned`).
Written by `python -m benchmarks.epoch_average --endpoints ... --seeds 0 1 2 --threads 1` (then seeds 3 4 5;
each record keeps its command); this table is its `--summary`."""


def epoch_average_section(results_dir: Path) -> Optional[str]:
    """The round's table from the records under ``results_dir/epoch_average``; None without any."""
    from ..epoch_average import cells, summary

    recs = cells(Path(results_dir) / "epoch_average")  # (read once: the table is made from them)
    return summary(recs=recs) if recs else None
