"""Resumable training (TrainingSnapshot): a fit killed after epoch m and fitted again goes on from
epoch m + 1 and ends exactly where the uninterrupted fit ends."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, PredefinedSplit

from gmnet_sklearn import ChemBERTaClassifier, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.estimators.snapshot import TrainingSnapshot, earlier_fit_wall_seconds, read_snapshot_infos

from ._smiles import SMILES, class_target, regression_target

TINY = dict(d_model=16, n_layers=1, n_heads=2, k=3, L=1, batch_size=16, max_epochs=5, lr=1e-3, random_state=0)
TINY_CB = dict(d_model=16, n_layers=1, n_heads=2, intermediate_size=16, batch_size=16, max_epochs=5, lr=1e-3,
               random_state=0)
X = list(SMILES)
Y = regression_target(SMILES)
C = class_target(SMILES)


class Killed(Exception):
    """Stands for the process being killed: nothing after it runs."""


class KillAtEpoch(Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_begin(self, net, **kwargs):
        if len(net.history) == self.epoch:  # the new epoch is already in the history
            raise Killed(f"killed at the start of epoch {self.epoch}")


def _curves(est):
    keys = [k for k in est.history_[-1] if k not in ("dur", "batches")]
    return [{k: row.get(k) for k in keys} for row in est.history_]


def _assert_same_fit(a, b, X_eval):
    assert _curves(a) == _curves(b)  # losses, validation metric and best flags, epoch by epoch
    assert a.best_epoch_ == b.best_epoch_
    for (name, pa), pb in zip(a.net_.module_.state_dict().items(), b.net_.module_.state_dict().values()):
        assert torch.equal(pa, pb), name
    out = (lambda e: e.predict_proba(X_eval)) if hasattr(a, "predict_proba") else (lambda e: e.predict(X_eval))
    np.testing.assert_array_equal(out(a), out(b))


@pytest.mark.parametrize(
    "cls,params,y,kill_at,extra",
    [
        (GMNetRegressor, TINY, Y, 3, {}),  # internal scaffold split: best-epoch restore crosses the cut
        (GMNetRegressor, TINY, Y, 2, {"bucket_by_length": False, "valid_split": None}),  # plain shuffle, no selection
        (GMNetClassifier, TINY, C, 4, {}),
        (ChemBERTaClassifier, TINY_CB, C, 2, {}),
    ],
    ids=["gmnet-reg", "gmnet-reg-plain", "gmnet-clf", "chemberta-clf"],
)
def test_killed_then_resumed_fit_equals_the_uninterrupted_fit(cls, params, y, kill_at, extra, tmp_path):
    params = {**params, **extra}
    full = cls(**params).fit(X, y)
    assert full.resume_info_ is None

    snap = TrainingSnapshot(tmp_path / "snaps", meta={"part": "first"})
    with pytest.raises(Killed):
        cls(**params, callbacks=[snap, KillAtEpoch(kill_at)]).fit(X, y)
    (info,) = read_snapshot_infos(tmp_path / "snaps")
    assert info["epochs_done"] == kill_at - 1 and info["max_epochs"] == params["max_epochs"]
    assert info["fit"]["estimator"] == cls.__name__ and info["fit"]["random_state"] == 0

    resumed = cls(**params, callbacks=[TrainingSnapshot(tmp_path / "snaps", meta={"part": "second"})]).fit(X, y)
    ri = resumed.resume_info_
    assert ri["resumed_from_epoch"] == kill_at - 1 and ri["fit_seconds_before"] > 0
    assert [{k: part[k] for k in ("from_epoch", "meta")} for part in ri["parts"]] == [
        {"from_epoch": 0, "meta": {"part": "first"}}, {"from_epoch": kill_at - 1, "meta": {"part": "second"}}]
    # each part's fit call timed from its start to its last saved epoch: the first part's whole
    # time (data preparation included) is at least its epochs' and is what the resumed fit reports
    first, second = ri["parts"]
    assert first["fit_started_unix"] < first["last_saved_unix"] <= second["fit_started_unix"] < second["last_saved_unix"]
    assert ri["fit_wall_seconds_before"] == pytest.approx(first["last_saved_unix"] - first["fit_started_unix"])
    assert ri["fit_wall_seconds_before"] >= ri["fit_seconds_before"]
    assert [row["epoch"] for row in resumed.history_] == list(range(1, params["max_epochs"] + 1))
    _assert_same_fit(resumed, full, X[:40])


def test_resuming_without_the_snapshot_would_differ(tmp_path):
    """The check above can fail: restarting from a snapshot without its random streams (what
    skorch's LoadInitState does) gives a different fit."""
    full = GMNetRegressor(**TINY).fit(X, Y)
    snap = TrainingSnapshot(tmp_path)
    with pytest.raises(Killed):
        GMNetRegressor(**TINY, callbacks=[snap, KillAtEpoch(3)]).fit(X, Y)
    state = torch.load(snap.path_, weights_only=False)
    state["torch_rng"] = torch.manual_seed(123).get_state()  # dropout masks no longer the same
    torch.save(state, snap.path_)
    resumed = GMNetRegressor(**TINY, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert _curves(resumed)[:2] == _curves(full)[:2]  # the first two epochs come from the snapshot
    assert _curves(resumed)[2:] != _curves(full)[2:]


def test_a_snapshot_is_only_used_by_the_same_fit(tmp_path):
    snap = TrainingSnapshot(tmp_path)
    with pytest.raises(Killed):
        GMNetRegressor(**TINY, callbacks=[snap, KillAtEpoch(3)]).fit(X, Y)
    # another seed, other data, another k: fresh fits (each with its own file)
    for est, data in [(GMNetRegressor(**{**TINY, "random_state": 1}), Y), (GMNetRegressor(**TINY), Y + 1.0),
                      (GMNetRegressor(**{**TINY, "k": 4}), Y)]:
        est.set_params(callbacks=[TrainingSnapshot(tmp_path)]).fit(X, data)
        assert est.resume_info_["resumed_from_epoch"] is None and len(est.history_) == TINY["max_epochs"]
    assert len(read_snapshot_infos(tmp_path)) == 4
    # A finished fit's snapshot is kept: fitting again returns the same model without training.
    again = GMNetRegressor(**{**TINY, "k": 4}, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert again.resume_info_["resumed_from_epoch"] == TINY["max_epochs"]
    snap_cb = [cb for _, cb in again.net_.callbacks_ if isinstance(cb, TrainingSnapshot)][0]
    snap_cb.discard()
    assert len(read_snapshot_infos(tmp_path)) == 3


def test_grid_search_cells_resume_separately(tmp_path):
    """One snapshot folder for a whole GridSearchCV: each cell has its own file; killed during the
    second cell, the rerun skips the finished cell's training and resumes the second."""
    n_train = 2 * len(X) // 3
    test_fold = np.r_[np.full(n_train, -1), np.zeros(len(X) - n_train, dtype=int)]
    grid = {"k": [3, 4]}

    def search(callbacks):
        est = GMNetRegressor(**{**TINY, "max_epochs": 3}, valid_split=None, callbacks=callbacks)
        return GridSearchCV(est, grid, cv=PredefinedSplit(test_fold), refit=False, error_score="raise",
                            scoring="neg_root_mean_squared_error").fit(X, Y)

    full = search(None)

    class KillSecondCell(Callback):
        fits = 0  # GridSearchCV copies the callback into each cell: count on the class

        def on_train_begin(self, net, **kwargs):
            KillSecondCell.fits += 1

        def on_epoch_begin(self, net, **kwargs):
            if KillSecondCell.fits == 2 and len(net.history) == 2:
                raise Killed("second cell, start of epoch 2")

    with pytest.raises(Killed):
        search([TrainingSnapshot(tmp_path), KillSecondCell()])
    infos = {i["fit"]["k"]: i["epochs_done"] for i in read_snapshot_infos(tmp_path)}
    assert infos == {3: 3, 4: 1}
    again = search([TrainingSnapshot(tmp_path)])
    np.testing.assert_array_equal(again.cv_results_["mean_test_score"], full.cv_results_["mean_test_score"])


def test_estimator_with_snapshot_pickles_and_clones(tmp_path):
    est = GMNetRegressor(**{**TINY, "max_epochs": 2}, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.predict(X[:10]), est.predict(X[:10]))
    c = clone(est)
    assert isinstance(c.callbacks[0], TrainingSnapshot) and c.callbacks[0].dirname == tmp_path
    assert json.loads(Path(est.resume_info_["snapshot"]).with_suffix(".json").read_text())


def test_more_than_one_snapshot_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="at most one TrainingSnapshot"):
        GMNetRegressor(**TINY, callbacks=[TrainingSnapshot(tmp_path), TrainingSnapshot(tmp_path / "b")]).fit(X, Y)


def test_discard_deletes_every_members_snapshot_and_a_named_snapshot_is_one(tmp_path):
    """An ensemble's members each have a snapshot: discard deletes them all. A snapshot passed
    as skorch's (name, callback) is bound as one passed as such."""
    snap = TrainingSnapshot(tmp_path)
    est = GMNetRegressor(**{**TINY, "max_epochs": 2, "n_estimators": 2}, callbacks=[("snap", snap)]).fit(X, Y)
    assert len(est.resume_info_["snapshot"]) == 2 and len(read_snapshot_infos(tmp_path)) == 2
    snap.discard()
    assert read_snapshot_infos(tmp_path) == [] and not list(tmp_path.glob("*.pt"))
    with pytest.raises(ValueError, match="has not been used by a fit"):
        TrainingSnapshot(tmp_path).discard()
    with pytest.raises(ValueError, match="at most one TrainingSnapshot"):
        GMNetRegressor(**TINY, callbacks=[("a", TrainingSnapshot(tmp_path)), TrainingSnapshot(tmp_path / "b")]).fit(X, Y)


def test_a_snapshot_resumes_under_another_n_jobs(tmp_path):
    # n_jobs is how a fit runs (threads), not what it computes: the snapshot is the same fit's
    with pytest.raises(Killed):
        GMNetRegressor(**TINY, callbacks=[TrainingSnapshot(tmp_path), KillAtEpoch(2)]).fit(X, Y)
    est = GMNetRegressor(**TINY, n_jobs=1, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert est.resume_info_["resumed_from_epoch"] == 1 and len(read_snapshot_infos(tmp_path)) == 1  # killed in epoch 2


def test_an_early_stopped_fit_is_snapshotted_and_a_refit_trains_no_further(tmp_path):
    """Early stopping ends the fit inside its last epoch's end, before the snapshot's turn: that
    epoch is written at the end of training, marked, and the refit returns the same model."""
    params = {**TINY, "max_epochs": 12, "patience": 1, "lr": 1e-30}  # nothing improves after epoch 1
    full = GMNetRegressor(**params).fit(X, Y)
    assert len(full.history_) < params["max_epochs"]
    first = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    (info,) = read_snapshot_infos(tmp_path)
    assert info["epochs_done"] == len(full.history_) and info["stopped_early"]
    _assert_same_fit(first, full, X[:40])
    again = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert again.resume_info_["resumed_from_epoch"] == len(full.history_)
    assert len(again.resume_info_["parts"]) == 2 and again.resume_info_["parts"][1]["from_epoch"] == len(full.history_)
    _assert_same_fit(again, full, X[:40])


def test_a_random_state_object_resumes_too(tmp_path):
    """The seed a RandomState gives identifies the fit; its repr (an address) does not."""
    with pytest.raises(Killed):
        GMNetRegressor(**{**TINY, "random_state": np.random.RandomState(0)},
                       callbacks=[TrainingSnapshot(tmp_path), KillAtEpoch(3)]).fit(X, Y)
    resumed = GMNetRegressor(**{**TINY, "random_state": np.random.RandomState(0)},
                             callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert resumed.resume_info_["resumed_from_epoch"] == 2 and len(read_snapshot_infos(tmp_path)) == 1


def test_earlier_fit_wall_seconds_counts_each_earlier_call_once():
    """Members of an ensemble share their fit call; the call under way is left out; a part written
    before the times were recorded makes the sum unknown rather than short."""
    part = lambda started, saved: {"from_epoch": 0, "meta": None, "fit_started_unix": started,  # noqa: E731
                                   "last_saved_unix": saved}
    parts = [part(100.0, 160.0), part(300.0, 330.0), part(500.0, None),  # member 0: two earlier calls, this one
             part(100.0, 190.0), part(300.0, 310.0), part(500.0, None)]  # member 1
    assert earlier_fit_wall_seconds(parts, 500.0) == pytest.approx(90.0 + 30.0)
    assert earlier_fit_wall_seconds([{"from_epoch": 0, "meta": None}, part(500.0, None)], 500.0) is None


def test_a_vocab_file_rewritten_in_place_is_not_resumed_from(tmp_path):
    from gmnet_sklearn.tokenizer import SmilesTokenizer

    vocab = tmp_path / "vocab.txt"
    tokens = list(SmilesTokenizer().fit(X).vocabulary_)
    vocab.write_text("\n".join(tokens) + "\n")
    params = {**TINY, "vocab_file": str(vocab)}
    with pytest.raises(Killed):
        GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path / "s"), KillAtEpoch(3)]).fit(X, Y)
    vocab.write_text("\n".join(tokens[:5] + tokens[5:][::-1]) + "\n")  # the same tokens, other ids
    fresh = GMNetRegressor(**params).fit(X, Y)
    with pytest.warns(UserWarning, match="its vocabulary changed since"):
        again = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path / "s")]).fit(X, Y)
    assert again.resume_info_["resumed_from_epoch"] is None
    _assert_same_fit(again, fresh, X)


