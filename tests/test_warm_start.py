"""Warm-started estimators: pretrained=PATH / from_pretrained, Hugging Face RoBERTa folders, sklearn checks."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import joblib
import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from skorch.callbacks import Callback
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from gmnet_sklearn import MOSES_FINE_TUNING, ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor
from gmnet_sklearn.estimators import load_model
from gmnet_sklearn.pretrain import pretrain

from ._smiles import SMILES, class_target, regression_target
from .test_pretrain import TINY, VALID, write_csv, write_vocab

ESTIMATORS = {"gmnet": (GMNetRegressor, GMNetClassifier), "chemberta": (ChemBERTaRegressor, ChemBERTaClassifier)}
FIT = dict(max_epochs=1, batch_size=16, random_state=0, valid_split=None)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A tiny pretrained folder per family (a few steps: the weights are not the init's)."""
    root = tmp_path_factory.mktemp("pretrained")
    folder = root / "corpus"
    folder.mkdir()
    write_csv(folder / "train.smi.csv", list(np.random.RandomState(0).choice(VALID, 200)))
    vocab = write_vocab(root / "vocab.txt")
    out = {}
    for model in ("gmnet", "chemberta"):
        pretrain(folder, root / model, model, vocab_file=vocab, batch_size=32, max_steps=4, test_corpus=None,
                 progress=False, lr=1e-3, **TINY[model])
        out[model] = root / model
    return out


class InitialWeights(Callback):
    """Keeps a copy of the module's weights as training begins (after any warm start)."""

    def on_train_begin(self, net, **kwargs):
        self.state_ = {k: v.detach().clone() for k, v in net.module_.state_dict().items()}


def _encoder_keys(model: str, stored: dict, fused: bool = True) -> dict:
    """Pretrained encoder tensors, named as in the fine-tuned module (inside DescriptorFusion when
    ``fused``, the network alone otherwise)."""
    enc = {k[len("encoder."):]: v for k, v in stored.items() if k.startswith("encoder.")}
    prefix = "model." if fused else ""
    return {f"{prefix}encoder.{k}" if model == "gmnet" else f"{prefix}{k}": v for k, v in enc.items()}


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_warm_start_loads_every_encoder_weight(pretrained, model):
    reg = ESTIMATORS[model][0]
    cb = InitialWeights()
    est = reg.from_pretrained(pretrained[model], callbacks=[cb], **FIT).fit(SMILES, regression_target(SMILES))
    stored = load_file(str(pretrained[model] / "model.safetensors"))
    expected = _encoder_keys(model, stored)
    init = cb.state_
    assert expected and set(expected) <= set(init)
    for key, value in expected.items():
        assert torch.equal(init[key], value), key
    # every parameter outside the heads came from the checkpoint
    head = ("descriptor_proj.", "model.dense.", "model.out_proj.", "model.head.")
    assert {k for k in init if not k.startswith(head)} == set(expected)
    # the vocabulary is the checkpoint's, not one fitted on the training SMILES
    assert est.tokenizer_.vocabulary_ == type(est.tokenizer_)(pretrained[model] / "vocab.txt").fit([]).vocabulary_
    # the head is fresh: the same seed from scratch draws the same head
    cb2 = InitialWeights()
    reg(**{**est.get_params(), "pretrained": None, "callbacks": [cb2],
           "vocab_file": str(pretrained[model] / "vocab.txt")}).fit(SMILES, regression_target(SMILES))
    for key in init:
        if key.startswith(head):
            assert torch.equal(init[key], cb2.state_[key]), key
    # ... and the encoder is not (the pretraining steps moved most of its tensors away from the init)
    moved = [k for k in expected if not torch.equal(init[k], cb2.state_[k])]
    assert len(moved) > 0.6 * len(expected), (len(moved), len(expected))


def test_skipping_invalid_rows_reads_the_checkpoint_once(pretrained, monkeypatch):
    """on_invalid="skip" needs the vocabulary before the rows are checked: the checkpoint's, read
    then and not a second time once the rows are known."""
    from gmnet_sklearn.estimators import warm_start

    reads = []
    read_source = warm_start.read_source
    monkeypatch.setattr(warm_start, "read_source", lambda *a, **kw: reads.append(a) or read_source(*a, **kw))
    X = list(SMILES[:30]) + ["C1CC"]
    est = GMNetRegressor.from_pretrained(pretrained["gmnet"], on_invalid="skip", **FIT)  # (reads its config)
    reads.clear()
    with pytest.warns(UserWarning, match="C1CC"):
        est.fit(X, regression_target(X))
    assert len(reads) == 1 and list(est.invalid_rows_) == [30]
    assert est.tokenizer_.vocabulary_ == type(est.tokenizer_)(pretrained["gmnet"] / "vocab.txt").fit([]).vocabulary_


