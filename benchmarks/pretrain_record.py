"""Save a finished pretraining run (its config.json: budget, every evaluation, hardware) as a record in
benchmarks/results/pretrain/, for a run that is measured but not shipped:

    python -m benchmarks.pretrain_record runs/moses1-gmnet benchmarks/results/pretrain/moses1_gmnet.json library COMMIT
"""
import hashlib
import json
import sys
from pathlib import Path


def main() -> None:
    run, out, shape = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    cfg = json.loads((run / "config.json").read_text())
    arm = cfg["model"]
    rec = {"run": f"{'Chem-GMNet' if arm == 'gmnet' else 'ChemBERTa'} masked-LM pretraining on MOSES, one epoch, {shape} shape "
                  "(issue 26: the same budget, batches, masks and optimiser for both arms)",
           "command": f"python -m gmnet_sklearn.pretrain ../shared/data/pretrain/moses runs/moses1-{arm if shape == 'library' else 'paper-' + arm} "
                      f"--model {arm} --shape {shape} --cache-dir runs/moses-cache --epochs 1 --eval-every 500 "
                      "--checkpoint-every 250 --threads 1 (2-core CPU machine, the two arms side by side, one thread each)",
           "weights_sha256": hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest(),
           "git_commit": sys.argv[4], "config": cfg}
    out.write_text(json.dumps(rec, indent=1) + "\n")
    print(out, rec["weights_sha256"][:12])


if __name__ == "__main__":
    main()
