#!/usr/bin/env bash
# One device call (the `device` tool's run, `carry: [".gpu"]`, after benchmarks/gpu/prepare.sh):
# install the carried wheels, then the phases named in PHASES until SECONDS (counted from the start)
# when the sweep must end (leave the call's timeout 30 s above). The phases that time run first,
# alone on the GPU, in the order below; then the sweep in the background with the time left, and
# the tests beside it (correctness needs no quiet GPU). Everything lands under $OUT (at most 8 files
# come back).
#     [PHASES="sweep tests"] bash benchmarks/gpu/session.sh SECONDS [SWEEP ARGS...]
# Phases that time (alone):
#   forms     the Triton read-out's forms (gm/ops/sphere_readout/triton.py FORMS: "fused" ships, "gemm"
#             writes the monomials and leaves the matmuls to cuBLAS) interleaved in masked-LM
#             pretraining at batch 1024, float32 and TF32, and in the batch-32 training/inference step
#   seeds     one ESOL seed per arm in float32 and bf16 (time and bf16's accuracy effect)
#   compiled  both models' steps under torch.compile (ESOL lengths)
#   remeasure batch 512 and masked-LM pretraining again (their JSON is committed)
#   tf32      TF32 tensor cores (--matmul-precision high: torch's matmuls and the fused kernels' dots):
#             masked-LM pretraining at batch 1024 as it ships and under TF32 (the same call, so the two
#             compare), and one ESOL seed per arm under TF32 (its accuracy effect)
#   backward  the Triton read-out's backward forms (gm/ops/sphere_readout/triton.py BACKWARD_FORMS)
#             interleaved in masked-LM pretraining at batch 1024, in float32 and under TF32
#   tiles     the Triton read-out's tile settings, one at a time and combined (benchmarks.readout_tiles)
#   attention the Triton attention's tile rules (gm/ops/dual_ska/triton.py TILE_RULES: the shipped one,
#             "one_key_block" and neighbours of it) interleaved in masked-LM pretraining at batch 1024,
#             then the batch-32 step on graphs with the shipped rule and "one_key_block"
#   profile   the kernels of a Chem-GMNet step by time at batch 1024 and 32 (PROFILE_BATCHES)
#   pretrain  masked-LM pretraining of both arms side by side on the whole MOSES corpus (prepare.sh with
#             PRETRAIN_CORPUS=1 carries it), the shipped runs' recipe and shape for PRETRAIN_EPOCHS (4)
#             epochs at batch PRETRAIN_BATCH (1024), stopped with a checkpoint when the call's time
#             less PRETRAIN_RESERVE (60 s, for packing) is spent (or PRETRAIN_SECONDS, if less); each run folder (the encoder once finished, its checkpoint either way,
#             its log) comes back as $OUT/moses<E>_<arm>.tar.gz.part-* (15 MB pieces; prepare.sh carries
#             the pieces found in runs/gpu_pretrain/ back, and this phase resumes from them)
# Then:
#   sweep     the expensive runs, several at once, in the background until the deadline
#             (SWEEP ARGS: one benchmarks.sweep command line's options; default: every missing
#             run of Table 2's eight endpoints under tuned_moses_ft, tuned_moses and chemberta3_moses
#             in that order, both arms)
#   tests     the CUDA tests, beside the sweep
cd "$(dirname "$0")/../.."
T0=$(date +%s)  # SECONDS count from here, the install included
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 1
[ -f .gpu/site.tar.xz ] && [ ! -d /tmp/site/rdkit ] && { python3 -c "import tarfile; tarfile.open('.gpu/site.tar.xz').extractall('/tmp/site', filter='data')" \
    || exit 1; }  # RDKit, packed small by prepare.sh (Python's tarfile: the image may lack xz)
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 GMNET_DATA=$PWD/.gpu/data \
    GMNET_TOKENIZER_VOCAB=$PWD/.gpu/data/deepchem_smiles_vocab.txt GMNET_GIT_COMMIT=$(cat .gpu/commit)
