#!/usr/bin/env bash
# Fill .gpu/ (ignored through .git/info/exclude, named in the device tool's `carry`) with what a
# GPU session's calls need and the device image lacks: Python 3.12 wheels of the packages below
# (the versions installed here), the MoleculeNet files of the runs (gzipped: the tree and carried
# folders must stay under 64 MiB), the vocabulary, a MOSES slice, and the commit to record.
#     bash benchmarks/gpu/prepare.sh [ENDPOINT_FILES...]
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${SHARED:-../shared}
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.gpu/' >> .git/info/exclude; }
rm -rf .gpu && mkdir -p .gpu/whl .gpu/data .gpu/moses
pins=$(python -m pip list --format=freeze 2>/dev/null | grep -iE '^(rdkit|skorch|pooch|skops|platformdirs|prettytable|wcwidth)==')
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl $pins
# RDKit's wheel (31 MB) is most of the carry: unpacked without its Contrib folder (nothing here
# imports it), shared libraries stripped of symbols and xz-compressed it is about 16 MB
# (.gpu/site.tar.xz, unpacked into the install target by session.sh). Checked here on the same
# version's cp311 build: the stripped libraries import and compute.
tmp=$(mktemp -d); (cd "$tmp" && unzip -q "$OLDPWD"/.gpu/whl/rdkit-*.whl && rm -rf rdkit/Contrib \
    && find . -name '*.so*' -exec strip --strip-unneeded {} + && tar cf - . | xz -9 -T2 > "$OLDPWD/.gpu/site.tar.xz")
rm -rf "$tmp" .gpu/whl/rdkit-*.whl
if [ "${PRETRAIN_CORPUS:-0}" = 1 ]; then
  files=${*:-}  # a pretrain call reads MOSES only: the room goes to the corpus and a stopped run's pieces
else
  files=${*:-delaney-processed.csv freesolv.csv Lipophilicity.csv HIV.csv bace.csv BBBP.csv clintox.csv.gz sider.csv.gz tox21.csv clearance.csv}
fi
for f in $files; do
  case $f in *.gz) cp "$SHARED/data/moleculenet/$f" .gpu/data/ ;; *) gzip -9c "$SHARED/data/moleculenet/$f" > ".gpu/data/$f.gz" ;; esac
done
cp "$SHARED/data/tokenizer/deepchem_smiles_vocab.txt" .gpu/data/
if [ "${PRETRAIN_CORPUS:-0}" = 1 ]; then  # the pretrain phase: the whole corpus, and the pieces of stopped runs
  mkdir -p .gpu/moses_full .gpu/pretrain && cp "$SHARED/data/pretrain/moses/"{train,test}.csv.gz .gpu/moses_full/
  for first in runs/gpu_pretrain/*.tar.gz.part-aa; do
    [ -f "$first" ] || continue
    stem=${first%.part-aa}
    # a finished run (its encoder written) needs no more training: its pieces stay here (grep without
    # -q reads to the end: under pipefail an early exit would fail tar with SIGPIPE)
    if cat "$stem".part-* | tar tzf - | grep '/model.safetensors$' > /dev/null; then
      echo "finished, not carried: $stem"; touch ".gpu/pretrain/$(basename "$stem" .tar.gz).finished"; continue
    fi
    cp "$stem".part-* .gpu/pretrain/
  done
else
  { zcat "$SHARED/data/pretrain/moses/train.csv.gz" || true; } | head -20001 | gzip > .gpu/moses/train.csv.gz  # (zcat stops early: SIGPIPE)
fi
git rev-parse HEAD > .gpu/commit  # commit first: records name this code
carried=$(du -sb .gpu | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)  # the tracked files on disk: what travels
echo "carried: $carried bytes; tracked tree: $tree bytes (64 MiB together at most)"
if [ $(( carried + tree )) -gt $(( 64 * 1024 * 1024 )) ]; then  # the shipped encoders are most of the tree
  echo "over 64 MiB: for the call, move the shipped encoders it does not read out of the checkout, e.g." \
       "mkdir -p /tmp/enc && mv gmnet_sklearn/pretrained/moses-{paper,mtr,epoch}-* /tmp/enc/ (back after: mv /tmp/enc/* gmnet_sklearn/pretrained/)" >&2
fi
