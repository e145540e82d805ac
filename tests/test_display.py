"""TrainingCurveDisplay, and scikit-learn's parity / ROC displays on the SMILES estimators (Agg)."""

import json
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gmnet_sklearn import GMNetClassifier, GMNetRegressor  # noqa: E402
from gmnet_sklearn.display import TrainingCurveDisplay  # noqa: E402

from ._smiles import SMILES, class_target, regression_target  # noqa: E402

TINY = dict(d_model=16, n_layers=1, n_heads=2, k=4, L=2, max_epochs=4, random_state=0, descriptors=False, fingerprint=False)


@pytest.fixture(scope="module")
def regressor():
    return GMNetRegressor(**TINY).fit(SMILES, regression_target(SMILES))


@pytest.fixture(scope="module")
def classifier():
    return GMNetClassifier(**TINY, n_estimators=2).fit(SMILES, class_target(SMILES))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_training_curve_from_regressor(regressor):
    history = regressor.history_
    disp = TrainingCurveDisplay.from_estimator(regressor)
    assert disp.figure_ is disp.ax_.figure and disp.metric_ax_ is not None
    assert set(disp.lines_) == {"train_loss", "valid_loss", "valid_rmse"}
    # two losses, the best epoch's line and (average_epochs=3, the default) the two other epochs averaged
    averaged = sorted(history[-1]["averaged_epochs"])
    assert len(averaged) == 3 and len(disp.ax_.get_lines()) == 5 and len(disp.metric_ax_.get_lines()) == 1
    np.testing.assert_allclose(disp.lines_["train_loss"].get_ydata(), history[:, "train_loss"])
    np.testing.assert_allclose(disp.lines_["valid_rmse"].get_ydata(), history[:, "valid_rmse"])
    np.testing.assert_array_equal(disp.lines_["valid_loss"].get_xdata(), np.arange(1, TINY["max_epochs"] + 1))
    best = regressor.best_epoch_
    assert history[:, "valid_rmse"][best - 1] == min(history[:, "valid_rmse"])
    assert list(disp.best_epoch_line_.get_xdata()) == [best, best]
    assert best in averaged and [line.get_xdata()[0] for line in disp.averaged_epoch_lines_] == \
        [e for e in averaged if e != best]
    labels = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert labels == ["train loss", "validation loss", "validation RMSE", f"best epoch ({best})",
                      f"epochs averaged ({', '.join(map(str, averaged))})"]
    assert disp.ax_.get_xlabel() == "epoch" and disp.metric_ax_.get_ylabel() == "validation RMSE"
    assert disp.ax_.get_title() == "GMNetRegressor"


def test_training_curve_on_given_axes_and_members(classifier):
    fig, axes = plt.subplots(1, 2)
    for member, ax in enumerate(axes):
        disp = TrainingCurveDisplay.from_estimator(classifier, member=member, ax=ax, name=f"member {member}")
        assert disp.ax_ is ax and disp.figure_ is fig and ax.get_title() == f"member {member}"
        assert set(disp.lines_) == {"train_loss", "valid_loss", "valid_roc_auc"}
        history = classifier.nets_[member].history
        np.testing.assert_allclose(disp.lines_["train_loss"].get_ydata(), history[:, "train_loss"])
        best_auc = max(history[:, "valid_roc_auc"])
        assert history[:, "valid_roc_auc"][disp.best_epoch - 1] == best_auc
    assert not np.allclose(axes[0].get_lines()[0].get_ydata(), axes[1].get_lines()[0].get_ydata())
    for bad in (2, True):  # True is not member 1
        with pytest.raises(ValueError, match="member must be"):
            TrainingCurveDisplay.from_estimator(classifier, member=bad)