END=${1:-500}; shift
PHASES=${PHASES:-sweep tests}
elapsed() { echo $(( $(date +%s) - T0 )); }
has() { [[ " $PHASES " == *" $1 "* ]]; }
left() { echo $(( END - $(elapsed) )); }
# a timed phase's limit: its own, or what is left before SECONDS less 30 s, whichever is less
cap() { local l=$(( $(left) - 30 )); echo $(( $1 < l ? $1 : (l > 1 ? l : 1) )); }
if has forms; then
  for mp in highest high; do
    timeout $(cap 120) python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
        --batch-size 1024 --steps 6 --readout-form fused gemm --matmul-precision $mp --note "GPU device call, alone" \
        --output $OUT/pretrain_throughput_cuda_forms_$mp.json >> $OUT/throughput.log 2>&1; echo "read-out forms ($mp) rc=$? at $(elapsed) s"
  done
  timeout $(cap 150) python3 -m benchmarks.throughput --device cuda --threads 4 --no-peak-memory --rounds 3 --steps 6 \
      --out $OUT/throughput_cuda_forms.json >> $OUT/throughput.log 2>&1; echo "batch 32 with the forms rc=$? at $(elapsed) s"
fi
if has seeds; then
  timeout $(cap 160) python3 -m benchmarks.throughput --device cuda --threads 4 --esol-seed-only --esol-seed gmnet chemberta \
      --esol-seed-bf16 --out $OUT/throughput_cuda_esol_seeds.json >> $OUT/throughput.log 2>&1; echo "ESOL seeds rc=$? at $(elapsed) s"
fi
if has compiled; then  # the graphed arms were measured before (throughput_cuda.json); here the ratio terms beside both models compiled
  timeout $(cap ${COMPILED_SECONDS:-200}) python3 -m benchmarks.throughput --device cuda --threads 4 --no-peak-memory --datasets esol \
      --rounds 3 --arms gmnet_compiled chemberta_compiled --out $OUT/throughput_cuda_compiled.json >> $OUT/throughput.log 2>&1
  echo "compiled rc=$? at $(elapsed) s"
fi
if has remeasure; then
  timeout $(cap 120) python3 -m benchmarks.throughput --device cuda --threads 4 --batch-size 512 --rounds 3 --steps 4 --datasets esol \
      --arms gmnet_graphs chemberta_graphs --no-peak-memory --out $OUT/throughput_cuda_batch512.json >> $OUT/throughput.log 2>&1; echo "batch 512 rc=$? at $(elapsed) s"
  timeout $(cap 90) python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
      --batch-size 1024 --steps 6 --gmnet-readout triton --bf16 --note "GPU device call, alone" \
      --output $OUT/pretrain_throughput_cuda.json >> $OUT/throughput.log 2>&1; echo "pretrain rc=$? at $(elapsed) s"
fi
if has tf32; then
  for mp in highest high; do
    timeout $(cap 90) python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
        --batch-size 1024 --steps 6 --gmnet-readout triton --matmul-precision $mp --note "GPU device call, alone" \
        --output $OUT/pretrain_throughput_cuda_$mp.json >> $OUT/throughput.log 2>&1; echo "pretrain ($mp) rc=$? at $(elapsed) s"
  done
  timeout $(cap 120) python3 -m benchmarks.throughput --device cuda --threads 4 --esol-seed-only --esol-seed gmnet chemberta \
      --matmul-precision high --out $OUT/throughput_cuda_esol_seeds_tf32.json >> $OUT/throughput.log 2>&1; echo "ESOL seeds (TF32) rc=$? at $(elapsed) s"
