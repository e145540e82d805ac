"""Pretraining (gmnet_sklearn.pretrain): corpus reader, cache, masking, batches, resumable runs, CLI."""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from gmnet_sklearn.pretrain import pretrain
from gmnet_sklearn.pretrain.batches import BatchPlan, collate
from gmnet_sklearn.pretrain.cache import EncodedCorpus, build_cache, cache_cost
from gmnet_sklearn.pretrain.corpus import corpus_files, held_out_file, iter_file, iter_smiles, read_chunks
from gmnet_sklearn.pretrain.masking import Masker, step_generator
from gmnet_sklearn.tokenizer import SmilesTokenizer, tokenize_smiles

from ._smiles import SMILES

TINY_GMNET = dict(d_model=16, n_layers=1, n_heads=2, k=4, L=2, dropout=0.1)
TINY_CHEMBERTA = dict(d_model=16, n_layers=1, n_heads=2, intermediate_size=32, dropout=0.1, attention_dropout=0.1)
TINY = {"gmnet": TINY_GMNET, "chemberta": TINY_CHEMBERTA}
VALID = [s for s in SMILES if "+" not in s]  # enough chemistry for masking and batches


def write_vocab(path: Path, smiles=SMILES) -> Path:
    tok = SmilesTokenizer().fit(smiles)
    vocab = sorted(tok.vocabulary_.items(), key=lambda kv: kv[1])
    path.write_text("".join(t + "\n" for t, _ in vocab))
    return path


def write_csv(path: Path, smiles, gz: bool = False):
    opener = gzip.open if gz else open
    with opener(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "SMILES"])
        w.writerows([i, s] for i, s in enumerate(smiles))