def test_shape_conflicts_and_bad_sources(pretrained, tmp_path):
    X, y = SMILES, regression_target(SMILES)
    with pytest.raises(ValueError, match=r"k=8 \(checkpoint: 4\).*d_model=256 \(checkpoint: 16\).*from_pretrained"):
        GMNetRegressor(pretrained=pretrained["gmnet"], **FIT).fit(X, y)
    with pytest.raises(ValueError, match=r"shape parameters conflict.*L=3 \(checkpoint: 2\)"):
        GMNetRegressor.from_pretrained(pretrained["gmnet"], L=3, **FIT).fit(X, y)
    with pytest.raises(ValueError, match="holds a pretrained ChemBERTa model, not a Chem-GMNet one"):
        GMNetRegressor(pretrained=pretrained["chemberta"], **FIT).fit(X, y)
    (tmp_path / "v.txt").write_text("[PAD]\n[UNK]\nC\n")
    with pytest.raises(ValueError, match="brings its own vocabulary"):
        GMNetRegressor.from_pretrained(pretrained["gmnet"], vocab_file=str(tmp_path / "v.txt"), **FIT).fit(X, y)
    # naming the checkpoint's own vocabulary is fine, and so is its activation in capitals (the
    # models resolve names case-insensitively)
    GMNetRegressor.from_pretrained(pretrained["gmnet"], vocab_file=str(pretrained["gmnet"] / "vocab.txt"),
                                   descriptors=False, fingerprint=False, **FIT).fit(X, y)
    GMNetRegressor.from_pretrained(pretrained["gmnet"], activation="GELU", descriptors=False, fingerprint=False,
                                   **FIT).fit(X, y)
    from gmnet_sklearn.estimators import warm_start

    with pytest.MonkeyPatch.context() as mp:  # a package without the shipped folders says so
        mp.setattr(warm_start, "PACKAGE_DIR", tmp_path / "no-package-data")
        with pytest.raises(FileNotFoundError, match="MOSES-pretrained Chem-GMNet encoder is not shipped"):
            GMNetRegressor(pretrained="moses", **FIT).fit(X, y)
        with pytest.raises(FileNotFoundError, match="MOSES-pretrained ChemBERTa encoder is not shipped"):
            ChemBERTaClassifier.from_pretrained("moses")
        with pytest.raises(FileNotFoundError, match="MOSES-pretrained paper-shape Chem-GMNet encoder is not shipped"):
            GMNetRegressor.from_pretrained("moses-paper")
        with pytest.raises(FileNotFoundError, match="descriptor-regression-pretrained ChemBERTa encoder is not shipped"):
            ChemBERTaRegressor(pretrained="moses-mtr", **FIT).fit(X, y)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        GMNetRegressor(pretrained=tmp_path / "nothing", **FIT).fit(X, y)
    weights = pretrained["gmnet"] / "model.safetensors"
    with pytest.raises(FileNotFoundError, match=f"is a file; pass the folder that holds it, '{pretrained['gmnet']}'"):
        GMNetRegressor(pretrained=weights, **FIT).fit(X, y)
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="unfinished pretraining run.*run the same gmnet-pretrain command again"):
        GMNetRegressor(pretrained=tmp_path / "unfinished", **FIT).fit(X, y)
    # a vocab.txt of the same size but another order: every id would be another token's
    import shutil

    shuffled = tmp_path / "shuffled"
    shutil.copytree(pretrained["gmnet"], shuffled)
    tokens = (shuffled / "vocab.txt").read_text().split("\n")
    tokens[-3], tokens[-2] = tokens[-2], tokens[-3]
    (shuffled / "vocab.txt").write_text("\n".join(tokens))
    with pytest.raises(ValueError, match="is not the vocabulary the encoder was pretrained with"):
        GMNetRegressor.from_pretrained(shuffled, **FIT).fit(X, y)
    with pytest.raises(ValueError, match="'pretrained' parameter"):
        GMNetRegressor(pretrained=3, **FIT).fit(X, y)
    # a config.json asking for a larger model than its weights (from_pretrained takes the shape from
    # it): refused from the weights' header, before any model is built (the probe too is on meta)
    larger = tmp_path / "larger"
    shutil.copytree(pretrained["gmnet"], larger)
    config = json.loads((larger / "config.json").read_text())
    config["params"]["d_model"] *= 64
    (larger / "config.json").write_text(json.dumps(config))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(GMNetRegressor, "_initialize_module", lambda *a, **k: pytest.fail("a model was built"))
        with pytest.raises(ValueError, match=r"pretrained weight encoder\.\S+ has shape \(16, "):
            GMNetRegressor.from_pretrained(larger, descriptors=False, fingerprint=False, **FIT).fit(X, y)
    config["params"]["n_layers"] = 10**6  # (a million layers: hours to build even on meta)
    (larger / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"asks for 1000000 layers, more than the \d+ tensors of its weights"):
        GMNetRegressor.from_pretrained(larger)
    # dropout may differ from pretraining
    GMNetRegressor.from_pretrained(pretrained["gmnet"], dropout=0.0, descriptors=False, fingerprint=False, **FIT).fit(X, y)