def test_early_stopping_on_the_last_epoch_is_snapshotted(tmp_path):
    """EarlyStopping ends the fit inside the last epoch's end, before the snapshot's turn: that
    epoch is written all the same, so a refit trains nothing."""
    from skorch.callbacks import EarlyStopping

    class StopAtLast(EarlyStopping):  # full patience exactly at the last epoch
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == TINY["max_epochs"]:
                self.misses_ = self.patience
                raise KeyboardInterrupt
            self.misses_ = 0

    est = GMNetRegressor(**TINY, callbacks=[StopAtLast(patience=1), TrainingSnapshot(tmp_path)]).fit(X, Y)
    (info,) = read_snapshot_infos(tmp_path)
    assert info["epochs_done"] == TINY["max_epochs"] and info["stopped_early"]
    again = GMNetRegressor(**TINY, callbacks=[StopAtLast(patience=1), TrainingSnapshot(tmp_path)]).fit(X, Y)
    assert again.resume_info_["resumed_from_epoch"] == TINY["max_epochs"]
    _assert_same_fit(again, est, X)


def test_snapshot_infos_come_oldest_first(tmp_path):
    import os

    for seed in (0, 1, 2):
        GMNetRegressor(**{**TINY, "max_epochs": 1, "random_state": seed}, callbacks=[TrainingSnapshot(tmp_path)]).fit(X, Y)
    # written in the reverse order of their file names (hashes, which say nothing of when)
    files = sorted(tmp_path.glob("*.json"), reverse=True)
    for when, p in enumerate(files):
        os.utime(p, (1_000_000 + when, 1_000_000 + when))
    expected = [json.loads(p.read_text())["fit"]["seed"] for p in files]
    assert [info["fit"]["seed"] for info in read_snapshot_infos(tmp_path)] == expected