def test_training_curve_follows_the_selection_metric_beside_a_users_scorer_and_takes_style_overrides():
    from skorch.callbacks import EpochScoring

    mae = EpochScoring("neg_mean_absolute_error", name="valid_mae", lower_is_better=True, on_train=False)
    est = GMNetRegressor(**TINY, n_estimators=2, callbacks=[mae]).fit(SMILES, regression_target(SMILES))
    assert "valid_mae" in est.nets_[1].history[-1]
    for member in (0, 1):
        disp = TrainingCurveDisplay.from_estimator(est, member=member)
        assert disp.metric_name == "valid_rmse"
        rmse = est.nets_[member].history[:, "valid_rmse"]
        assert rmse[disp.best_epoch - 1] == min(rmse)
    disp = disp.plot(loss_kwargs={"color": "k", "label": "loss", "linewidth": 3}, metric_kwargs={"marker": "x"})
    assert disp.lines_["train_loss"].get_color() == "k" and disp.lines_["train_loss"].get_label() == "loss"
    assert disp.lines_["valid_rmse"].get_marker() == "x"
    # the validation line shares the style but keeps its own label and colour
    valid = disp.lines_["valid_loss"]
    assert valid.get_linewidth() == 3 and valid.get_label() == "validation loss" and valid.get_color() != "k"
    disp = disp.plot(loss_kwargs={"color": "k"}, valid_loss_kwargs={"color": "r", "label": "held out"})
    assert disp.lines_["valid_loss"].get_color() == "r" and disp.lines_["valid_loss"].get_label() == "held out"
    # matplotlib's aliases (found in review: "c" beside the default "color" raised), and from_estimator
    # passes the styles on
    disp = TrainingCurveDisplay.from_estimator(est, loss_kwargs={"c": "k", "lw": 2}, valid_loss_kwargs={"c": "r"},
                                               metric_kwargs={"ms": 6})
    assert disp.lines_["train_loss"].get_color() == "k" and disp.lines_["valid_loss"].get_color() == "r"
    assert disp.lines_["valid_loss"].get_linewidth() == 2 and disp.lines_["valid_rmse"].get_markersize() == 6
    assert disp.ax_.get_zorder() > disp.metric_ax_.get_zorder()  # the legend is drawn above the metric's line


def test_a_loaded_estimator_plots_the_training_curve_it_was_saved_with(regressor, classifier, tmp_path):
    for est, name in ((regressor, "r"), (classifier, "c")):
        loaded = type(est).load(est.save(tmp_path / name))
        assert loaded.best_epoch_ == est.best_epoch_ and len(loaded.history_) == len(est.history_)
        for member in range(est.n_estimators):
            saved = TrainingCurveDisplay.from_estimator(est, member=member)
            again = TrainingCurveDisplay.from_estimator(loaded, member=member)
            for key in ("epochs", "train_loss", "valid_loss", "metric"):
                np.testing.assert_array_equal(getattr(again, key), getattr(saved, key))
            assert (again.metric_name, again.best_epoch) == (saved.metric_name, saved.best_epoch)
            plt.close("all")
    # a folder saved before save() kept the history: the best epoch still loads, the curve cannot
    (tmp_path / "r" / "history.json").unlink()
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    del config["histories"]
    (tmp_path / "r" / "config.json").write_text(json.dumps(config))
    old = GMNetRegressor.load(tmp_path / "r")
    assert old.best_epoch_ == regressor.best_epoch_ and not len(old.history_)
    with pytest.raises(ValueError, match="saved without its training history"):
        TrainingCurveDisplay.from_estimator(old)


def test_training_curve_without_validation():
    est = GMNetRegressor(**{**TINY, "max_epochs": 2}, valid_split=None).fit(SMILES[:20], regression_target(SMILES[:20]))
    disp = TrainingCurveDisplay.from_estimator(est)
    assert set(disp.lines_) == {"train_loss"} and disp.metric_ax_ is None and disp.best_epoch_line_ is None
    # from arrays, as scikit-learn's displays can be built
    disp = TrainingCurveDisplay(epochs=[1, 2, 3], train_loss=[3, 2, 1], valid_loss=[3, 2.5, 2.7],
                                metric=[0.6, 0.7, 0.65], metric_name="valid_roc_auc", best_epoch=2).plot()
    assert disp.metric_ax_.get_ylabel() == "validation ROC-AUC" and len(disp.ax_.get_lines()) == 3
    assert disp.averaged_epoch_lines_ == []
    disp = TrainingCurveDisplay(epochs=[1, 2, 3], train_loss=[3, 2, 1], best_epoch=2, averaged_epochs=[3, 2]).plot()
    assert [line.get_xdata()[0] for line in disp.averaged_epoch_lines_] == [3]
    assert [t.get_text() for t in disp.ax_.get_legend().get_texts()][-1] == "epochs averaged (2, 3)"