@pytest.fixture
def corpus(tmp_path):
    """A folder corpus: train.csv (300 SMILES + 2 invalid ones) and test.csv (held out)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    rng = np.random.RandomState(0)
    train = list(rng.choice(VALID, 300))
    train[17] = "C1CC("  # RDKit rejects it
    train[150] = "c1cccc1"  # cannot be kekulised
    write_csv(folder / "train.csv", train)
    write_csv(folder / "test.csv", list(rng.choice(VALID, 40)))
    return folder, write_vocab(tmp_path / "vocab.txt")


# ---- corpus reader ------------------------------------------------------------------------
def test_reader_all_formats(tmp_path):
    smiles = ["CCO", "c1ccccc1", "CC(=O)O", "C#N"]
    (tmp_path / "a.smi").write_text("SMILES name\nCCO ethanol\n\n# comment\nc1ccccc1 benzene\nCC(=O)O\tacid\nC#N\n")
    (tmp_path / "b.txt").write_text("\n".join(smiles) + "\n")
    with open(tmp_path / "c.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["name", "smiles", "y"]] + [[f"m{i}", s, i] for i, s in enumerate(smiles)])
    with gzip.open(tmp_path / "d.smi.gz", "wt") as fh:
        fh.write("\n".join(smiles))
    write_csv(tmp_path / "e.csv.gz", smiles, gz=True)
    for name in ("a.smi", "b.txt", "c.csv", "d.smi.gz", "e.csv.gz"):
        assert list(iter_file(tmp_path / name)) == smiles, name
    # a folder: every corpus file in name order; test*/valid* files are held out
    write_csv(tmp_path / "test.csv", ["CCN"])
    assert [p.name for p in corpus_files(tmp_path)] == ["a.smi", "b.txt", "c.csv", "d.smi.gz", "e.csv.gz"]
    assert list(iter_smiles(tmp_path)) == smiles * 5
    assert list(iter_smiles(tmp_path, skip=6)) == (smiles * 5)[6:]
    assert held_out_file(tmp_path).name == "test.csv"
    assert held_out_file(tmp_path / "a.smi").name == "test.csv"


def test_reader_errors_name_the_file(tmp_path):
    write_csv(tmp_path / "x.csv", ["CCO"])
    (tmp_path / "x.csv").write_text("name,mol\na,CCO\n")
    with pytest.raises(ValueError, match=r"x\.csv.*no 'SMILES' column"):
        list(iter_file(tmp_path / "x.csv"))
    (tmp_path / "x.parquet").write_text("")
    with pytest.raises(ValueError, match="not a SMILES corpus file"):
        corpus_files(tmp_path / "x.parquet")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        corpus_files(tmp_path / "nothing")
    # a file that is not gzip, or a truncated one, is named with how far it was read
    (tmp_path / "plain.smi.gz").write_text("CCO\nCCN\n")
    with pytest.raises(ValueError, match=r"plain\.smi\.gz: unreadable after 0 records \(BadGzipFile"):
        list(iter_file(tmp_path / "plain.smi.gz"))
    blob = gzip.compress("".join(f"{'C' * (1 + i % 7)}O\n" for i in range(20_000)).encode())
    (tmp_path / "cut.csv.gz").write_bytes(gzip.compress(b"smiles\n") + blob[: len(blob) // 2])
    read = []
    with pytest.raises(ValueError, match=r"cut\.csv\.gz: unreadable after \d+ records \(EOFError"):
        for smi in iter_file(tmp_path / "cut.csv.gz"):
            read.append(smi)
    assert 0 < len(read) < 20_000


def test_reader_takes_a_byte_order_mark_and_a_folder_given_as_the_test_set_whole(tmp_path):
    (tmp_path / "excel.csv").write_bytes("\ufeffsmiles,y\nCCO,1\nC#N,2\n".encode("utf-8"))
    assert list(iter_file(tmp_path / "excel.csv")) == ["CCO", "C#N"]
    (tmp_path / "bom.smi").write_bytes("\ufeffSMILES\nCCO\n".encode("utf-8"))
    assert list(iter_file(tmp_path / "bom.smi")) == ["CCO"]  # the header is a header, not a record
    (tmp_path / "latin1.smi").write_bytes(b"CCO\nC\xe9C\nC#N\n")  # one byte that is not UTF-8
    assert list(iter_file(tmp_path / "latin1.smi")) == ["CCO", "C\ufffdC", "C#N"]  # an invalid record, counted later
    held = tmp_path / "held"
    held.mkdir()
    write_csv(held / "test.csv", ["CCN"])
    write_csv(held / "valid.csv", ["CCC"])
    with pytest.raises(ValueError, match="held out"):
        corpus_files(held)  # as a training corpus: its test*/valid* files are held out
    assert [p.name for p in corpus_files(held, hold_out=False)] == ["test.csv", "valid.csv"]


def test_gzip_corpus_larger_than_a_chunk_streams(tmp_path):
    smiles = [f"C{'C' * (i % 40)}O" for i in range(60_000)]  # ~1.6 MB of text
    write_csv(tmp_path / "big.csv.gz", smiles, gz=True)
    chunks = list(read_chunks(iter_smiles(tmp_path / "big.csv.gz"), 7_000))
    assert [len(c) for c in chunks] == [7_000] * 8 + [4_000]
    assert list(itertools.chain.from_iterable(chunks)) == smiles
    # memory stays at one record (plus the gzip buffers), not the corpus
    tracemalloc.start()
    n = sum(1 for _ in iter_smiles(tmp_path / "big.csv.gz"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 60_000 and peak < 400_000, peak


# ---- cache --------------------------------------------------------------------------------
def test_cache_counts_invalid_and_resumes(corpus, tmp_path):
    folder, vocab = corpus
    tok = SmilesTokenizer(vocab).fit([])
    files = corpus_files(folder)
    manifest = build_cache(files, tok, tmp_path / "c1", shard_size=128, max_length=30)
    cost = cache_cost(manifest)
    assert cost["n_read"] == 300 and cost["n_invalid"] == 2
    assert {e["smiles"] for e in manifest["invalid_examples"]} == {"C1CC(", "c1cccc1"}
    lengths = [len(tok.encode(s)) for s in iter_smiles(folder)]
    assert cost["n_too_long"] == sum(n > 30 for i, n in enumerate(lengths) if i not in (17, 150))
    assert cost["n_valid"] == 300 - 2 - cost["n_too_long"] and cost["bytes"] > 0 and cost["encode_seconds"] > 0
    # a shard holds the tokenizer's ids and RDKit flags of its SMILES, in order
    enc = EncodedCorpus(tmp_path / "c1")
    ids, flags, offsets = enc.shard(0)
    first = next(s for i, s in enumerate(iter_smiles(folder)) if i not in (17, 150) and lengths[i] <= 30)
    ref_ids, ref_flags = tok.encode_with_flags(first)
    np.testing.assert_array_equal(ids[offsets[0]:offsets[1]], ref_ids)
    np.testing.assert_array_equal(flags[offsets[0]:offsets[1]], ref_flags)
    # an interrupted build goes on from its last shard and ends the same
    import shutil

    shutil.copytree(tmp_path / "c1", tmp_path / "c2")
    m = json.loads((tmp_path / "c2" / "manifest.json").read_text())
    (tmp_path / "c2" / m["shards"][-1]["file"]).unlink()
    m["shards"], m["complete"] = m["shards"][:1], False
    (tmp_path / "c2" / "manifest.json").write_text(json.dumps(m))
    again = build_cache(files, tok, tmp_path / "c2", shard_size=128, max_length=30)
    assert [s["n_valid"] for s in again["shards"]] == [s["n_valid"] for s in manifest["shards"]]
    for i in range(len(manifest["shards"])):
        for a, b in zip(EncodedCorpus(tmp_path / "c1").shard(i), EncodedCorpus(tmp_path / "c2").shard(i)):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="cache of other data \\(max_length differ"):
        build_cache(files, tok, tmp_path / "c1", shard_size=128, max_length=40)
    with pytest.raises(ValueError, match="limit differ; limit is max_smiles"):
        build_cache(files, tok, tmp_path / "c1", shard_size=128, max_length=30, limit=5, limit_name="max_smiles")
    assert cost["n_unknown"] == 0  # the vocabulary was made from these SMILES


def test_a_same_size_edit_of_the_corpus_is_not_taken_for_it(corpus, tmp_path):
    """Found in review: a cache and a run were identified by the files' names and sizes, so an
    edit keeping the size (Cl to Br) resumed on the old data, silently."""
    folder, vocab = corpus
    train = folder / "train.csv"
    text = train.read_bytes()
    assert b"Cl" in text
    run = dict(vocab_file=vocab, batch_size=32, progress=False, **TINY_GMNET)
    pretrain(folder, tmp_path / "run", "gmnet", max_steps=4, time_limit=0, **run)  # stops at step 0: a checkpoint
    train.write_bytes(text.replace(b"Cl", b"Br"))
    with pytest.raises(ValueError, match=r"holds a run on other data: the corpus files have the names and sizes"):
        pretrain(folder, tmp_path / "run", "gmnet", max_steps=4, **run)
    # a finished cache (it may have been prepared on purpose) is refused, not built again, also
    # without a checkpoint
    (tmp_path / "run" / "checkpoint.pt").unlink()
    with pytest.raises(ValueError, match=r"cache of other data: the corpus files \['train.csv'\] have the names and sizes"):
        pretrain(folder, tmp_path / "run", "gmnet", max_steps=4, **run)
    train.write_bytes(text)  # the corpus as it was: the cache is taken again
    assert pretrain(folder, tmp_path / "run", "gmnet", max_steps=4, **run)["finished"]


def test_tokens_outside_the_vocabulary_are_counted_and_said(corpus, tmp_path):
    folder, _ = corpus
    small = tmp_path / "small_vocab.txt"
    small.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "C", "c", "(", ")", "1", "=", "O"]) + "\n")
    tok = SmilesTokenizer(small).fit([])
    manifest = build_cache(corpus_files(folder), tok, tmp_path / "cache", shard_size=128)
    kept = [s for s in iter_smiles(folder) if not isinstance(tok._encode_one(s), str)]  # (the invalid ones leave)
    expected = sum(t not in tok.vocabulary_ for s in kept for t in tokenize_smiles(s))
    assert cache_cost(manifest)["n_unknown"] == expected > 0
    with pytest.warns(UserWarning, match=f"{expected} of .* tokens of the corpus are not in the vocabulary"):
        pretrain(folder, tmp_path / "run", "gmnet", vocab_file=small, max_steps=1, batch_size=32, progress=False,
                 test_corpus=None, cache_dir=tmp_path / "cache2", **TINY_GMNET)


def test_a_folders_other_molecule_files_are_named_and_an_empty_corpus_says_so(tmp_path):
    (tmp_path / "a.smi").write_text("CCO\n")
    (tmp_path / "b.smi.bz2").write_bytes(b"BZh9")
    (tmp_path / "mols.smiles").write_text("CCN\n")
    (tmp_path / "pubchem.sdf.gz").write_bytes(b"")
    (tmp_path / "MANIFEST.md").write_text("notes")  # not molecule data: not named
    with pytest.warns(UserWarning, match=r"left out: \['b.smi.bz2', 'mols.smiles', 'pubchem.sdf.gz'\]") as caught:
        assert [p.name for p in corpus_files(tmp_path)] == ["a.smi"]
    assert caught[0].filename == __file__  # the caller's line
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "train.smi").write_text("\n")
    with pytest.raises(ValueError, match=r"\['train.smi'\]: no valid SMILES to train on \(0 records read, 0 invalid, 0 too long\)"):
        pretrain(empty, tmp_path / "run", "gmnet", vocab_file=write_vocab(tmp_path / "v.txt"), progress=False, **TINY_GMNET)


def test_a_cache_of_another_csv_column_is_not_taken_for_the_default_one(tmp_path):
    """smiles_column is part of the cache's identity whichever call names it."""
    csv = tmp_path / "c.csv"
    csv.write_text("smiles,other\nCCO,c1ccccc1\nCCN,CC(=O)O\n")
    tok = SmilesTokenizer().fit([])
    build_cache([csv], tok, tmp_path / "cache", smiles_column="other")
    with pytest.raises(ValueError, match="smiles_column differ"):
        build_cache([csv], tok, tmp_path / "cache")