class InterruptAtEpoch(Callback):
    """Ctrl-C at the end of an epoch (skorch ends training quietly on a KeyboardInterrupt)."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epoch:
            raise KeyboardInterrupt


def test_what_a_fit_cannot_do_is_said(tmp_path):
    """Found in review: a Ctrl-C'd fit came back looking finished; patience without validation data
    and a snapshot under random_state=None (a new seed each fit: never resumed) did nothing, silently;
    an unreadable snapshot raised torch's own error."""
    import warnings

    with pytest.warns(UserWarning, match="stopped after 2 of 4 epochs"):
        GMNetRegressor(**{**TINY, "max_epochs": 4}, callbacks=[InterruptAtEpoch(2)]).fit(X, Y)
    with warnings.catch_warnings():  # early stopping is no interruption
        warnings.simplefilter("error")
        est = GMNetRegressor(**{**TINY, "max_epochs": 30, "lr": 3e-3, "patience": 1}).fit(X, Y)
    assert len(est.history_) < 30
    with pytest.warns(UserWarning, match="patience=2 stops on the validation metric"):
        GMNetRegressor(**TINY, patience=2, valid_split=None).fit(X, Y)
    with pytest.warns(UserWarning, match="random_state=None draws another seed"):
        GMNetRegressor(**{**TINY, "random_state": None}, callbacks=[TrainingSnapshot(tmp_path / "a")]).fit(X, Y)
    snap = TrainingSnapshot(tmp_path / "b")
    with pytest.raises(Killed):
        GMNetRegressor(**TINY, callbacks=[snap, KillAtEpoch(2)]).fit(X, Y)
    snap.path_.write_bytes(snap.path_.read_bytes()[:100])  # a copy cut short
    with pytest.raises(ValueError, match=r"is not a readable training snapshot .*delete it to start afresh"):
        GMNetRegressor(**TINY, callbacks=[TrainingSnapshot(tmp_path / "b")]).fit(X, Y)