fi
if has backward; then  # the read-out backward's forms side by side ("gmnet" is the shipped form, auto at this batch)
  for mp in highest high; do
    timeout $(cap 120) python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
        --batch-size 1024 --steps 6 --readout-backward $([ $mp = highest ] && echo reuse-split reuse-atomic gather-split) gather-atomic \
        --matmul-precision $mp --note "GPU device call, alone" --output $OUT/pretrain_throughput_cuda_backward_$mp.json >> $OUT/throughput.log 2>&1
    echo "backward forms ($mp) rc=$? at $(elapsed) s"
  done
fi
if has tiles; then
  timeout $(cap 180) python3 -m benchmarks.readout_tiles --device cuda --note "GPU device call, alone" \
      --output $OUT/readout_tiles_cuda.json >> $OUT/throughput.log 2>&1; echo "tiles rc=$? at $(elapsed) s"
fi
if has attention; then  # (JSON rules: gm/ops/dual_ska/triton.py TILE_SETTINGS)
  timeout $(cap 180) python3 -m benchmarks.pretrain_throughput --device cuda --threads 4 --corpus .gpu/moses --n-smiles 20000 \
      --batch-size 1024 --steps 6 --attention-tiles one_key_block \
      '{"ONE_KEY_BLOCK_MAX": 64, "QUERY_BLOCK": 32, "FUSE_QUERIES": true}' '{"ONE_KEY_BLOCK_MAX": 64, "FUSE_QUERIES": true, "NUM_WARPS": 4}' \
      '{"ONE_KEY_BLOCK_MAX": 128, "FUSE_QUERIES": true}' '{"ONE_KEY_BLOCK_MAX": 64}' \
      --note "GPU device call, alone" --output $OUT/pretrain_throughput_cuda_attention.json >> $OUT/throughput.log 2>&1
  echo "attention tiles (pretraining) rc=$? at $(elapsed) s"
  timeout $(cap 150) python3 -m benchmarks.throughput --device cuda --threads 4 --no-peak-memory --rounds 3 --steps 6 \
      --arms gmnet_graphs gmnet_graphs_attention_one_key_block chemberta_graphs --out $OUT/throughput_cuda_attention.json >> $OUT/throughput.log 2>&1
  echo "attention tiles (batch 32) rc=$? at $(elapsed) s"
fi
if has profile; then  # where a step's device time goes (the kernels by time)
  for b in ${PROFILE_BATCHES:-1024 32}; do
    [ "$(left)" -gt 30 ] && timeout 45 python3 -m benchmarks.profile_step --arm gmnet --device cuda --batch-size $b --threads 4 >> $OUT/throughput.log 2>&1
  done; echo "profiles done at $(elapsed) s"
fi
if has pretrain && [ ! -d .gpu/moses_full ]; then
  echo "pretrain phase skipped: .gpu/moses_full is missing (run prepare.sh with PRETRAIN_CORPUS=1)"