def test_cache_built_by_several_processes_is_the_same(corpus, tmp_path):
    folder, vocab = corpus
    tok = SmilesTokenizer(vocab).fit([])
    files = corpus_files(folder)
    one = build_cache(files, tok, tmp_path / "one", shard_size=128, max_length=30)
    two = build_cache(files, tok, tmp_path / "two", shard_size=128, max_length=30, n_jobs=2)
    strip = ("encode_seconds", "n_jobs")
    assert [{k: v for k, v in s.items() if k not in strip} for s in two["shards"]] == \
        [{k: v for k, v in s.items() if k not in strip} for s in one["shards"]]
    assert two["invalid_examples"] == one["invalid_examples"] and {s["n_jobs"] for s in two["shards"]} == {2}
    for i in range(len(one["shards"])):
        for a, b in zip(EncodedCorpus(tmp_path / "one").shard(i), EncodedCorpus(tmp_path / "two").shard(i)):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="n_jobs must be a positive integer or -1, got 0"):
        build_cache(files, tok, tmp_path / "bad", n_jobs=0)


def test_an_unreadable_checkpoint_is_named(tmp_path):
    from gmnet_sklearn.pretrain.checkpoint import load_checkpoint

    (tmp_path / "checkpoint.pt").write_bytes(b"\x80\x02 not a checkpoint")
    with pytest.raises(ValueError, match=r"checkpoint\.pt: not a readable pretraining checkpoint"):
        load_checkpoint(tmp_path / "checkpoint.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match=r"list\.pt is not a gmnet_sklearn pretraining checkpoint"):
        load_checkpoint(tmp_path / "list.pt")


def test_runs_sharing_a_cache_take_turns_building_it(corpus, tmp_path):
    """A build waits for another process's (here: another open of the lock file) instead of
    writing the same shard files beside it, then finds the cache complete."""
    import threading

    from gmnet_sklearn.pretrain.cache import build_lock

    pytest.importorskip("fcntl")
    folder, vocab = corpus
    tok = SmilesTokenizer(vocab).fit([])
    files = corpus_files(folder)
    shared = tmp_path / "shared"
    shared.mkdir()
    done = []
    with build_lock(shared):
        t = threading.Thread(target=lambda: done.append(build_cache(files, tok, shared, shard_size=128, max_length=30)))
        t.start()
        t.join(timeout=1.0)
        assert t.is_alive() and not done and not (shared / "manifest.json").exists()  # waiting for the lock
    t.join(timeout=60)
    assert done and done[0]["complete"]
    again = build_cache(files, tok, shared, shard_size=128, max_length=30)
    assert again == done[0]


def test_batch_plan_visits_every_row_once_per_epoch():
    sizes = [10, 7, 23]
    plan = BatchPlan(sizes, batch_size=4, seed=3)
    lengths = [np.random.RandomState(i).randint(3, 30, n) for i, n in enumerate(sizes)]
    assert plan.steps_per_epoch == 3 + 2 + 6
    for epoch in range(2):
        seen = {s: [] for s in range(3)}
        for step in range(epoch * plan.steps_per_epoch, (epoch + 1) * plan.steps_per_epoch):
            pos = plan.position(step)
            assert pos["epoch"] == epoch
            seen[pos["shard"]] += list(plan.shard_batches_rows(epoch, pos["shard"], lengths[pos["shard"]])[pos["batch"]])
        for s, n in enumerate(sizes):
            assert sorted(seen[s]) == list(range(n))
    # a fresh plan (a resumed run) gives the same rows for the same step
    other = BatchPlan(sizes, batch_size=4, seed=3)
    p = other.position(17)
    assert p == plan.position(17)
    np.testing.assert_array_equal(other.shard_batches_rows(1, p["shard"], lengths[p["shard"]])[p["batch"]],
                                  plan.shard_batches_rows(1, p["shard"], lengths[p["shard"]])[p["batch"]])
    ids = np.arange(20)
    b_ids, b_flags, b_mask = collate(ids, ids % 2, np.array([0, 3, 8, 20]), np.array([1, 0]), pad_id=0)
    assert b_ids.tolist() == [[3, 4, 5, 6, 7], [0, 1, 2, 0, 0]] and b_mask.sum(1).tolist() == [5, 3]


# ---- masking ------------------------------------------------------------------------------
def test_masking_statistics(tmp_path):
    tok = SmilesTokenizer(write_vocab(tmp_path / "v.txt")).fit([])
    enc = tok.encode_batch(list(np.random.RandomState(0).choice(VALID, 4000)))
    ids, flags, mask = (torch.as_tensor(a) for a in enc.padded())
    flags = flags.long() | 1  # every position flagged, to see which flags masking clears
    masker = Masker(tok)
    inputs, labels, new_flags = masker(ids, step_generator(0, 0), flags)
    special = torch.as_tensor([tok.pad_id, tok.cls_id, tok.sep_id])
    is_special = torch.isin(ids, special)
    selected = labels != -100
    assert not selected[is_special].any() and torch.equal(inputs[is_special], ids[is_special])
    assert torch.equal(labels[selected], ids[selected])
    n_real = int((~is_special).sum())
    rate = selected.sum().item() / n_real
    assert abs(rate - 0.15) < 0.006, rate  # ~110k real tokens: sd of the rate ~0.001
    n_sel = int(selected.sum())
    to_mask = (inputs == tok.mask_id) & selected
    changed = (inputs != ids) & selected & ~to_mask
    kept = (inputs == ids) & selected
    assert abs(to_mask.sum().item() / n_sel - 0.8) < 0.015
    assert abs(changed.sum().item() / n_sel - 0.1) < 0.012
    assert abs(kept.sum().item() / n_sel - 0.1) < 0.012
    assert not (inputs[~selected] != ids[~selected]).any()  # nothing else changes
    assert not masker.special[inputs[changed]].any()  # random replacements are chemistry tokens
    # flags are cleared where the token was replaced, kept where it was not selected
    assert not new_flags[to_mask | changed].any() and new_flags[~selected].all()
    # the same seed gives the same masks; another step others
    again = masker(ids, step_generator(0, 0), flags)
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels)
    assert not torch.equal(masker(ids, step_generator(0, 1), flags)[1], labels)