class CtrlCAtEpoch(Callback):
    """A real Ctrl-C (SIGINT to this process) at the end of an epoch."""

    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epoch:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)


def test_one_ctrl_c_stops_an_ensemble_fit():
    """Ctrl-C ended only the member it hit; the fit went on to train the others (a review). A
    callback's stop (skorch's way: a KeyboardInterrupt) still stops its member only."""
    import signal

    from sklearn.utils.validation import check_is_fitted
    from sklearn.exceptions import NotFittedError

    # Python's own handler (a Ctrl-C raises KeyboardInterrupt), whatever an earlier test installed
    outside = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        small = dict(**{**TINY, "max_epochs": 3}, descriptors=False, fingerprint=False, forest=False, n_estimators=2)
        est = GMNetRegressor(**small, callbacks=[CtrlCAtEpoch(1)])
        with pytest.raises(KeyboardInterrupt, match="ensemble member 0 of 2 interrupted: the fit stops"):
            est.fit(X, Y)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    finally:
        signal.signal(signal.SIGINT, outside)
    with pytest.raises(NotFittedError):  # as after any failure in training
        check_is_fitted(est)
    with pytest.warns(UserWarning, match="stopped after 1 of 3 epochs"):  # a callback's stop
        est.set_params(callbacks=[InterruptAtEpoch(1)]).fit(X, Y)
    assert [len(net.history) for net in est.nets_] == [1, 1]
    # one member, a real Ctrl-C: kept, as skorch keeps it (before its first checkpoint: the last weights)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.warns(UserWarning, match="stopped after 1 of 3 epochs"):
            est.set_params(n_estimators=1, callbacks=[CtrlCAtEpoch(1)]).fit(X, Y)
    finally:
        signal.signal(signal.SIGINT, outside)
    assert len(est.history_) == 1


