"""Save a finished pretraining run (its config.json: budget, every evaluation, hardware) as a record in
benchmarks/results/pretrain/, for a run that is measured but not shipped:

    python -m benchmarks.pretrain_record runs/moses1-gmnet benchmarks/results/pretrain/moses1_gmnet.json \\
        --command "python -m gmnet_sklearn.pretrain ... (as it was run)" --git-commit COMMIT

The record's description (arm, objective, budget, shape) is read from the run's own config; the
command and the commit, which the config does not hold, are given as they were and the commit is
checked to exist.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from ._common import write_json_atomic


def shape_name(arm: str, params: dict) -> str:
    """"library" or "paper" where the run's parameters are that preset's, else "custom"."""
    from gmnet_sklearn.pretrain.models import DEFAULT_PARAMS, LIBRARY_SHAPE

    for name, preset in (("library", {**DEFAULT_PARAMS[arm], **LIBRARY_SHAPE[arm]}), ("paper", DEFAULT_PARAMS[arm])):
        if all(params.get(k) == v for k, v in preset.items() if k != "lm_head"):
            return name
    return "custom"


def describe(cfg: dict) -> str:
    arm = cfg["model"]
    training, definition = cfg["training"], cfg["training"]["definition"]
    objective = "descriptor-regression" if definition.get("objective") == "mtr" else "masked-LM"
    corpus = ", ".join(f["name"] for f in definition.get("corpus", []))
    return (f"{'Chem-GMNet' if arm == 'gmnet' else 'ChemBERTa'} {objective} pretraining on {corpus}: "
            f"{training['epochs']:.3g} epoch(s), {training['steps']} of {definition['total_steps']} steps at batch "
            f"{definition['batch_size']}, {shape_name(arm, definition['params'])} shape"
            + ("" if training.get("finished", True) else " (not finished)"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pretrain_record", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the run's output folder (config.json, model.safetensors)")
    p.add_argument("output", type=Path, help="the record to write")
    p.add_argument("--command", required=True, help="the command line that ran it, as it was")
    p.add_argument("--git-commit", required=True, help="the commit it ran at")
    args = p.parse_args(argv)
    cfg = json.loads((args.run / "config.json").read_text())
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.git_commit}^{{commit}}"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if found.returncode != 0:
        p.error(f"--git-commit {args.git_commit!r} is no commit of this repository")
    rec = {"run": describe(cfg), "command": args.command,
           "weights_sha256": hashlib.sha256((args.run / "model.safetensors").read_bytes()).hexdigest(),
           "git_commit": found.stdout.strip(), "config": cfg}
    write_json_atomic(args.output, rec)
    print(args.output, rec["weights_sha256"][:12])
    return 0


if __name__ == "__main__":
    sys.exit(main())
