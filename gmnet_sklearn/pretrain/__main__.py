"""``gmnet-pretrain`` / ``python -m gmnet_sklearn.pretrain``: the command line over ``pretrain``."""

from __future__ import annotations

import argparse
import ast
import json
import sys

from ..cli import show_defaults
from .models import DEFAULT_PARAMS, LIBRARY_SHAPE


def _value(text: str):
    """A ``--set`` value: a Python literal (``False``, ``.1``), else JSON (``false``), else the text."""
    for parse in (ast.literal_eval, json.loads):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # (JSONDecodeError: a ValueError)
            pass
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gmnet-pretrain",
        description="Masked-LM (or descriptor-regression) pretraining of Chem-GMNet or the ChemBERTa baseline on a "
                    "SMILES corpus. Run the same command again to resume a killed or time-limited run.")
    p.add_argument("corpus", help="a SMILES file (.smi, .txt, .csv, optionally .gz) or a folder of them")
    p.add_argument("output_dir", help="run folder: cache, checkpoint and, when finished, the pretrained model")
    p.add_argument("--model", choices=sorted(DEFAULT_PARAMS), default="gmnet")
    p.add_argument("--shape", choices=("paper", "library"), default="paper",
                   help="paper: the paper's ChemBERTa-10M shape (d 384, 12 heads); library: the estimators' default "
                        "shape (d 256, 8 heads), so GMNetRegressor(pretrained=OUTPUT_DIR) needs no shape arguments")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="an architecture parameter, e.g. --set k=8 --set d_model=384 (over --shape)")
    p.add_argument("--test-corpus", default="auto", help="held-out SMILES file ('auto': test.* beside the corpus; 'none')")
    p.add_argument("--smiles-column", default=None, help="the SMILES column of CSV files (default: the one named 'smiles')")
    p.add_argument("--vocab-file", default=None, help="vocabulary (default: $GMNET_TOKENIZER_VOCAB, else DeepChem's 591 "
                   "tokens, shipped with the package)")
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup", type=float, default=0.05)
    p.add_argument("--lr-schedule", choices=["linear", "cosine", "constant"], default="linear")
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--objective", choices=("mlm", "mtr"), default="mlm",
                   help="mlm: masked-LM; mtr: regression of RDKit's 2D descriptors (ChemBERTa-2's MTR)")
    p.add_argument("--max-smiles", type=int, default=None, help="train on the corpus's first N records only")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-size", type=int, default=10_000, help="held-out SMILES evaluated (0: all of them)")
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--checkpoint-minutes", type=float, default=10.0)
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds; stop with a checkpoint after this long (exit status 3: the same command goes on)")
    p.add_argument("--shard-size", type=int, default=100_000)
    p.add_argument("--no-bucket", action="store_true", help="plain shuffled batches instead of length-bucketed ones")
    p.add_argument("--cache-dir", default=None, help="encoded corpus (default OUTPUT_DIR/cache; share it between arms)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=("float32", "bf16"), default="float32",
                   help="bf16: bfloat16 autocast of the forward on CUDA (ignored on CPU)")
    p.add_argument("--jobs", type=int, default=1, help="processes encoding the corpus into the cache (-1: one per core)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--prepare-only", action="store_true", help="encode the corpus into the cache, do not train")
    return show_defaults(p)


def _pretrain(pretrain, args, model_kwargs: dict, callback) -> dict:
    return pretrain(
        args.corpus, args.output_dir, args.model, test_corpus=None if args.test_corpus == "none" else args.test_corpus,
        smiles_column=args.smiles_column, vocab_file=args.vocab_file, max_length=args.max_length, epochs=args.epochs, max_steps=args.max_steps,
        batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay, warmup=args.warmup,
        lr_schedule=args.lr_schedule, max_grad_norm=args.max_grad_norm, mask_prob=args.mask_prob,
        eval_every=args.eval_every, eval_size=args.eval_size or None, checkpoint_every=args.checkpoint_every,
        checkpoint_minutes=args.checkpoint_minutes, time_limit=args.time_limit, shard_size=args.shard_size,
        bucket_by_length=not args.no_bucket, cache_dir=args.cache_dir, seed=args.seed, device=args.device,
        precision=args.precision, n_jobs=args.jobs, objective=args.objective, max_smiles=args.max_smiles,
        progress=not args.quiet, prepare_only=args.prepare_only, callback=callback, **model_kwargs)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    model_kwargs = dict(LIBRARY_SHAPE[args.model]) if args.shape == "library" else {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set needs NAME=VALUE, got {item!r}")
        model_kwargs[name.strip()] = _value(value.strip())
    if args.threads is not None:
        if args.threads < 1:  # (torch's own error was a traceback)
            parser.error(f"--threads must be a positive integer, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    from .checkpoint import RunInProgressError
    from .trainer import pretrain

    trained = []  # set by the callback after the first training step (kept small: no step's record)
    try:
        summary = _pretrain(pretrain, args, model_kwargs, callback=lambda step: trained or trained.append(True))
    except (ValueError, FileNotFoundError, RunInProgressError) as exc:
        if trained:  # raised while training: a failure to see whole, not a usage error
            raise
        # what is wrong with the arguments or the corpus, in the flags' names
        message = str(exc)
        for keyword, flag in (("vocab_file=", "--vocab-file PATH"), ("smiles_column=", "--smiles-column NAME"),
                              ("max_smiles=", "--max-smiles N"), ("shard_size=", "--shard-size N"),
                              ("test_corpus=None", "--test-corpus none")):
            message = message.replace(keyword, flag)
        # argparse's way (status 2, "prog: error: ..."), without its twenty lines of usage before the
        # one that matters: the message names the flag, where one is at fault
        parser.exit(2, f"{parser.prog}: error: {message}\n")
    if args.prepare_only:
        print(json.dumps(summary, indent=1))
        return 0
    last = summary["history"][-1] if summary["history"] else {}
    cache = summary["cache"]  # what the corpus gave: its skipped records, and the held-out file(s) evaluated on
    print(json.dumps({k: summary[k] for k in ("finished", "steps", "total_steps", "epochs", "smiles_seen", "seconds",
                                              "smiles_per_second", "path")}
                     | {"corpus": {k: cache[k] for k in ("n_read", "n_valid", "n_invalid", "n_too_long", "n_unknown")},
                        "held_out": [f["name"] for f in summary["definition"]["test"]], "last_eval": last}, indent=1))
    return 0 if summary["finished"] else 3  # (stopped by --time-limit: run the same command again to go on)


if __name__ == "__main__":
    sys.exit(main())