@pytest.mark.parametrize("name", ["moses", "moses-mtr", "moses-epoch"])
@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_shipped_moses_encoder_warm_starts_the_defaults(model, name):
    """``MOSES_FINE_TUNING`` (pretrained="moses" and its learning rate), or ``pretrained="moses-mtr"``
    (the descriptor-regression encoders) or ``"moses-epoch"`` (the masked-LM encoders pretrained for a
    whole epoch), with every other parameter at its default: the encoder
    that ships in the package (the library's default shape, so no shape argument is needed) is
    loaded in full."""
    from gmnet_sklearn.estimators.warm_start import NAMED, PACKAGE_DIR

    folder = PACKAGE_DIR / NAMED[name][model]
    assert (folder / "config.json").is_file(), f"{folder}: the named encoder ships in the package"
    reg = ESTIMATORS[model][0]
    cb = InitialWeights()
    params = MOSES_FINE_TUNING if name == "moses" else {"pretrained": name}
    est = reg(**params, max_epochs=1, random_state=0, callbacks=[cb]).fit(SMILES, regression_target(SMILES))
    expected = _encoder_keys(model, load_file(str(folder / "model.safetensors")))
    assert expected
    for key, value in expected.items():
        assert torch.equal(cb.state_[key], value), key
    assert est.tokenizer_.vocab_size == 591  # DeepChem's vocabulary, from the folder
    assert np.isfinite(est.predict(SMILES[:5])).all()


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_shipped_paper_shape_encoder_warm_starts_the_paper_protocol(model):
    """``pretrained="moses-paper"`` with the paper's protocol (Table 2's ``chemberta3_moses``): the
    paper-shape encoder that ships is loaded in full."""
    from gmnet_sklearn.estimators.presets import CHEMBERTA_PAPER_PROTOCOL, PAPER_PROTOCOL
    from gmnet_sklearn.estimators.warm_start import NAMED, PACKAGE_DIR

    folder = PACKAGE_DIR / NAMED["moses-paper"][model]
    assert (folder / "config.json").is_file(), f"{folder}: the named encoder ships in the package"
    protocol = PAPER_PROTOCOL if model == "gmnet" else CHEMBERTA_PAPER_PROTOCOL
    cb = InitialWeights()
    est = ESTIMATORS[model][0](**{**protocol, "pretrained": "moses-paper", "max_epochs": 1}, random_state=0,
                               callbacks=[cb]).fit(SMILES, regression_target(SMILES))
    expected = _encoder_keys(model, load_file(str(folder / "model.safetensors")), fused=False)  # no descriptors
    assert expected
    for key, value in expected.items():
        assert torch.equal(cb.state_[key], value), key
    assert np.isfinite(est.predict(SMILES[:5])).all()


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_pretrained_estimators_sklearn_checks(pretrained, model, tmp_path):
    reg, clf = ESTIMATORS[model]
    est = reg.from_pretrained(pretrained[model], descriptors=False, fingerprint=False, **FIT)
    assert est.get_params()["pretrained"] == pretrained[model]
    cl = clone(est)
    assert cl.get_params() == est.get_params()
    X, y = SMILES, regression_target(SMILES)
    est.fit(X, y)
    pred = est.predict(X[:10])
    for other in (pickle.loads(pickle.dumps(est)), joblib.load(joblib.dump(est, tmp_path / "e.joblib")[0]),
                  load_model(est.save(tmp_path / "saved"))):
        np.testing.assert_allclose(other.predict(X[:10]), pred, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(clone(est).fit(X, y).predict(X[:10]), pred, rtol=1e-6, atol=1e-6)  # seeded: repeatable
    search = GridSearchCV(clf.from_pretrained(pretrained[model], descriptors=False, fingerprint=False, **FIT), {"lr": [1e-4, 1e-3]}, cv=2)
    search.fit(X, class_target(X))
    assert search.best_estimator_.pretrained == pretrained[model]


def test_chemberta_from_hugging_face_roberta_for_masked_lm(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gmnet_sklearn.baselines.chemberta import ChemBERTaForMaskedLM

    vocab = write_vocab(tmp_path / "vocab.txt")
    n_vocab = len(vocab.read_text().splitlines())
    torch.manual_seed(0)
    config = transformers.RobertaConfig(vocab_size=n_vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=32, max_position_embeddings=60, pad_token_id=0,
                                        type_vocab_size=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    hf = transformers.RobertaForMaskedLM(config).eval()
    with torch.no_grad():  # not the initial values anywhere (biases, LayerNorms included)
        for p in hf.parameters():
            p.add_(0.01 * torch.randn_like(p))
    hf.save_pretrained(tmp_path / "hf")  # config.json + model.safetensors, no tokenizer
    # the MLM head in plain torch gives Hugging Face's logits
    ours = ChemBERTaForMaskedLM(n_vocab, 16, 2, 2, 32, 60, type_vocab_size=1, dropout=0.0, attention_dropout=0.0).eval()
    assert ours.load_hf_state_dict(hf.state_dict()) == []
    untied = dict(hf.state_dict())
    untied["lm_head.decoder.weight"] = untied["lm_head.decoder.weight"] + 1.0  # as trained with tie_word_embeddings=False
    fresh = ChemBERTaForMaskedLM(n_vocab, 16, 2, 2, 32, 60, type_vocab_size=1)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    with pytest.raises(ValueError, match="differs from the word embeddings"):
        fresh.load_hf_state_dict(untied)
    headless = {k: v for k, v in hf.state_dict().items() if k != "lm_head.dense.bias"}
    with pytest.raises(KeyError, match=r"lm_head\.dense\.bias"):
        fresh.load_hf_state_dict(headless)
    deeper = dict(hf.state_dict(), **{k.replace("layer.1.", "layer.2."): v for k, v in hf.state_dict().items()
                                      if ".layer.1." in k})  # a third layer this two-layer model cannot hold
    with pytest.raises(KeyError, match=r"encoder\.layer\.2\."):
        fresh.load_hf_state_dict(deeper)
    for key, value in fresh.state_dict().items():  # a failed load leaves every tensor as it was
        assert torch.equal(value, before[key]), key
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 10, 3, 0, 0]])
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=(ids != 0).long()).logits
        np.testing.assert_allclose(ours(ids).numpy()[ids != 0], ref.numpy()[ids != 0], atol=1e-5)
    # warm start: without vocab.txt in the folder the vocabulary must be named
    X, y = SMILES, regression_target(SMILES)
    with pytest.raises(ValueError, match="has no vocab.txt"):
        ChemBERTaRegressor.from_pretrained(tmp_path / "hf", **FIT).fit(X, y)
    cb = InitialWeights()
    est = ChemBERTaRegressor.from_pretrained(tmp_path / "hf", vocab_file=str(vocab), callbacks=[cb], **FIT).fit(X, y)
    assert (est.d_model, est.n_layers, est.intermediate_size, est.max_position_embeddings) == (16, 2, 32, 60)
    hf_state = hf.state_dict()
    for key, value in cb.state_.items():
        if key.startswith(("descriptor_proj.", "model.head.")):
            continue
        from gmnet_sklearn.baselines.chemberta import hf_to_chemberta_key

        src = next(k for k in hf_state if hf_to_chemberta_key(k) == key[len("model."):])
        expected = hf_state[src]
        if "token_type" in key:  # one row in the checkpoint, two in the model: row 0 is the one used
            value = value[:1]
        assert torch.equal(value, expected), key
    # with vocab.txt in the folder, a vocab_file naming another vocabulary is an error, as for our folders
    (tmp_path / "hf" / "vocab.txt").write_text(vocab.read_text())
    tokens = vocab.read_text().split()
    (tmp_path / "other.txt").write_text("\n".join(tokens[:5] + tokens[5:][::-1]) + "\n")  # same size, ids moved
    with pytest.raises(ValueError, match="brings its own vocabulary and vocab_file=.*other.txt"):
        ChemBERTaRegressor.from_pretrained(tmp_path / "hf", vocab_file=str(tmp_path / "other.txt"), **FIT).fit(X, y)
    ChemBERTaRegressor.from_pretrained(tmp_path / "hf", vocab_file=str(vocab), **FIT).fit(X, y)  # the same one: fine
    # the older pytorch_model.bin format warm-starts too, its shapes checked before anything is built
    # (memory-mapped, not read): a config asking for a wider model than the file is refused there
    hf.save_pretrained(tmp_path / "hf_bin", safe_serialization=False)
    assert not (tmp_path / "hf_bin" / "model.safetensors").exists()
    ChemBERTaRegressor.from_pretrained(tmp_path / "hf_bin", vocab_file=str(vocab), **FIT).fit(X, y)
    hf_config = json.loads((tmp_path / "hf_bin" / "config.json").read_text())
    (tmp_path / "hf_bin" / "config.json").write_text(json.dumps({**hf_config, "hidden_size": 64}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ChemBERTaRegressor, "_initialize_module", lambda *a, **k: pytest.fail("a model was built"))
        with pytest.raises(ValueError, match=r"pretrained weight \S+ has shape \(\d+, 16\), the model \(\d+, 64\)"):
            ChemBERTaRegressor.from_pretrained(tmp_path / "hf_bin", vocab_file=str(vocab), **FIT).fit(X, y)
    # a Hugging Face config without a shape key is named with its file, not a bare KeyError
    from gmnet_sklearn.estimators.warm_start import read_source

    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    del config["hidden_size"]
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json lacks \['hidden_size'\]"):
        read_source(tmp_path / "hf", "chemberta")


def _smoke_corpus(folder):
    """~2,000 training and 200 test SMILES: the head of MOSES when it is here, else generated
    (RDKit-randomised SMILES of the test molecules)."""
    import itertools

    from gmnet_sklearn.pretrain.corpus import iter_smiles

    from .conftest import SHARED

    moses = SHARED / "data" / "pretrain" / "moses"
    if (moses / "train.csv.gz").is_file() and (moses / "test.csv.gz").is_file():
        train = list(itertools.islice(iter_smiles(moses / "train.csv.gz"), 2000))
        test = list(itertools.islice(iter_smiles(moses / "test.csv.gz"), 200))
    else:
        from gmnet_sklearn.augment import randomized_smiles

        variants = [v for vs in randomized_smiles(VALID, 45, 0) for v in vs]
        train, test = variants[:2000], variants[2000:2200]
    folder.mkdir()
    write_csv(folder / "train.csv.gz", train, gz=True)
    write_csv(folder / "test.csv.gz", test, gz=True)
    return train


def test_pretrain_then_fine_tune_smoke(tmp_path):
    """Pretrain -> fine-tune on ~2,000 SMILES in CI time (tiny model, two epochs)."""
    from .conftest import vocab_file

    train = _smoke_corpus(tmp_path / "corpus")
    vocab = vocab_file() or write_vocab(tmp_path / "vocab.txt", train + SMILES)
    summary = pretrain(tmp_path / "corpus", tmp_path / "run", "gmnet", vocab_file=vocab, epochs=2, batch_size=128,
                       lr=3e-3, warmup=0.1, eval_every=8, progress=False, **TINY["gmnet"])
    assert summary["finished"] and summary["smiles_seen"] == 2 * summary["cache"]["n_valid"]
    history = summary["history"]
    assert history[0]["step"] == 0 and history[-1]["step"] == summary["steps"]
    assert history[-1]["eval_loss"] < history[0]["eval_loss"] - 0.3, [h["eval_loss"] for h in history]
    X = train[:120]
    y = np.array([len(s) for s in X], dtype=float)
    est = GMNetRegressor.from_pretrained(tmp_path / "run", max_epochs=2, batch_size=32, random_state=0).fit(X, y)
    assert est.k == 4 and np.isfinite(est.predict(X[:20])).all()


def test_training_snapshot_fingerprint_ignores_pretrained_none(tmp_path):
    """Snapshots written before `pretrained`, `cuda_graphs`, `precision`, `freeze_encoder_epochs`, `n_jobs`,
    `memory`, `layer_lr_decay`, `normalize_y` and `average_epochs` existed (long benchmark fits) still resume: the fingerprint is
    the one of the parameters they had."""
    from pathlib import Path

    from gmnet_sklearn.estimators import TrainingSnapshot
    from gmnet_sklearn.estimators.snapshot import fit_fingerprint

    X, y = SMILES, regression_target(SMILES)
    # (average_epochs at the value snapshots from before it had: 1, the best epoch restored)
    est = ChemBERTaRegressor(**TINY["chemberta"], descriptors=False, fingerprint=False, average_epochs=1,
                             callbacks=[TrainingSnapshot(tmp_path)], **FIT)
    est.fit(X, y)
    params = {k: v for k, v in est.get_params(deep=False).items()
              if k not in ("callbacks", "verbose", "device", "pretrained", "cuda_graphs", "precision",
                           "freeze_encoder_epochs", "n_jobs", "memory", "layer_lr_decay", "normalize_y",
                           "average_epochs")}
    expected = fit_fingerprint({"estimator": "ChemBERTaRegressor", **params}, 0, [np.asarray(X, dtype=object), y, None, None])
    assert Path(est.resume_info_["snapshot"]).name.startswith(expected)


class WeightsPerEpoch(Callback):
    """The module's weights at the end of every epoch."""

    def on_epoch_end(self, net, **kwargs):
        self.states_ = getattr(self, "states_", []) + [{k: v.detach().clone() for k, v in net.module_.state_dict().items()}]


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_freeze_encoder_epochs_trains_the_head_first_then_everything(pretrained, model):
    # LP-FT: for freeze_encoder_epochs epochs only the head (and the descriptor projection) moves;
    # the epoch after, the encoder trains too.
    from gmnet_sklearn.estimators.warm_start import is_encoder_parameter

    reg = ESTIMATORS[model][0]
    start, per_epoch = InitialWeights(), WeightsPerEpoch()
    est = reg.from_pretrained(pretrained[model], callbacks=[start, per_epoch], freeze_encoder_epochs=2,
                              **{**FIT, "max_epochs": 3}).fit(SMILES, regression_target(SMILES))
    encoder = [k for k in start.state_ if is_encoder_parameter(k) and start.state_[k].is_floating_point()
               and k in dict(est.net_.module_.named_parameters())]
    head = [k for k in start.state_ if not is_encoder_parameter(k)]
    assert encoder and head and any(k.startswith("descriptor_proj.") for k in head)
    for epoch in (0, 1):
        assert all(torch.equal(per_epoch.states_[epoch][k], start.state_[k]) for k in encoder), epoch
        assert any(not torch.equal(per_epoch.states_[epoch][k], start.state_[k]) for k in head), epoch
    assert any(not torch.equal(per_epoch.states_[2][k], start.state_[k]) for k in encoder)
    assert all(p.requires_grad for p in est.net_.module_.parameters())  # unfrozen at the end
    assert clone(est).get_params()["freeze_encoder_epochs"] == 2


def test_freeze_encoder_epochs_needs_pretrained_weights():
    with pytest.raises(ValueError, match="needs pretrained weights"):
        GMNetRegressor(freeze_encoder_epochs=1, **FIT).fit(SMILES, regression_target(SMILES))
    with pytest.raises(ValueError, match="freeze_encoder_epochs"):
        GMNetRegressor(freeze_encoder_epochs=-1, **FIT).fit(SMILES, regression_target(SMILES))


def test_layerwise_lr_scales_by_depth():
    # head 1; the top layer (and what follows it) decay; each layer below one factor more; embeddings last
    from gmnet_sklearn.estimators.warm_start import layerwise_lr_scales

    names = ["model.encoder.embedding.W_up", "model.encoder.layers.0.attn.w", "model.encoder.layers.1.ffn.w",
             "model.encoder.layers.2.ffn.b", "model.encoder.ln_f.weight", "model.dense.weight", "model.out_proj.bias",
             "descriptor_proj.weight"]
    assert layerwise_lr_scales(names, 0.5) == [0.5 ** 4, 0.5 ** 3, 0.5 ** 2, 0.5, 0.5, 1.0, 1.0, 1.0]
    chemberta = ["embeddings.word_embeddings.weight", "layers.0.attention.q.weight", "layers.1.output.dense.bias",
                 "head.dense.weight"]
    assert layerwise_lr_scales(chemberta, 0.8) == pytest.approx([0.8 ** 3, 0.8 ** 2, 0.8, 1.0])
    with pytest.raises(ValueError, match="no encoder layers"):
        layerwise_lr_scales(["dense.weight", "embedding.W_up"], 0.5)


class GroupLearningRates(Callback):
    """Each parameter's learning rate at every training batch (after the schedule has set it)."""

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            names = {id(p): n for n, p in net.module_.named_parameters()}
            self.lr_ = getattr(self, "lr_", []) + [{names[id(p)]: g["lr"] for g in net.optimizer_.param_groups
                                                    for p in g["params"]}]


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
@pytest.mark.parametrize("schedule", [dict(warmup=0.0, lr_schedule="constant"), dict(warmup=0.5, lr_schedule="cosine")])
def test_layer_lr_decay_gives_each_layer_its_share_of_the_learning_rate(pretrained, model, schedule):
    from gmnet_sklearn.estimators.warm_start import layerwise_lr_scales

    reg = ESTIMATORS[model][0]
    record = GroupLearningRates()
    est = reg.from_pretrained(pretrained[model], callbacks=[record], layer_lr_decay=0.5, lr=1e-3,
                              **{**FIT, "max_epochs": 2, **schedule}).fit(SMILES, regression_target(SMILES))
    names = [n for n, _ in est.net_.module_.named_parameters()]
    scales = dict(zip(names, layerwise_lr_scales(names, 0.5)))
    assert len(set(scales.values())) == est.n_layers + 2  # head, each layer, embeddings
    assert len(est.net_.optimizer_.param_groups) == est.n_layers + 2
    head = next(n for n in names if scales[n] == 1.0)
    for step in record.lr_:
        assert set(step) == set(names)
        for name in names:
            assert step[name] == pytest.approx(step[head] * scales[name], rel=1e-12), name
    head_lrs = [step[head] for step in record.lr_]
    if schedule["lr_schedule"] == "constant":
        assert head_lrs == [pytest.approx(1e-3)] * len(head_lrs)
    else:  # warm-up then decay: the head's rate is the schedule's, not a fixed one
        assert max(head_lrs) == pytest.approx(1e-3) and head_lrs[0] < 1e-3 and head_lrs[-1] < 1e-3
    assert clone(est).get_params()["layer_lr_decay"] == 0.5


def test_layer_lr_decay_one_is_one_group_and_the_same_fit(pretrained):
    # the default (1.0) is skorch's single parameter group: the same weights as before the option existed
    a = GMNetRegressor.from_pretrained(pretrained["gmnet"], **FIT).fit(SMILES, regression_target(SMILES))
    b = GMNetRegressor.from_pretrained(pretrained["gmnet"], layer_lr_decay=1.0, **FIT).fit(SMILES, regression_target(SMILES))
    assert len(a.net_.optimizer_.param_groups) == 1
    assert all(torch.equal(x, y) for x, y in zip(a.net_.module_.parameters(), b.net_.module_.parameters()))
    c = GMNetRegressor.from_pretrained(pretrained["gmnet"], layer_lr_decay=0.5, **FIT).fit(SMILES, regression_target(SMILES))
    assert not all(torch.equal(x, y) for x, y in zip(a.net_.module_.parameters(), c.net_.module_.parameters()))


def test_layer_lr_decay_needs_pretrained_weights_and_a_factor_in_0_1():
    with pytest.raises(ValueError, match="needs pretrained weights"):
        GMNetRegressor(layer_lr_decay=0.8, **FIT).fit(SMILES, regression_target(SMILES))
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="layer_lr_decay"):
            GMNetRegressor(layer_lr_decay=bad, **FIT).fit(SMILES, regression_target(SMILES))