def test_sklearn_parity_and_roc_displays_take_smiles(regressor, classifier):
    from sklearn.metrics import PredictionErrorDisplay, RocCurveDisplay, roc_auc_score

    y = regression_target(SMILES)
    parity = PredictionErrorDisplay.from_estimator(regressor, SMILES, y, kind="actual_vs_predicted")
    np.testing.assert_allclose(parity.y_pred, regressor.predict(SMILES))
    labels = class_target(SMILES)
    roc = RocCurveDisplay.from_estimator(classifier, SMILES, labels)
    assert roc.roc_auc == pytest.approx(roc_auc_score(labels, classifier.predict_proba(SMILES)[:, 1]))


def test_clear_error_without_matplotlib(regressor, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r"pip install matplotlib"):
        TrainingCurveDisplay.from_estimator(regressor)


def test_kl_grid_example_draws_the_committed_grids(tmp_path, monkeypatch):
    import json
    import runpy
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    summary = repo / "benchmarks" / "results" / "summary.json"
    grids = json.loads(summary.read_text())["protocols"]["chemberta3"]["kl_grids"]
    monkeypatch.setattr(sys, "argv", ["plot_kl_grid.py", "--out", str(tmp_path), "--protocol", "chemberta3"])
    runpy.run_path(str(repo / "examples" / "plot_kl_grid.py"), run_name="__main__")
    assert (tmp_path / "kl_grid.png").stat().st_size > 10_000
    fig = plt.gcf()
    images = [ax for ax in fig.axes if ax.get_images()]
    assert len(images) == 4  # ESOL and BBBP, ours and the paper's
    esol_ours = images[0].get_images()[0].get_array()
    cell = grids["esol"]["k8_L3"]["ours"]["mean"]
    assert esol_ours[1, 1] == pytest.approx(cell)  # rows k = 6, 8, 10; columns L = 2, 3, 4


def test_plotting_again_on_the_same_axes_and_beside_the_callers_lines(regressor):
    """A second plot on the same axes added another twin axes; the legend dropped a line the
    caller had drawn; a Pipeline was "not fitted"; name="" could not clear the title (a review)."""
    import matplotlib.pyplot as plt
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    fig, ax = plt.subplots()
    (baseline,) = ax.plot([1, 2], [0.5, 0.5], label="baseline")
    disp = TrainingCurveDisplay.from_estimator(regressor, ax=ax)
    assert ax.get_title() == "GMNetRegressor"
    disp.plot(ax=ax, name="")
    assert len(fig.axes) == 2 and ax.get_title() == ""
    assert [t.get_text() for t in ax.get_legend().get_texts()][0] == "baseline"
    fig2, ax2 = plt.subplots()
    assert TrainingCurveDisplay.from_estimator(regressor, ax=ax2, name="").ax_.get_title() == ""
    # a Pipeline's model is plotted (its history is the model's own), as blend_weight and the
    # scorers act on it; a model of another kind is refused by its name
    piped = TrainingCurveDisplay.from_estimator(make_pipeline(FunctionTransformer(), regressor))
    assert piped.ax_.get_title() == "GMNetRegressor"
    np.testing.assert_array_equal(piped.train_loss, disp.train_loss)
    with pytest.raises(TypeError, match="not of a FunctionTransformer"):
        TrainingCurveDisplay.from_estimator(make_pipeline(regressor, FunctionTransformer()))
    plt.close(piped.figure_)
    plt.close(fig)
    plt.close(fig2)


def test_two_metrics_on_one_axes_get_a_twin_each_and_both_stay_in_the_legend(regressor, classifier):
    """A review: a classifier's curve drawn after a regressor's on one axes put ROC-AUC on the RMSE
    axis (relabelled), and the legend lost the first metric."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    first = TrainingCurveDisplay.from_estimator(regressor, ax=ax)
    second = TrainingCurveDisplay.from_estimator(classifier, ax=ax)
    assert second.metric_ax_ is not first.metric_ax_ and len(fig.axes) == 3
    assert first.metric_ax_.get_ylabel() == "validation RMSE" and second.metric_ax_.get_ylabel() == "validation ROC-AUC"
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "validation RMSE" in texts and "validation ROC-AUC" in texts
    assert first.metric_ax_.patch.get_visible() and not second.metric_ax_.patch.get_visible()
    TrainingCurveDisplay.from_estimator(regressor, ax=ax)  # the same metric again: its twin, no fourth axes
    assert len(fig.axes) == 3
    plt.close(fig)
