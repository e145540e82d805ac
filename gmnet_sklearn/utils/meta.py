"""The model inside scikit-learn's wrappers: what a helper that reads or sets a fitted model's own
attributes (``n_tasks_``, ``forest_weight_``, the training history) must act on, not the wrapper,
which has none: the scorers, ``blend_weight`` and ``TrainingCurveDisplay`` unwrap. ``GMNetEmbedder``
does not: it feeds SMILES to the model's encoder, which would skip a Pipeline's earlier steps."""

from __future__ import annotations

__all__ = ["inner_model"]


def inner_model(est):
    """The estimator inside a Pipeline (its last step), a fitted search (``best_estimator_``) or a
    ``FrozenEstimator``, unwrapped to the end; anything else as it is."""
    while True:
        if hasattr(est, "steps"):
            est = est.steps[-1][1]
        elif hasattr(est, "best_estimator_"):
            est = est.best_estimator_
        elif type(est).__name__ == "FrozenEstimator":
            est = est.estimator
        else:
            return est