def test_layer_lr_decay_fit_resumes_from_a_snapshot_exactly(pretrained, tmp_path):
    # the optimizer's per-layer groups (and their lr_scale) come back from the snapshot, so the resumed
    # warm start goes on at the same learning rates and ends where the uninterrupted one does
    from gmnet_sklearn.estimators import TrainingSnapshot

    from .test_training_snapshot import KillAtEpoch, Killed, _assert_same_fit

    params = dict(pretrained=pretrained["gmnet"], **TINY["gmnet"], layer_lr_decay=0.5, max_epochs=4, batch_size=16,
                  random_state=0, lr=1e-3)
    y = regression_target(SMILES)
    full = GMNetRegressor(**params).fit(SMILES, y)
    with pytest.raises(Killed):
        GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path), KillAtEpoch(3)]).fit(SMILES, y)
    resumed = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path)]).fit(SMILES, y)
    assert resumed.resume_info_["resumed_from_epoch"] == 2
    assert [g["lr_scale"] for g in resumed.net_.optimizer_.param_groups] == [
        g["lr_scale"] for g in full.net_.optimizer_.param_groups]
    _assert_same_fit(resumed, full, SMILES[:40])


def test_a_snapshot_is_not_resumed_once_the_pretrained_folder_was_rewritten(pretrained, tmp_path):
    import shutil

    from gmnet_sklearn.estimators import TrainingSnapshot

    from .test_training_snapshot import KillAtEpoch, Killed, _assert_same_fit

    folder = tmp_path / "ckpt"
    shutil.copytree(pretrained["gmnet"], folder)
    params = dict(pretrained=str(folder), **TINY["gmnet"], max_epochs=3, batch_size=16, random_state=0, lr=1e-3)
    y = regression_target(SMILES)
    with pytest.raises(Killed):
        GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path / "snaps"), KillAtEpoch(2)]).fit(SMILES, y)
    # pretraining run again into the same folder: the same path, other weights
    from safetensors.torch import save_file

    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in state.items()}, str(folder / "model.safetensors"))
    fresh = GMNetRegressor(**params).fit(SMILES, y)
    with pytest.warns(UserWarning, match="its pretrained changed since .* it is not resumed"):
        again = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path / "snaps")]).fit(SMILES, y)
    assert again.resume_info_["resumed_from_epoch"] is None
    _assert_same_fit(again, fresh, SMILES[:40])
    # and the rewritten folder's own snapshot resumes as usual
    resumed = GMNetRegressor(**params, callbacks=[TrainingSnapshot(tmp_path / "snaps")]).fit(SMILES, y)
    assert resumed.resume_info_["resumed_from_epoch"] == 3


