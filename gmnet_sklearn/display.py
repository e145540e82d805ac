"""TrainingCurveDisplay: loss and validation metric per epoch, in scikit-learn's ``*Display`` style.

    TrainingCurveDisplay.from_estimator(est)          # est: a fitted GMNetRegressor / Classifier

For parity and ROC plots use scikit-learn's own displays, which take the estimators as they are:
``sklearn.metrics.PredictionErrorDisplay.from_estimator(est, smiles, y)`` and
``RocCurveDisplay.from_estimator(clf, smiles, y)`` (``examples/plot_regression.py``, ``examples/plot_roc.py``).
matplotlib is an optional dependency (the ``plot`` extra: ``pip install -e ".[plot]"`` in a checkout,
or ``pip install matplotlib``), imported on use.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TrainingCurveDisplay"]


def _require_matplotlib(caller: str):
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"{caller} needs matplotlib, an optional dependency: "
                          'pip install matplotlib (the "plot" extra: pip install -e ".[plot]" in a checkout)') from exc
    return plt


def _metric_key(row: dict) -> str | None:
    """The validation metric the fit selected on (``valid_rmse``, ``valid_roc_auc``), if any."""
    # the scored metric has a "<name>_best" flag (as in SmilesNetBase.best_epoch_)
    keys = [k[: -len("_best")] for k in row if k.startswith("valid_") and k.endswith("_best") and k != "valid_loss_best"]
    return keys[0] if keys else None


_METRIC_LABELS = {"valid_rmse": "validation RMSE", "valid_roc_auc": "validation ROC-AUC"}


class TrainingCurveDisplay:
    """Training curve: train and validation loss per epoch (left axis), the validation metric
    (right axis), the best epoch and, where the estimator averaged several epochs' weights
    (``average_epochs``), those epochs.

    Build it with :meth:`from_estimator`, or from arrays and call :meth:`plot`.

    Parameters
    ----------
    epochs : array-like of int
        1-based epoch numbers.
    train_loss : array-like of float
        The training loss per epoch.
    valid_loss : array-like of float, default=None
        The validation loss per epoch (None without validation).
    metric : array-like of float, default=None
        The validation metric per epoch.
    metric_name : str, default=None
        Its history key (e.g. "valid_rmse").
    best_epoch : int, default=None
        The epoch with the best validation metric (None: not marked).
    averaged_epochs : array-like of int, default=None
        The epochs whose weights were averaged (``average_epochs`` > 1), marked with dotted lines
        beside ``best_epoch`` (None, or one epoch: not marked).
    estimator_name : str, default=None
        Shown in the title.

    Attributes
    ----------
    ax_ : matplotlib Axes
        The loss axes (set by :meth:`plot`, as every attribute below).
    metric_ax_ : matplotlib Axes or None
        The metric's twin axes (None without a metric).
    figure_ : matplotlib Figure
        The figure.
    lines_ : dict of Line2D
        The lines, by "train_loss", "valid_loss" and the metric's key.
    best_epoch_line_ : Line2D or None
        The vertical line at ``best_epoch`` (None if unmarked).
    averaged_epoch_lines_ : list of Line2D
        The dotted vertical lines at the averaged epochs other than ``best_epoch`` (empty if unmarked).
    """

    def __init__(self, *, epochs, train_loss, valid_loss=None, metric=None, metric_name=None, best_epoch=None,
                 averaged_epochs=None, estimator_name=None):
        self.epochs = epochs
        self.train_loss = train_loss
        self.valid_loss = valid_loss
        self.metric = metric
        self.metric_name = metric_name
        self.best_epoch = best_epoch
        self.averaged_epochs = averaged_epochs
        self.estimator_name = estimator_name

    @classmethod
    def from_estimator(cls, estimator, *, member: int = 0, ax=None, name=None, loss_kwargs=None,
                       valid_loss_kwargs=None, metric_kwargs=None):
        """Read ``history`` of ``estimator``'s net (ensemble member ``member``; the model inside a
        Pipeline, a fitted search or a ``FrozenEstimator``) and plot it on
        ``ax`` (a new figure if None), titled ``name`` (default: the estimator's class name); the
        ``*_kwargs`` style the lines, as in :meth:`plot`.

        The best epoch is ``estimator.best_epoch_`` (member 0; with ``average_epochs`` > 1 the best
        of the epochs averaged) or, for another member, the last epoch its history flags best; the
        epochs averaged are those the member's history records. Both are marked only when the fit
        selected on validation data.
        """
        _require_matplotlib(f"{cls.__name__}.from_estimator")
        from sklearn.utils.validation import check_is_fitted

        from .estimators._base import SmilesNetBase

        from .utils.meta import inner_model

        # a Pipeline's, a fitted search's or a FrozenEstimator's model: the history is the model's own
        # (check_is_fitted would call a fitted Pipeline unfitted)
        estimator = inner_model(estimator)
        if not isinstance(estimator, SmilesNetBase):
            raise TypeError(f"{cls.__name__} reads the training history of a GMNet or ChemBERTa estimator, not of a "
                            f"{type(estimator).__name__}")
        check_is_fitted(estimator, "nets_")
        if not (isinstance(member, (int, np.integer)) and not isinstance(member, bool)
                and 0 <= member < len(estimator.nets_)):
            raise ValueError(f"member must be an index of the estimator's {len(estimator.nets_)} member(s), got {member!r}")
        history = estimator.nets_[member].history
        if not len(history):
            if estimator.__dict__.get("_saved_best_epoch") is not None:
                raise ValueError("this estimator was loaded from a folder saved without its training history "
                                 "(by gmnet_sklearn before save() kept it): save it again from a fit to plot it")
            raise ValueError("the estimator's history is empty: no epoch was trained")
        # the metric the fit selected on (a user's EpochScoring may come first in the history row)
        selected = estimator.__dict__.get("_selection_metric")
        metric_name = (selected if selected not in (None, "valid_loss") and selected in history[-1]
                       else _metric_key(history[-1]))
        has_valid = "valid_loss" in history[-1]
        best = averaged = None
        if has_valid:
            averaged = history[-1].get("averaged_epochs")
            if member == 0:
                best = estimator.best_epoch_
            else:
                key = f"{selected or metric_name or 'valid_loss'}_best"
                flagged = [row["epoch"] for row in history if row.get(key)]
                best = flagged[-1] if flagged else None
        display = cls(
            epochs=np.asarray(history[:, "epoch"]),
            train_loss=np.asarray(history[:, "train_loss"], dtype=float),
            valid_loss=np.asarray(history[:, "valid_loss"], dtype=float) if has_valid else None,
            metric=np.asarray(history[:, metric_name], dtype=float) if metric_name else None,
            metric_name=metric_name,
            best_epoch=best,
            averaged_epochs=sorted(averaged) if averaged else None,
            estimator_name=type(estimator).__name__ if name is None else name,
        )
        return display.plot(ax=ax, loss_kwargs=loss_kwargs, valid_loss_kwargs=valid_loss_kwargs,
                            metric_kwargs=metric_kwargs)

    def plot(self, ax=None, *, name=None, loss_kwargs=None, valid_loss_kwargs=None, metric_kwargs=None):
        """Draw on ``ax`` (a new figure if None); returns the display with its artists set.

        ``name`` replaces the title (default: ``estimator_name``). ``loss_kwargs`` style both loss
        lines, except its ``label`` and ``color``, which are the training line's only (the two
        lines must stay apart); ``valid_loss_kwargs`` style the validation line on top of that;
        ``metric_kwargs`` the metric's line."""
        plt = _require_matplotlib(f"{type(self).__name__}.plot")
        from matplotlib.cbook import normalize_kwargs
        from matplotlib.lines import Line2D
        from matplotlib.ticker import MaxNLocator

        # the caller's styles override the defaults, as in scikit-learn's displays; matplotlib's
        # aliases ("c", "ms", "lw") are spelled out first, or a default and an alias would clash
        loss_kwargs, valid_loss_kwargs, metric_kwargs = (normalize_kwargs(kw or {}, Line2D)
                                                         for kw in (loss_kwargs, valid_loss_kwargs, metric_kwargs))
        if ax is None:
            _, ax = plt.subplots()
        epochs = np.asarray(self.epochs)
        self.lines_ = {}
        (self.lines_["train_loss"],) = ax.plot(epochs, self.train_loss, **{"label": "train loss", "color": "C0", **loss_kwargs})
        if self.valid_loss is not None:
            shared = {k: v for k, v in loss_kwargs.items() if k not in ("label", "color")}
            (self.lines_["valid_loss"],) = ax.plot(epochs, self.valid_loss, **{
                "label": "validation loss", "color": "C1", **shared, **valid_loss_kwargs})
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("loss")
        self.metric_ax_ = None
        if self.metric is not None:
            # plotted on these axes before: the twin made then, not one more on top of it
            label = _METRIC_LABELS.get(self.metric_name, self.metric_name)
            # the twin of the same metric only: another metric (a classifier's ROC-AUC beside a
            # regressor's RMSE) gets a twin of its own, its axis set off to the right (a review)
            twins = _twins(ax)
            same = [a for a in twins if a.get_ylabel() == label]
            self.metric_ax_ = same[0] if same else ax.twinx()
            if not same and twins:
                self.metric_ax_.spines["right"].set_position(("axes", 1.0 + 0.15 * len(twins)))
            (self.lines_[self.metric_name],) = self.metric_ax_.plot(
                epochs, self.metric, **{"label": label, "color": "C2", "marker": "o", "markersize": 3, **metric_kwargs})
            self.metric_ax_.set_ylabel(label)
        self.best_epoch_line_ = None
        if self.best_epoch is not None:
            self.best_epoch_line_ = ax.axvline(self.best_epoch, color="0.4", linestyle="--",
                                               label=f"best epoch ({self.best_epoch})")
        self.averaged_epoch_lines_ = []
        averaged = [] if self.averaged_epochs is None else sorted(int(e) for e in self.averaged_epochs)
        if len(averaged) > 1:  # (one epoch averaged is the best epoch alone)
            others = [e for e in averaged if self.best_epoch is None or e != self.best_epoch]
            label = f"epochs averaged ({', '.join(map(str, averaged))})"
            self.averaged_epoch_lines_ = [  # one legend entry for all of them
                ax.axvline(e, color="0.6", linestyle=":", label=label if i == 0 else "_" + label)
                for i, e in enumerate(others)]
        # the caller's own labelled artists on the axes first (scikit-learn's displays keep them), then
        # this display's lines, the metric's on the twin axes among them
        ours = (list(self.lines_.values()) + ([self.best_epoch_line_] if self.best_epoch_line_ is not None else [])
                + self.averaged_epoch_lines_[:1])
        # (and the labelled lines of the twins: an earlier display's metric)
        earlier = [h for a in [ax, *_twins(ax)] for h in a.get_legend_handles_labels()[0]]
        handles = [h for h in earlier if h not in ours + self.averaged_epoch_lines_] + ours
        ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="upper right")
        if self.metric_ax_ is not None:  # the legend (on ax) above the twin axes' line and markers
            twins = _twins(ax)
            ax.set_zorder(max(a.get_zorder() for a in twins) + 1)
            # the background moves below, to the first twin (drawn first) alone: a twin's background
            # drawn over another's would hide its line
            twins[0].patch.set_facecolor(ax.get_facecolor())
            for i, twin in enumerate(twins):
                twin.patch.set_visible(i == 0)
            ax.patch.set_visible(False)
        title = self.estimator_name if name is None else name
        if title is not None:  # ("" clears it)
            ax.set_title(title)
        self.ax_ = ax
        self.figure_ = ax.figure
        return self


def _twins(ax) -> list:
    """The axes ``twinx`` made on ``ax`` (same x axis and position): earlier displays' metric axes."""
    return [a for a in ax.figure.axes if a is not ax and a.get_shared_x_axes().joined(a, ax)
            and a.get_position().bounds == ax.get_position().bounds]