def test_the_fingerprint_of_a_fit_is_the_same_in_every_process():
    """A callable activation was hashed by its repr, which holds its address: a fit with one never
    resumed; a list of numpy str_ hashed otherwise than the same str (a review)."""
    from gmnet_sklearn.estimators.snapshot import fit_fingerprint

    def make():
        def act(x):
            return np.tanh(x)
        return act

    a, b = make(), make()
    assert a is not b and repr(a) != repr(b)
    assert fit_fingerprint({"activation": a}, 0, []) == fit_fingerprint({"activation": b}, 0, [])
    assert fit_fingerprint({"activation": a}, 0, []) != fit_fingerprint({"activation": np.tanh}, 0, [])
    # two lambdas share a name, not what they compute; a closure's values count too
    relu, tanh = (lambda x: np.maximum(x, 0)), (lambda x: np.tanh(x))
    assert fit_fingerprint({"activation": relu}, 0, []) != fit_fingerprint({"activation": tanh}, 0, [])

    def scaled(s):
        return lambda x: s * np.tanh(x)

    assert fit_fingerprint({"a": scaled(1.0)}, 0, []) == fit_fingerprint({"a": scaled(1.0)}, 0, [])
    assert fit_fingerprint({"a": scaled(1.0)}, 0, []) != fit_fingerprint({"a": scaled(2.0)}, 0, [])
    strs = np.asarray(["CCO", "c1ccccc1"], dtype=object)
    assert fit_fingerprint({}, 0, [np.asarray([np.str_(s) for s in strs], dtype=object)]) == fit_fingerprint({}, 0, [strs])