def test_a_named_encoder_beside_a_folder_of_that_name_and_a_saved_folder_path(pretrained, tmp_path, monkeypatch):
    """Found in review: pretrained="moses" silently ignored a ./moses folder, save() wrote
    Path("moses") as "moses" (the shipped encoder's name once loaded), and the snapshot digest
    hashed every file of the folder (a pretraining run's optimizer state, a README)."""
    import shutil

    from gmnet_sklearn.estimators import load_model
    from gmnet_sklearn.estimators.warm_start import resolve_path, source_digest

    monkeypatch.chdir(tmp_path)
    shutil.copytree(pretrained["gmnet"], tmp_path / "moses")
    with pytest.warns(UserWarning, match=r"names the shipped encoder, not the folder 'moses' here"):
        resolve_path("moses", "gmnet")
    est = GMNetRegressor(pretrained=Path("moses"), **TINY["gmnet"], **FIT).fit(SMILES[:40], regression_target(SMILES[:40]))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the folder the fit read, not one under where save runs
    config = json.loads((est.save(tmp_path / "saved") / "config.json").read_text())
    assert config["params"]["pretrained"] == str(tmp_path / "moses")
    monkeypatch.chdir(tmp_path)  # a model fitted before fits resolved the folder kept it relative
    est.pretrained_ = {**est.pretrained_, "path": "moses"}
    assert json.loads((est.save(tmp_path / "saved2") / "config.json").read_text())["params"]["pretrained"] == str(tmp_path / "moses")
    assert load_model(tmp_path / "saved").pretrained == str(tmp_path / "moses")
    source = {"path": str(tmp_path / "moses")}
    before = source_digest(source)
    (tmp_path / "moses" / "README.md").write_text("notes")
    assert source_digest(source) == before
    (tmp_path / "moses" / "vocab.txt").write_text((tmp_path / "moses" / "vocab.txt").read_text() + "\n")
    assert source_digest(source) != before


