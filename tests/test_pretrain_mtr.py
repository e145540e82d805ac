"""Descriptor-regression pretraining (objective="mtr"): the targets, runs, resumption, warm start."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from gmnet_sklearn import ChemBERTaRegressor, GMNetRegressor
from gmnet_sklearn.descriptors import compute_descriptors, descriptor_names
from gmnet_sklearn.pretrain import load_mlm
from gmnet_sklearn.pretrain.cache import EncodedCorpus, build_cache
from gmnet_sklearn.pretrain.corpus import corpus_files
from gmnet_sklearn.pretrain.targets import CLIP, DescriptorTargets, build_targets, scaling
from gmnet_sklearn.tokenizer import SmilesTokenizer

from ._smiles import SMILES, regression_target
from .test_pretrain import Killed, corpus, kill_at, run  # noqa: F401 (corpus is a fixture)
from .test_warm_start import FIT, InitialWeights, _encoder_keys


def _cache(folder, vocab, out, shard_size=128):
    tok = SmilesTokenizer(vocab).fit([])
    build_cache(corpus_files(folder), tok, out, shard_size=shard_size)
    return EncodedCorpus(out), tok


def test_targets_are_rdkit_descriptors_of_each_cached_smiles_in_order(corpus, tmp_path):
    folder, vocab = corpus
    encoded, tok = _cache(folder, vocab, tmp_path / "cache")
    manifest = build_targets(encoded, tok, tmp_path / "targets")
    assert manifest["complete"] and manifest["names"] == descriptor_names()
    assert [s["n"] for s in manifest["shards"]] == encoded.shard_sizes == [127, 127, 44]  # 128 records a shard, 2 invalid
    # the cache keeps the valid SMILES in file order: the targets are theirs, row for row
    import csv

    with open(folder / "train.csv") as fh:
        smiles = [row["SMILES"] for row in csv.DictReader(fh)]
    valid = [s for i, s in enumerate(smiles) if i not in (17, 150)]
    expected = compute_descriptors(valid, on_invalid="nan").astype(np.float32)
    expected[~np.isfinite(expected)] = np.nan
    raw = np.concatenate([load_file_np(tmp_path / "targets" / s["file"])["raw"] for s in manifest["shards"]])
    np.testing.assert_array_equal(raw, expected)  # NaN where NaN
    # two worker processes give the same files
    again = build_targets(encoded, tok, tmp_path / "targets2", n_jobs=2)
    for a, b in zip(manifest["shards"], again["shards"]):
        np.testing.assert_array_equal(load_file_np(tmp_path / "targets" / a["file"])["raw"],
                                      load_file_np(tmp_path / "targets2" / b["file"])["raw"])
    assert again["scaling"] == manifest["scaling"]


def load_file_np(path):
    from safetensors.numpy import load_file as load

    return load(str(path))


def test_targets_resume_shard_by_shard_and_refuse_other_data(corpus, tmp_path):
    folder, vocab = corpus
    encoded, tok = _cache(folder, vocab, tmp_path / "cache")
    full = build_targets(encoded, tok, tmp_path / "targets")
    # a build killed after its first shard: the manifest lists one shard, not complete
    partial = {**full, "complete": False, "shards": full["shards"][:1]}
    (tmp_path / "targets" / "manifest.json").write_text(json.dumps(partial))
    (tmp_path / "targets" / full["shards"][2]["file"]).unlink()
    resumed = build_targets(encoded, tok, tmp_path / "targets")
    assert resumed["complete"] and [s["n"] for s in resumed["shards"]] == [s["n"] for s in full["shards"]]
    assert resumed["shards"][0]["seconds"] == full["shards"][0]["seconds"]  # not recomputed
    other, _ = _cache(folder, vocab, tmp_path / "cache64", shard_size=64)
    with pytest.raises(ValueError, match="descriptor targets of other data"):
        build_targets(other, tok, tmp_path / "targets")
    # a review: the same corpus file edited in place (two molecules of one shard swapped: the same
    # names, sizes and shard counts), its cache built again, kept the old molecules' targets
    import shutil

    train = folder / "train.csv"
    header, first, second, *rest = train.read_text().splitlines(keepends=True)
    train.write_text(header + second + first + "".join(rest))
    shutil.rmtree(tmp_path / "cache")
    edited, _ = _cache(folder, vocab, tmp_path / "cache")
    keyed = [[(s["file"], s["n_valid"], s["n_tokens"]) for s in c.manifest["shards"]] for c in (edited, encoded)]
    assert keyed[0] == keyed[1]  # (what the targets were keyed on)
    with pytest.raises(ValueError, match=r"descriptor targets of other data \(cache differ\)"):
        build_targets(edited, tok, tmp_path / "targets")
    # targets recorded before the cache's identity was: taken on the shards' names and sizes
    manifest = json.loads((tmp_path / "targets" / "manifest.json").read_text())
    del manifest["cache"]
    (tmp_path / "targets" / "manifest.json").write_text(json.dumps(manifest))
    assert build_targets(edited, tok, tmp_path / "targets")["complete"]


def test_scaling_is_robust_and_drops_constant_descriptors():
    rng = np.random.RandomState(0)
    raw = np.stack([rng.normal(5.0, 2.0, 4000),  # scale ~ its sd
                    np.full(4000, 3.0),  # constant: left out
                    np.where(rng.rand(4000) < 0.9, 0.0, 1.0),  # quartiles equal: scaled by its sd
                    np.full(4000, np.nan),  # never computed: left out
                    np.r_[rng.normal(0, 1, 3990), np.full(10, 1e9)]], 1).astype(np.float32)  # heavy tail
    s = scaling(raw)
    assert s["kept"] == [True, False, True, False, True]
    assert s["center"][0] == pytest.approx(5.0, abs=0.1) and s["scale"][0] == pytest.approx(2.0, rel=0.05)
    assert s["scale"][2] == pytest.approx(np.std(raw[:, 2]), rel=1e-6)
    assert s["scale"][4] == pytest.approx(1.0, rel=0.05)  # the outliers do not inflate it


def test_scaled_targets_are_clipped_and_keep_missing_values(corpus, tmp_path):
    folder, vocab = corpus
    encoded, tok = _cache(folder, vocab, tmp_path / "cache")
    manifest = build_targets(encoded, tok, tmp_path / "targets")
    targets = DescriptorTargets(tmp_path / "targets")
    kept = np.asarray(manifest["scaling"]["kept"])
    assert targets.n_targets == kept.sum() and targets.names == [n for n, k in zip(descriptor_names(), kept) if k]
    z = targets.batch(1, np.arange(10))
    raw = load_file_np(tmp_path / "targets" / manifest["shards"][1]["file"])["raw"][:10][:, kept]
    center = np.asarray(manifest["scaling"]["center"])[kept]
    scale = np.asarray(manifest["scaling"]["scale"])[kept]
    with np.errstate(invalid="ignore"):
        expected = np.clip((raw - center) / scale, -CLIP, CLIP).astype(np.float32)
    np.testing.assert_array_equal(z, expected)
    assert np.nanmax(np.abs(z)) <= CLIP


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_mtr_run_resumes_bit_for_bit_and_warm_starts(corpus, tmp_path, model):
    folder, vocab = corpus
    cache = tmp_path / "cache"
    kwargs = dict(cache_dir=cache, objective="mtr", max_smiles=250, max_steps=10, checkpoint_every=3)
    full = run(folder, tmp_path / "full", vocab, model, **kwargs)
    assert full["finished"] and full["steps"] == 10
    losses = [h["eval_loss"] for h in full["history"]]
    assert [h["step"] for h in full["history"]] == [0, 4, 8, 10] and losses[-1] < losses[0]
    assert len({h["eval_median_loss"] for h in full["history"]}) == 1  # the reference: the same targets each time

    def no_accuracy(info):  # a regression has none
        assert info["accuracy"] is None

    with pytest.raises(Killed):
        run(folder, tmp_path / "killed", vocab, model, callback=kill_at(7, no_accuracy), **kwargs)
    resumed = run(folder, tmp_path / "killed", vocab, model, **kwargs)
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed["history"]] == [
        {k: v for k, v in h.items() if k != "seconds"} for h in full["history"]]
    a, b = load_file(str(tmp_path / "full" / "model.safetensors")), load_file(str(tmp_path / "killed" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert {k.split(".")[0] for k in a} == {"encoder", "mtr_head"}
    config = json.loads((tmp_path / "full" / "config.json").read_text())
    assert config["objective"] == "mtr" and "lm_head" not in config["params"]
    assert len(config["targets"]["names"]) == a["mtr_head.3.weight"].shape[0]
    # the first 250 records only: 248 valid (two of them are invalid)
    targets = DescriptorTargets(cache / "train_targets")
    assert EncodedCorpus(cache / "train").n_smiles == 248 == targets.shard(0).shape[0] + targets.shard(1).shape[0]
    with pytest.raises(ValueError, match="objective='mtr': it has no masked-LM head"):
        load_mlm(tmp_path / "full")
    # the encoder warm-starts the estimators, every weight of it
    reg = GMNetRegressor if model == "gmnet" else ChemBERTaRegressor
    cb = InitialWeights()
    reg.from_pretrained(tmp_path / "full", callbacks=[cb], **FIT).fit(SMILES, regression_target(SMILES))
    expected = _encoder_keys(model, a)
    assert expected and all(torch.equal(cb.state_[k], v) for k, v in expected.items())


def test_mtr_bad_arguments(corpus, tmp_path):
    folder, vocab = corpus
    with pytest.raises(ValueError, match="objective must be one of"):
        run(folder, tmp_path / "x", vocab, objective="mlm+mtr")
    with pytest.raises(ValueError, match="lm_head is the masked-LM head"):
        run(folder, tmp_path / "x", vocab, objective="mtr", lm_head="sphere")
    with pytest.raises(ValueError, match="max_smiles must be a positive integer"):
        run(folder, tmp_path / "x", vocab, max_smiles=0)


def test_cli_objective_and_max_smiles(corpus, tmp_path, capsys):
    from gmnet_sklearn.pretrain.__main__ import main

    folder, vocab = corpus
    args = [str(folder), str(tmp_path / "cli"), "--objective", "mtr", "--max-smiles", "100", "--vocab-file", str(vocab),
            "--max-steps", "2", "--batch-size", "32", "--eval-every", "2", "--quiet", "--set", "d_model=16",
            "--set", "n_layers=1", "--set", "n_heads=2", "--set", "k=4", "--set", "L=2"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finished"] and "eval_median_loss" in out["last_eval"]
    config = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert config["objective"] == "mtr" and config["training"]["definition"]["max_smiles"] == 100
    assert EncodedCorpus(tmp_path / "cli" / "cache" / "train").n_smiles == 99  # record 17 is invalid


def test_a_corpus_whose_first_shard_has_no_valid_smiles(tmp_path):
    from .test_pretrain import VALID, write_vocab

    vocab = write_vocab(tmp_path / "vocab.txt")
    assert scaling(np.zeros((0, 3), np.float32))["kept"] == [False] * 3  # (was: "too many values to unpack")
    bad = ["C1CC(", "c1cccc1", "C1CC("]
    (tmp_path / "bad.smi").write_text("\n".join(bad) + "\n")
    for objective in ("mtr", "mlm"):  # clear either way (mtr was: "too many values to unpack")
        with pytest.raises(ValueError, match=r"\['bad.smi'\]: no valid SMILES to train on \(3 records read, 3 invalid, 0 too long; e.g. \['C1CC\(', 'c1cccc1'"):
            run(tmp_path / "bad.smi", tmp_path / f"out_{objective}", vocab, objective=objective, test_corpus=None)
    # shard 0 (3 records) all invalid, the rest usable: the scaling comes from the first shard with rows
    (tmp_path / "mixed.smi").write_text("\n".join(bad + VALID[:60]) + "\n")
    summary = run(tmp_path / "mixed.smi", tmp_path / "mixed", vocab, objective="mtr", test_corpus=None,
                  shard_size=3, max_steps=2)
    targets = json.loads((tmp_path / "mixed" / "cache" / "train_targets" / "manifest.json").read_text())
    assert targets["shards"][0]["n"] == 0 and sum(targets["scaling"]["kept"]) > 0
    assert summary["steps"] == 2
    # scaling fitted on one molecule: no descriptor varies, so there is nothing to regress
    (tmp_path / "one.smi").write_text("\n".join(VALID[:1] + VALID[:60]) + "\n")
    with pytest.raises(ValueError, match="objective='mtr': no RDKit descriptor varies"):
        run(tmp_path / "one.smi", tmp_path / "one", vocab, objective="mtr", test_corpus=None, shard_size=1, max_steps=2)