elif has pretrain; then  # the corpus is encoded once (16 cores), then both arms train at once
  E=${PRETRAIN_EPOCHS:-4}; B=${PRETRAIN_BATCH:-1024}; P0=$(elapsed)
  PD=$(( $(left) - ${PRETRAIN_RESERVE:-60} ))  # all the call has left but the packing's share (and the tests')
  [ -n "$PRETRAIN_SECONDS" ] && [ "$PRETRAIN_SECONDS" -lt "$PD" ] && PD=$PRETRAIN_SECONDS
  ARMS=""  # a run prepare.sh found finished (its pieces stayed home) is neither trained again nor packed
  for arm in gmnet chemberta; do
    [ -f .gpu/pretrain/moses${E}_$arm.finished ] && echo "$arm: finished before, left alone" || ARMS="$ARMS $arm"
  done
  pack() {  # each run folder back as 15 MB pieces, whenever the phase ends (a timeout's kill included)
    for arm in $ARMS; do
      [ -d /tmp/moses$E-$arm ] || continue
      tail -2 /tmp/moses$E-$arm/train.log  # (the log is in the folder: no file of its own, at most 8 come back)
      rm -f $OUT/moses${E}_$arm.tar.gz.part-*
      tar czf - -C /tmp moses$E-$arm | split -b 15M - $OUT/moses${E}_$arm.tar.gz.part-
    done
  }
  for arm in $ARMS; do  # a run stopped in an earlier call goes on from its checkpoint
    ls .gpu/pretrain/moses${E}_$arm.tar.gz.part-* > /dev/null 2>&1 && cat .gpu/pretrain/moses${E}_$arm.tar.gz.part-* | tar xzf - -C /tmp
  done
  rc=1
  if [ -z "$ARMS" ]; then
    echo "pretraining: both runs finished before, nothing to do"
  elif [ "$PD" -lt 120 ]; then  # (timeout 0 would mean no limit at all)
    echo "pretraining skipped: $PD s left for it, too little"
  else
    timeout $PD python3 -m gmnet_sklearn.pretrain .gpu/moses_full /tmp/moses-prepare --cache-dir /tmp/moses-cache \
        --prepare-only --jobs -1 --quiet > $OUT/pretrain_prepare.log 2>&1; rc=$?; echo "corpus encoded rc=$rc at $(elapsed) s"
    [ $rc -ne 0 ] && echo "pretraining not started: the corpus was not encoded (pretrain_prepare.log)"
  fi
  TL=$(( PD - ($(elapsed) - P0) - 45 ))
  if [ $rc -eq 0 ] && [ "$TL" -lt 60 ]; then
    echo "pretraining not started: $TL s left for it after encoding"
  elif [ $rc -eq 0 ]; then
    trap pack EXIT  # the call's own timeout (SIGTERM) stops this script: pack first (not on SIGKILL)
    for arm in $ARMS; do
      mkdir -p /tmp/moses$E-$arm
      timeout $(( TL + 40 )) python3 -m gmnet_sklearn.pretrain .gpu/moses_full /tmp/moses$E-$arm --model $arm --shape library \
          --cache-dir /tmp/moses-cache --epochs $E --batch-size $B --eval-every 500 --checkpoint-minutes 1 --device cuda \
          --threads 2 --quiet --time-limit $TL >> /tmp/moses$E-$arm/train.log 2>&1 &
    done; wait; echo "pretraining stopped at $(elapsed) s"
    trap - EXIT; pack
  fi
fi
if has sweep && [ "$(left)" -gt 60 ]; then
  D=$(left); echo "sweep deadline $D s"
  python3 -m benchmarks.sweep --device cuda --threads 1 --deadline $D --archive $OUT/runs.tar.gz --log-dir /tmp/sweep_logs \
      --cuda-graphs ${@:---what table1 --protocol tuned_moses_ft tuned_moses chemberta3_moses --endpoints bace_classification bbbp \
      clintox tox21_sr_p53 esol lipophilicity bace_regression clearance --workers 15 --step-seconds gmnet=0.06 chemberta=0.04} \
      > $OUT/sweep.log 2>&1 &
  SWEEP=$!
fi
if has tests && [ "$(left)" -gt 30 ]; then
  # -v: a test per line as it ends, so a log cut by the timeout still names what ran
  timeout $(( $(left) > 300 ? 300 : $(left) )) python3 -m pytest -v -p no:cacheprovider -rfE -k cuda tests/test_cuda_graphs.py \
      tests/test_triton.py tests/test_triton_readout.py tests/test_model.py tests/test_estimators.py > $OUT/cuda_tests.log 2>&1
  echo "tests rc=$? at $(elapsed) s"; tail -3 $OUT/cuda_tests.log
fi
[ -f $OUT/throughput.log ] && grep -E "mol/s|SMILES/s|esol seed|failed|fastest" $OUT/throughput.log
if [ -n "$SWEEP" ]; then wait $SWEEP; echo "sweep rc=$? at $(elapsed) s"; tail -30 $OUT/sweep.log; fi