# ---- training runs --------------------------------------------------------------------------
def run(folder, out, vocab, model="gmnet", **kwargs):
    # CPU: bit-for-bit resumption is a CPU promise (CUDA kernels may add in another order)
    args = dict(vocab_file=vocab, batch_size=32, max_steps=14, eval_every=4, checkpoint_every=5, shard_size=128,
                lr=2e-3, progress=False, seed=1, device="cpu")
    args.update(kwargs)
    return pretrain(folder, out, model, **{**TINY[model], **args})


class Killed(Exception):
    pass


def test_a_run_folder_is_trained_by_one_process_at_a_time(corpus, tmp_path):
    from gmnet_sklearn.pretrain import RunInProgressError
    from gmnet_sklearn.pretrain.checkpoint import run_lock

    folder, vocab = corpus
    out = tmp_path / "busy"
    out.mkdir()
    with run_lock(out):  # as another process training it would hold it (flock: per open file, so here too)
        with pytest.raises(RunInProgressError, match="another process is training this run"):
            run(folder, out, vocab, max_steps=2)
    assert not (out / "checkpoint.pt").exists()
    assert run(folder, out, vocab, max_steps=2)["finished"]  # free again once it is released


def test_a_file_system_without_locks_trains_without_one(corpus, tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fh, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)  # as on an NFS mount without lockd
    folder, vocab = corpus
    with pytest.warns(UserWarning) as caught:
        assert run(folder, tmp_path / "nfs", vocab, max_steps=2)["finished"]
    messages = [str(w.message) for w in caught]
    assert any("cannot lock it" in m and "Train this folder from one process only" in m for m in messages)  # the run's
    assert any("cannot lock it" in m and "Build a shared cache from one process" in m for m in messages)  # the cache's


def test_a_finished_run_called_again_leaves_its_folder_as_written(corpus, tmp_path, monkeypatch):
    from gmnet_sklearn.pretrain import trainer

    folder, vocab = corpus
    out = tmp_path / "done"
    first = run(folder, out, vocab, max_steps=3)
    written = {name: (out / name).read_bytes() for name in ("config.json", "model.safetensors", "vocab.txt")}
    monkeypatch.setattr(trainer, "_hardware", lambda device: {"cpu": "another host"})  # e.g. copied to a laptop
    again = run(folder, out, vocab, max_steps=3)
    assert again["finished"] and again["steps"] == first["steps"] == 3
    assert again["hardware"] == first["hardware"] != {"cpu": "another host"}  # the hardware that trained it
    assert {name: (out / name).read_bytes() for name in written} == written


def test_masking_never_selects_or_draws_a_special_token(deepchem_vocab):
    """DeepChem's vocabulary has [UNK] and [unused1..10] besides [PAD]/[CLS]/[SEP]/[MASK]: none is
    ever selected, kept as a label or drawn as a random replacement."""
    import re

    tok = SmilesTokenizer(deepchem_vocab).fit([])
    masker = Masker(tok)
    expected = {i for t, i in tok.vocabulary_.items() if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
                or re.fullmatch(r"\[unused\d+\]", t)}
    assert len(expected) == 15 and set(np.flatnonzero(masker.special.numpy())) == expected
    special_ids = torch.as_tensor(sorted(expected))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, tok.vocab_size, (256, 120), generator=g)  # every id, specials included
    ids[:, ::7] = special_ids[torch.randint(0, len(special_ids), (256, len(range(0, 120, 7))), generator=g)]
    inputs, labels, _ = masker(ids, step_generator(0, 0))
    is_special = masker.special[ids]
    assert (labels[is_special] == -100).all() and torch.equal(inputs[is_special], ids[is_special])
    replaced = (labels != -100) & (inputs != ids) & (inputs != tok.mask_id)
    assert replaced.sum() > 100 and not masker.special[inputs[replaced]].any()


def kill_at(step, check=None):
    """A ``pretrain`` callback that kills the run after step ``step`` (after ``check(info)``, if
    given, at every step)."""
    def callback(info):
        if check is not None:
            check(info)
        if info["step"] == step:
            raise Killed
    return callback


