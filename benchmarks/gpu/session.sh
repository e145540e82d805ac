#!/usr/bin/env bash
# One device call (the `device` tool's run, `carry: [".gpu"]`, after benchmarks/gpu/prepare.sh):
# install the carried wheels, run the CUDA tests, measure what no earlier call has (batch 32 with
# both models also under torch.compile, and one ESOL seed per arm in float32 and bf16; the kernels
# of a Chem-GMNet step by time at batch 32 and 1024), then the expensive runs side by side until
# the deadline. The measurements earlier calls made (batch 512, masked-LM pretraining: their
# JSON is committed) run again with REMEASURE=1. Everything lands under $OUT (at most 8 files
# come back: 8 here with REMEASURE=1, 6 without).
#     bash benchmarks/gpu/session.sh SECONDS [SWEEP ARGS...]
# SECONDS: when, counted from the start, the sweep must end (leave the call's timeout 30 s above).
# SWEEP ARGS: one benchmarks.sweep command line's options (default: the chemberta3_moses runs still
# missing, Table 2's eight endpoints, both arms; a run starts only when predicted to end by the deadline).
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
[ -f .gpu/site.tar.xz ] && { python3 -c "import tarfile; tarfile.open('.gpu/site.tar.xz').extractall('/tmp/site', filter='data')" \
    || exit 1; }  # RDKit, packed small by prepare.sh (Python's tarfile: the image may lack xz)
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GMNET_DATA=$PWD/.gpu/data \
    GMNET_TOKENIZER_VOCAB=$PWD/.gpu/data/deepchem_smiles_vocab.txt GMNET_GIT_COMMIT=$(cat .gpu/commit)
T0=$(date +%s); END=${1:-500}; shift
elapsed() { echo $(( $(date +%s) - T0 )); }
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE -k cuda tests/test_cuda_graphs.py tests/test_triton.py tests/test_triton_readout.py \
    tests/test_model.py tests/test_estimators.py > $OUT/cuda_tests.log 2>&1; echo "tests rc=$? at $(elapsed) s"; tail -3 $OUT/cuda_tests.log
timeout 150 python3 -m benchmarks.throughput --device cuda --threads 4 --esol-seed-only --esol-seed gmnet chemberta \
    --esol-seed-bf16 --out $OUT/throughput_cuda_esol_seeds.json > $OUT/throughput.log 2>&1; echo "ESOL seeds rc=$? at $(elapsed) s"
# the graphed arms were measured before (throughput_cuda.json); here the ratio terms beside both models compiled
# (apart from the seeds: a compilation that runs long loses only its own figures)
timeout 200 python3 -m benchmarks.throughput --device cuda --threads 4 --no-peak-memory --arms gmnet_compiled chemberta_compiled \
    --out $OUT/throughput_cuda_compiled.json >> $OUT/throughput.log 2>&1
echo "compiled rc=$? at $(elapsed) s"; grep -E "mol/s|esol seed|failed" $OUT/throughput.log
if [ "${REMEASURE:-0}" = 1 ]; then
  timeout 60 python3 -m benchmarks.throughput --device cuda --threads 4 --batch-size 512 --rounds 3 --steps 4 --datasets esol \
      --no-peak-memory --out $OUT/throughput_cuda_batch512.json >> $OUT/throughput.log 2>&1; echo "batch 512 rc=$? at $(elapsed) s"
  timeout 90 python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
      --batch-size 1024 --steps 6 --gmnet-readout triton --bf16 --note "GPU device call, alone" \
      --output $OUT/pretrain_throughput_cuda.json >> $OUT/throughput.log 2>&1; echo "pretrain rc=$? at $(elapsed) s"
fi
for b in 32 1024; do  # where a step's device time goes (the kernels by time)
  timeout 45 python3 -m benchmarks.profile_step --arm gmnet --device cuda --batch-size $b --threads 4 >> $OUT/throughput.log 2>&1
done; echo "profiles rc=$? at $(elapsed) s"
D=$(( END - $(elapsed) )); echo "sweep deadline $D s"
[ "$D" -gt 60 ] || exit 0
python3 -m benchmarks.sweep --device cuda --threads 1 --deadline $D --archive $OUT/runs.tar.gz --log-dir /tmp/sweep_logs \
    --cuda-graphs ${@:---what table1 --protocol chemberta3_moses --endpoints bace_classification bbbp clintox tox21_sr_p53 esol \
    lipophilicity bace_regression clearance --workers 8 --step-seconds gmnet=0.05 chemberta=0.03} > $OUT/sweep.log 2>&1
tail -30 $OUT/sweep.log