def test_a_folder_without_its_vocabulary_or_a_saved_estimator_is_said(tmp_path):
    """A pretrained folder that lost vocab.txt failed on a bare "No such file"; a folder written by
    est.save() was "neither a gmnet_sklearn pretrained model nor a Hugging Face RoBERTa config" (a review)."""
    import shutil

    import gmnet_sklearn

    shipped = Path(gmnet_sklearn.__file__).parent / "pretrained" / "moses-gmnet"
    folder = tmp_path / "encoder"
    shutil.copytree(shipped, folder)
    (folder / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"has lost its vocab.txt, the vocabulary its encoder was pretrained with"):
        GMNetRegressor(pretrained=folder, **FIT).fit(SMILES[:20], regression_target(SMILES[:20]))
    est = GMNetRegressor(d_model=16, n_layers=1, n_heads=2, k=3, L=1, descriptors=False, fingerprint=False,
                         forest=False, **FIT).fit(SMILES[:20], regression_target(SMILES[:20]))
    est.save(tmp_path / "saved")
    with pytest.raises(ValueError, match=r"is a fitted GMNetRegressor saved by save\(\), not a pretrained encoder: "
                                         r"open it with its class's load\(\)"):
        GMNetRegressor(pretrained=tmp_path / "saved", **FIT).fit(SMILES[:20], regression_target(SMILES[:20]))