def test_no_sigint_handler_where_ctrl_c_is_not_pythons_to_take(monkeypatch):
    """SIGINT ignored (a shell's background job), the default action (the process ends) or a C
    host's handler (getsignal None: it could not be restored) is left alone, and a thread (where
    Python cannot install one) installs nothing; a Python handler is watched and given back."""
    import signal
    import threading

    from gmnet_sklearn.estimators._base import _watching_sigint

    outside = signal.getsignal(signal.SIGINT)
    try:
        for disposition in (signal.SIG_IGN, signal.SIG_DFL):
            signal.signal(signal.SIGINT, disposition)
            with _watching_sigint() as seen:
                assert signal.getsignal(signal.SIGINT) == disposition and seen == []
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with _watching_sigint():
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        installed = []
        monkeypatch.setattr(signal, "signal", lambda *a: installed.append(a))
        monkeypatch.setattr(signal, "getsignal", lambda signum: None)  # a C host's handler
        with _watching_sigint():
            pass
        monkeypatch.undo()
        thread = threading.Thread(target=lambda: _watching_sigint().__enter__())
        monkeypatch.setattr(signal, "signal", lambda *a: installed.append(a))
        thread.start()
        thread.join()
        monkeypatch.undo()
        assert installed == []
    finally:
        signal.signal(signal.SIGINT, outside)


class DropBestFile(Callback):
    """Deletes the best epoch's file before RestoreBest reads it (as a snapshot's history may flag
    an epoch another process saved)."""

    def __init__(self, est):
        self.est = est

    def on_train_end(self, net, **kwargs):
        for f in Path(self.est._checkpoint_dir).glob("*.pt"):
            f.unlink()


def test_a_best_epoch_whose_file_is_gone_is_said_so():
    """The missing file was put down to "the validation metric was not finite in any epoch" (a review)."""
    est = GMNetRegressor(**{**TINY, "max_epochs": 2}, descriptors=False, fingerprint=False, forest=False)
    est.set_params(callbacks=[DropBestFile(est)])
    with pytest.warns(UserWarning, match=r"the best epoch's weights \(epoch \d\) are not on disk"):
        est.fit(X, Y)