@pytest.mark.parametrize("model", ["gmnet", "chemberta"])
def test_killed_run_resumes_bit_for_bit(corpus, tmp_path, model):
    folder, vocab = corpus
    cache = tmp_path / "cache"
    full = run(folder, tmp_path / "full", vocab, model, cache_dir=cache)
    assert full["finished"] and full["steps"] == 14 and [h["step"] for h in full["history"]] == [0, 4, 8, 12, 14]

    out = tmp_path / "killed"
    with pytest.raises(Killed):  # killed after step 8: the checkpoint is the one of step 5
        run(folder, out, vocab, model, cache_dir=cache, callback=kill_at(8))
    assert not (out / "config.json").exists()
    with pytest.raises(Killed):  # killed again, at step 11 (checkpoint of step 10)
        run(folder, out, vocab, model, cache_dir=cache, callback=kill_at(11))
    part = run(folder, out, vocab, model, cache_dir=cache, time_limit=0.0)  # stops at once, not finished
    assert not part["finished"] and part["steps"] == 10
    resumed = run(folder, out, vocab, model, cache_dir=cache)
    assert resumed["finished"] and resumed["smiles_seen"] == full["smiles_seen"]
    strip = [{k: v for k, v in h.items() if k != "seconds"} for h in full["history"]]
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed["history"]] == strip
    from safetensors.torch import load_file

    a, b = load_file(str(tmp_path / "full" / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # other settings on an existing run are refused
    with pytest.raises(ValueError, match=r"other settings \(stored, given: \{'lr': \([0-9.e-]+, 0.001\)\}\)"):
        run(folder, out, vocab, model, cache_dir=cache, lr=1e-3)
    with pytest.raises(ValueError, match="other settings"):  # bf16 is part of a run's definition
        run(folder, out, vocab, model, cache_dir=cache, precision="bf16")
    # refused before the corpus is encoded: a new cache folder is never built
    with pytest.raises(ValueError, match=r"other settings \(stored, given: \{'lr'"):
        run(folder, out, vocab, model, cache_dir=tmp_path / "fresh_cache", lr=1e-3)
    assert not (tmp_path / "fresh_cache").exists()
    # a longer run of the same settings (another total_steps) is refused once the length is known
    with pytest.raises(ValueError, match=r"other settings \(stored, given: \{'total_steps': \(14, 20\)\}\)"):
        run(folder, out, vocab, model, cache_dir=cache, max_steps=20)


@pytest.mark.parametrize("lm_head", ["linear", "sphere"])
def test_pretrained_folder_loads_without_pickle(corpus, tmp_path, lm_head):
    from safetensors.torch import load_file

    from gmnet_sklearn.pretrain import load_mlm, read_config

    folder, vocab = corpus
    summary = run(folder, tmp_path / "run", vocab, max_steps=6, eval_every=3, lm_head=lm_head)
    config = read_config(tmp_path / "run")
    assert config["model"] == "gmnet" and config["params"]["k"] == 4 and config["training"]["steps"] == 6
    assert config["params"]["lm_head"] == lm_head
    assert (tmp_path / "run" / "vocab.txt").read_text() == Path(vocab).read_text()
    mlm, _ = load_mlm(tmp_path / "run")
    stored = load_file(str(tmp_path / "run" / "model.safetensors"))
    for key, value in mlm.state_dict().items():
        assert torch.equal(value, stored[mlm.tied_keys.get(key, key)]), key
    if lm_head == "sphere":  # the LM head's directions are the embedding's (stored once, tied again on load)
        assert mlm.lm_head.P is mlm.encoder.embedding.P and "lm_head.P" not in stored
        # a folder written before lm_head was a parameter (no "lm_head" in its config) has the sphere head
        config["params"].pop("lm_head")
        (tmp_path / "run" / "config.json").write_text(json.dumps(config))
        assert isinstance(load_mlm(tmp_path / "run")[0].lm_head, type(mlm.lm_head))
    assert summary["cache"]["n_invalid"] == 2
    assert summary["history"][0]["step"] == 0 and 0 <= summary["history"][-1]["eval_accuracy"] <= 1
    # a config.json asking for another (a larger) model than its weights: refused before it is built
    config = read_config(tmp_path / "run")
    config["params"]["d_model"] *= 64
    (tmp_path / "run" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"model.safetensors does not hold the weights of the model its "
                                         r"config.json describes: shapes: encoder\.\S+ is \(16, "):
        load_mlm(tmp_path / "run")


def test_cli(corpus, tmp_path, capsys):
    from gmnet_sklearn.pretrain.__main__ import main

    folder, vocab = corpus
    args = [str(folder), str(tmp_path / "cli"), "--model", "chemberta", "--vocab-file", str(vocab), "--max-steps", "3",
            "--batch-size", "32", "--eval-every", "3", "--quiet", "--set", "d_model=16", "--set", "n_layers=1",
            "--set", "n_heads=2", "--set", "intermediate_size=32"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finished"] and out["steps"] == 3 and "eval_loss" in out["last_eval"]
    # what the corpus gave and which file was held out, also under --quiet
    assert out["corpus"]["n_read"] == 300 and out["corpus"]["n_invalid"] == 2 and out["held_out"] == ["test.csv"]
    assert json.loads((tmp_path / "cli" / "config.json").read_text())["params"]["intermediate_size"] == 32
    assert main([str(folder), str(tmp_path / "prep"), "--vocab-file", str(vocab), "--prepare-only", "--quiet"]) == 0
    prepared = json.loads(capsys.readouterr().out)
    assert prepared["prepared"] and prepared["cache"]["n_invalid"] == 2 and not (tmp_path / "prep" / "checkpoint.pt").exists()


def test_cli_values_are_python_literals_and_bad_arguments_are_usage_errors(corpus, tmp_path, capsys, monkeypatch):
    from gmnet_sklearn.pretrain.__main__ import _value, main

    assert [_value(t) for t in ("False", "false", ".1", "8", "gelu", "None", "[1, 2]")] == [
        False, False, 0.1, 8, "gelu", None, [1, 2]]
    folder, vocab = corpus
    monkeypatch.delenv("GMNET_TOKENIZER_VOCAB", raising=False)
    for argv, message in [(["--vocab-file", str(tmp_path / "none.txt")],  # named by its flag, not by pretrain's keyword
                           f"--vocab-file PATH names no file: {tmp_path / 'none.txt'}"),
                          (["--vocab-file", str(vocab), "--set", "adaptive=yes"],
                           "gmnet model parameter adaptive must be a bool (like its default False), got 'yes'"),
                          (["--vocab-file", str(vocab), "--set", "k"], "--set needs NAME=VALUE, got 'k'"),
                          (["--vocab-file", str(vocab), "--threads", "0"], "--threads must be a positive integer, got 0")]:
        with pytest.raises(SystemExit) as exit_info:
            main([str(folder), str(tmp_path / "cli"), "--quiet", *argv])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and "vocab_file=" not in err


def test_a_folders_files_left_out_of_training_and_evaluation_are_named(corpus, tmp_path):
    folder, vocab = corpus
    write_csv(folder / "validated_actives.csv", VALID[:5])
    for test_corpus, unused in (("auto", ["validated_actives.csv"]), (None, ["test.csv", "validated_actives.csv"])):
        with pytest.warns(UserWarning, match=r"neither trained on .* nor evaluated \(test_corpus=.*\): "
                                             + re.escape(str(unused))):
            pretrain(folder, tmp_path / "prep", "gmnet", vocab_file=vocab, test_corpus=test_corpus,
                     prepare_only=True, progress=False)


def test_bad_arguments(corpus, tmp_path):
    folder, vocab = corpus
    with pytest.raises(ValueError, match="model must be one of"):
        pretrain(folder, tmp_path / "x", "bert", vocab_file=vocab)
    with pytest.raises(ValueError, match="unknown gmnet model parameters"):
        pretrain(folder, tmp_path / "x", "gmnet", vocab_file=vocab, intermediate_size=3)
    with pytest.raises(ValueError, match="parameter adaptive must be a bool .*got 'False'"):
        pretrain(folder, tmp_path / "x", "gmnet", vocab_file=vocab, adaptive="False")
    with pytest.raises(ValueError, match="parameter k must be a int .*got 8.0"):
        pretrain(folder, tmp_path / "x", "gmnet", vocab_file=vocab, k=8.0)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        pretrain(folder, tmp_path / "x", "gmnet", vocab_file=vocab, batch_size=0)
    with pytest.raises(ValueError, match="precision must be 'float32' or 'bf16', got 'fp16'"):
        pretrain(folder, tmp_path / "x", "gmnet", vocab_file=vocab, precision="fp16")
    # what only the masker, the test files, the device or the model can reject fails before the
    # corpus is encoded (hours on MOSES), not after
    for kwargs, error, match in [({"mask_prob": 1.5}, ValueError, "mask_prob must be in"),
                                 ({"test_corpus": tmp_path / "missing.smi"}, FileNotFoundError,
                                  "test_corpus .*missing.smi does not exist"),
                                 ({"device": "cdua"}, ValueError, "device='cdua' is not a torch device"),
                                 ({"seed": -1}, ValueError, "seed must be a non-negative integer"),
                                 ({"d_model": 15, "n_heads": 2}, ValueError, "d_model=15 is not divisible")]:
        with pytest.raises(error, match=match):
            pretrain(folder, tmp_path / "early", "gmnet", vocab_file=vocab, progress=False, **kwargs)
        assert not (tmp_path / "early" / "cache").exists()
    # a review: a file that is no gzip, and an output folder below a file, were tracebacks
    fake = tmp_path / "fake.smi.gz"
    fake.write_text("not gzip\n")
    with pytest.raises(ValueError, match=f"{fake}: unreadable \\(BadGzipFile"):
        pretrain(fake, tmp_path / "gz", "gmnet", vocab_file=vocab, progress=False, test_corpus=None)
    assert not (tmp_path / "gz").exists()  # (no folder with a lock file left behind)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="output_dir .*a_file/run cannot be made a folder"):
        pretrain(folder, tmp_path / "a_file" / "run", "gmnet", vocab_file=vocab, progress=False)


def test_chemberta_length_limit_and_an_empty_held_out_set(corpus, tmp_path):
    """RoBERTa positions start after [PAD]'s id, so the longest sequence is
    max_position_embeddings - pad_id - 1 (as in the estimators); a held-out set with no usable
    SMILES warns and evaluates nothing rather than reporting a loss of 0."""
    folder, _ = corpus
    tokens = [t for t in write_vocab(tmp_path / "v0.txt").read_text().splitlines() if t != "[PAD]"]
    vocab = tmp_path / "vocab_pad3.txt"
    vocab.write_text("\n".join(tokens[:3] + ["[PAD]"] + tokens[3:]) + "\n")
    params = {**TINY_CHEMBERTA, "max_position_embeddings": 40}
    with pytest.raises(ValueError, match=r"max_length must be in \[3, 36\] for chemberta, got 39"):
        pretrain(folder, tmp_path / "a", "chemberta", vocab_file=vocab, max_length=39, **params)
    bad = tmp_path / "bad_test.smi"
    bad.write_text("C1CC(\nc1cccc1\n")
    with pytest.warns(UserWarning, match="has no SMILES the tokenizer takes in its first 10000 records: no held-out evaluation"):
        summary = pretrain(folder, tmp_path / "b", "chemberta", vocab_file=vocab, test_corpus=bad, max_steps=2,
                           batch_size=16, progress=False, device="cpu", **params)
    assert summary["finished"] and all("eval_loss" not in h for h in summary["history"])


def test_numpy_integers_and_a_named_smiles_column(corpus, tmp_path):
    """Arguments from a numpy grid reach the run's JSON definition as numbers; a CSV corpus whose
    SMILES column has another name is read through ``smiles_column`` (and the CLI's option)."""
    folder, vocab = corpus
    chembl = tmp_path / "chembl"
    chembl.mkdir()
    smiles = list(iter_smiles(folder))[:64]
    with open(chembl / "train.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["chembl_id", "canonical_smiles"]] + [[f"C{i}", s] for i, s in enumerate(smiles)])
    with open(chembl / "test.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["chembl_id", "canonical_smiles"]] + [[f"T{i}", s] for i, s in enumerate(smiles[:8])])
    with pytest.raises(ValueError, match="no 'SMILES' column"):
        pretrain(chembl, tmp_path / "a", "chemberta", vocab_file=vocab, max_steps=2, progress=False, **TINY_CHEMBERTA)
    summary = pretrain(chembl, tmp_path / "b", "chemberta", smiles_column="canonical_smiles", vocab_file=vocab,
                       max_steps=np.int64(2), batch_size=np.int64(16), eval_size=np.int64(8), epochs=np.int64(1),
                       progress=False, device="cpu", **{**TINY_CHEMBERTA, "d_model": np.int64(16)})
    assert summary["finished"] and summary["steps"] == 2 and summary["history"][-1]["eval_masked_tokens"] > 0
    config = json.loads((tmp_path / "b" / "config.json").read_text())
    assert config["params"]["d_model"] == 16 and type(config["params"]["d_model"]) is int
    from gmnet_sklearn.pretrain.__main__ import main

    assert main([str(chembl), str(tmp_path / "c"), "--smiles-column", "canonical_smiles", "--vocab-file", str(vocab),
                 "--prepare-only", "--quiet"]) == 0


_KILLED_RUN = """
import sys, time, torch
torch.set_num_threads(1)
from gmnet_sklearn.pretrain import pretrain
folder, out, vocab = sys.argv[1:4]
pretrain(folder, out, "chemberta", vocab_file=vocab, cache_dir=out + "-cache", batch_size=16, max_steps=40,
         eval_every=10, checkpoint_every=3, shard_size=128, lr=2e-3, progress=False, seed=1, device="cpu",
         callback=lambda info: time.sleep(0.05), **{TINY!r})
"""


def test_sigkilled_process_resumes_bit_for_bit(corpus, tmp_path):
    """A real kill (SIGKILL, at whatever point the run is) twice, then the run finishes in this
    process: every weight and evaluation as in an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder, vocab = corpus
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        args = dict(vocab_file=vocab, batch_size=16, max_steps=40, eval_every=10, checkpoint_every=3, shard_size=128,
                    lr=2e-3, progress=False, seed=1, device="cpu")
        full = pretrain(folder, tmp_path / "full", "chemberta", cache_dir=tmp_path / "full-cache", **args,
                        **TINY_CHEMBERTA)
        out = tmp_path / "killed"
        script = _KILLED_RUN.replace("{TINY!r}", repr(TINY_CHEMBERTA))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        rng = np.random.RandomState(0)
        for _ in range(2):
            ckpt = out / "checkpoint.pt"
            before = ckpt.stat().st_mtime_ns if ckpt.exists() else None
            proc = subprocess.Popen([sys.executable, "-c", script, str(folder), str(out), str(vocab)], env=env)
            deadline = time.time() + 120
            # wait for a checkpoint of this process, then kill it somewhere in the steps after it
            while ((ckpt.stat().st_mtime_ns if ckpt.exists() else None) == before and proc.poll() is None
                   and time.time() < deadline):
                time.sleep(0.02)
            time.sleep(rng.uniform(0.1, 0.6))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed: make it longer"
        assert not (out / "config.json").exists()
        step_killed = torch.load(out / "checkpoint.pt", weights_only=True)["step"]
        assert 3 < step_killed < 40  # the second process went on from the first one's checkpoint
        resumed = pretrain(folder, out, "chemberta", cache_dir=str(out) + "-cache", **args, **TINY_CHEMBERTA)
    finally:
        torch.set_num_threads(threads)
    from safetensors.torch import load_file

    a, b = load_file(str(tmp_path / "full" / "model.safetensors")), load_file(str(out / "model.safetensors"))
    for key in a:
        assert torch.equal(a[key], b[key]), key
    drop = lambda hs: [{k: v for k, v in h.items() if k != "seconds"} for h in hs]  # noqa: E731
    assert drop(resumed["history"]) == drop(full["history"])


@pytest.mark.parametrize("model,head", [("gmnet", "linear"), ("gmnet", "sphere"), ("chemberta", None)])
def test_masked_lm_starts_near_uniform_at_the_paper_shape(model, head, tmp_path):
    """An untrained masked-LM scores the masked tokens at about log V (no runaway initial logits)."""
    from gmnet_sklearn.pretrain.models import DEFAULT_PARAMS, build_mlm
    from gmnet_sklearn.pretrain.trainer import masked_lm_loss

    tok = SmilesTokenizer(write_vocab(tmp_path / "v.txt")).fit([])
    ids, flags, mask = (torch.as_tensor(a) for a in tok.encode_batch(VALID * 2).padded())
    inputs, labels, flags = Masker(tok)(ids, step_generator(0, 0), flags.long())
    torch.manual_seed(0)
    params = DEFAULT_PARAMS[model] if head is None else {**DEFAULT_PARAMS[model], "lm_head": head}
    mlm = build_mlm(model, tok.vocab_size, tok.pad_id, params).eval()
    with torch.no_grad():
        loss, _, n = masked_lm_loss(mlm, inputs, flags, mask, labels)
    assert n > 50 and abs(float(loss) - np.log(tok.vocab_size)) < 1.0, float(loss)


def test_library_shape_is_the_estimators_default_shape():
    """pretrain(..., **LIBRARY_SHAPE[model]) (``gmnet-pretrain --shape library``) gives the shape
    the estimators have with no arguments, so ``pretrained=`` needs no shape arguments."""
    import inspect

    from gmnet_sklearn.estimators import ChemBERTaClassifier, ChemBERTaRegressor, GMNetClassifier, GMNetRegressor
    from gmnet_sklearn.pretrain.models import DEFAULT_PARAMS, LIBRARY_SHAPE, SHAPE_PARAMS

    for family, classes in (("gmnet", (GMNetRegressor, GMNetClassifier)),
                            ("chemberta", (ChemBERTaRegressor, ChemBERTaClassifier))):
        params = {**DEFAULT_PARAMS[family], **LIBRARY_SHAPE[family]}
        for cls in classes:
            signature = inspect.signature(cls.__init__).parameters
            assert {name: signature[name].default for name in SHAPE_PARAMS[family]} == {
                name: params[name] for name in SHAPE_PARAMS[family]}, cls.__name__


def test_blank_csv_lines_are_no_records(tmp_path):
    (tmp_path / "a.csv").write_text("id,smiles\n1,CCO\n\n2,c1ccccc1\n , \n3,\n")
    # blank lines are skipped as in .smi files and pandas; a row without its SMILES is a record
    assert list(iter_file(tmp_path / "a.csv")) == ["CCO", "c1ccccc1", ""]


def test_rng_state_resumes_on_a_host_with_fewer_gpus(monkeypatch):
    from gmnet_sklearn.pretrain import checkpoint

    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append((int(state[0]), device)))
    saved = {"torch": torch.get_rng_state(), "cuda": [torch.tensor([7], dtype=torch.uint8), torch.tensor([8], dtype=torch.uint8)]}
    checkpoint.set_rng_state(saved)  # saved on two GPUs (was: device 1, an invalid ordinal here)
    assert restored == [(7, 0)]



def test_training_snapshots_restore_cuda_rng_through_the_same_function(monkeypatch, tmp_path):
    # the estimators' training snapshots restore what they saved through the function tested above
    from gmnet_sklearn import GMNetRegressor
    from gmnet_sklearn.estimators import TrainingSnapshot, snapshot

    from ._smiles import regression_target
    from .test_training_snapshot import TINY, KillAtEpoch, Killed

    X = list(SMILES)
    y = regression_target(X)
    with pytest.raises(Killed):
        GMNetRegressor(**TINY, device="cpu", callbacks=[TrainingSnapshot(tmp_path), KillAtEpoch(2)]).fit(X, y)
    (path,) = tmp_path.glob("*.pt")
    state = torch.load(path, weights_only=False)
    state["cuda_rng"] = [torch.tensor([7], dtype=torch.uint8), torch.tensor([8], dtype=torch.uint8)]  # two GPUs'
    torch.save(state, path)
    calls = []
    monkeypatch.setattr(snapshot, "set_cuda_rng_states", lambda states: calls.append([int(s[0]) for s in states]))
    est = GMNetRegressor(**TINY, device="cpu", callbacks=[TrainingSnapshot(tmp_path)]).fit(X, y)
    assert est.resume_info_["resumed_from_epoch"] == 1 and calls == [[7, 8]]


def test_review_findings_on_the_run_definition(corpus, tmp_path, capsys):
    """Found in review: a test_corpus inside the training folder was trained on too (held-out
    figures on trained-on SMILES); float settings entered the fingerprint as given (0 is not 0.0
    to JSON; a numpy float is no JSON); time_limit and checkpoint_minutes were checked only once
    training ran; a folder holding a finished model without its checkpoint was trained again over
    it; the CLI exited 0 for a run its --time-limit stopped."""
    from gmnet_sklearn.pretrain.__main__ import main

    folder, vocab = corpus
    write_csv(folder / "extra.csv", VALID[:30])
    with pytest.warns(UserWarning, match=r"\['extra.csv'\] is test_corpus, so it is evaluated and not trained on"):
        summary = pretrain(folder, tmp_path / "overlap", "gmnet", vocab_file=vocab, test_corpus=folder / "extra.csv",
                           prepare_only=True, progress=False, **TINY_GMNET)
    assert summary["cache"]["n_valid"] == 298  # train.csv alone (300 less its two invalid SMILES)
    for kwargs, match in [({"time_limit": "3000"}, "time_limit must be a real number"),
                          ({"time_limit": -1}, "time_limit must be >= 0"),
                          ({"checkpoint_minutes": 0}, "checkpoint_minutes must be > 0"),
                          ({"lr": float("nan")}, "lr must be a real number, got nan")]:
        with pytest.raises(ValueError, match=match):
            pretrain(folder, tmp_path / "early", "gmnet", vocab_file=vocab, progress=False, **kwargs)
        assert not (tmp_path / "early" / "cache").exists()
    out = tmp_path / "run"
    args = [str(folder), str(out), "--vocab-file", str(vocab), "--max-steps", "4", "--batch-size", "32",
            "--eval-every", "2", "--quiet", "--warmup", "0", "--time-limit", "0",
            *[f"--set={k}={v}" for k, v in TINY_GMNET.items()]]
    assert main(args) == 3  # stopped by its time limit: not finished
    capsys.readouterr()
    # resumed from Python with an int warmup and a numpy float lr: the same run
    done = pretrain(folder, out, "gmnet", vocab_file=vocab, max_steps=4, batch_size=32, eval_every=2, warmup=0,
                    lr=np.float64(5e-4), progress=False, **TINY_GMNET)
    assert done["finished"] and done["steps"] == 4
    (out / "checkpoint.pt").unlink()
    with pytest.raises(ValueError, match="holds a pretrained model .* but no checkpoint.pt"):
        pretrain(folder, out, "gmnet", vocab_file=vocab, max_steps=4, batch_size=32, eval_every=2, progress=False,
                 **TINY_GMNET)


def test_a_run_stored_with_integer_float_settings_is_the_same_run(tmp_path):
    """Runs started before the float settings became floats stored warmup=0 as 0: resuming them
    must not be refused now that the same call gives 0.0."""
    from gmnet_sklearn.pretrain.trainer import _refuse_other_settings

    stored = {"warmup": 0, "weight_decay": 0, "lr": 0.001, "batch_size": 32}
    _refuse_other_settings(tmp_path, {"definition": json.dumps(stored)}, {**stored, "warmup": 0.0, "weight_decay": 0.0})
    with pytest.raises(ValueError, match="other settings"):
        _refuse_other_settings(tmp_path, {"definition": json.dumps(stored)}, {**stored, "warmup": 0.1})
    with pytest.raises(ValueError, match="other settings"):  # an int setting stays an int
        _refuse_other_settings(tmp_path, {"definition": json.dumps(stored)}, {**stored, "batch_size": 32.0})


def test_what_a_chemists_corpus_gets_wrong_is_said_before_encoding(corpus, tmp_path):
    """A later CSV's header, or an auto-chosen held-out file's, failed only after the corpus was
    encoded (minutes on MOSES), the latter suggesting --smiles-column; a first attempt that failed
    left a cache that refused the same command once the file was fixed; a refused folder (a
    shipped encoder's) was left a .run.lock; an output_dir that is a file was a raw traceback (a review)."""
    folder, vocab = corpus
    (folder / "test.csv").write_text("compound_id,pIC50\nA,5.1\n")
    with pytest.raises(ValueError, match=r"test.csv: no 'SMILES' column .*held-out set because it is named test.csv "
                                         r"beside the corpus: pass test_corpus=None or another file"):
        pretrain(folder, tmp_path / "run", "gmnet", vocab_file=vocab, prepare_only=True, progress=False)
    assert not (tmp_path / "run" / "cache").exists()  # before any encoding
    (folder / "test.csv").unlink()
    (folder / "more.csv").write_text("SMILES_canonical\nCCO\n")
    with pytest.raises(ValueError, match=r"more.csv: no 'SMILES' column .*pass smiles_column="):
        pretrain(folder, tmp_path / "run", "gmnet", vocab_file=vocab, prepare_only=True, progress=False)
    (folder / "more.csv").write_text("CCO\nCCN\n")  # no header at all
    with pytest.raises(ValueError, match=r"its first line is a molecule, not a header"):
        pretrain(folder, tmp_path / "run", "gmnet", vocab_file=vocab, prepare_only=True, progress=False)
    (folder / "more.csv").unlink()

    empty = tmp_path / "mine.smi"
    empty.write_text("")
    with pytest.raises(ValueError, match="no valid SMILES to train on"):
        pretrain(empty, tmp_path / "run2", "gmnet", vocab_file=vocab, test_corpus=None, progress=False, **TINY_GMNET)
    empty.write_text("\n".join(VALID[:40]) + "\n")
    with pytest.warns(UserWarning, match=r"a cache of other data .*stopped before training \(no checkpoint.pt\): built again"):
        summary = pretrain(empty, tmp_path / "run2", "gmnet", vocab_file=vocab, test_corpus=None, progress=False,
                           prepare_only=True, **TINY_GMNET)
    assert summary["cache"]["n_valid"] == 40

    finished = tmp_path / "finished"
    finished.mkdir()
    (finished / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="holds a pretrained model"):
        pretrain(folder, finished, "gmnet", vocab_file=vocab, progress=False, **TINY_GMNET)
    assert sorted(p.name for p in finished.iterdir()) == ["config.json"]
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        pretrain(folder, tmp_path / "a_file", "gmnet", vocab_file=vocab, progress=False, **TINY_GMNET)
