#!/usr/bin/env bash
# Usage: bash preprocess/binarize.sh [--reference] CLEAN_DIR VOCAB_DIR DATA_BIN [WORKERS [SHARD_MB]]
#
# Binarizes CLEAN_DIR/{train,valid}.txt with the vocabulary of VOCAB_DIR (preprocess/train_vocab.py) into DATA_BIN,
# the folder that `fairseq-train --task document_mlm` reads: the tokenizer's ids go through a lookup table into
# fairseq's mmap format in WORKERS processes (python -m biofairseq.corpus.binarize). --reference takes the way it is
# checked against, byte for byte: encode.py writes the symbols out as text and fairseq-preprocess --only-source
# --srcdict VOCAB_DIR/dict.txt reads them back (fairseq_cli.preprocess's main, every shard in one process). The vocabulary files and vocab_info.json are
# copied into DATA_BIN, so later steps find the BPE from the data-bin alone; DATA_BIN/dict.txt gets the training
# counts of each entry (for --freq-weighted-replacement). DATA_BIN appears only once it is complete. Run it with the
# .venv active (source .venv/bin/activate), or PYTHON=.venv/bin/python.
#
# SHARD_MB (default 0: one data-bin): the encoded training text in shards of at most this many megabytes, documents
# whole, each binarized on its own into DATA_BIN/shard0, shard1, ... (the valid split in shard0), every shard's
# dict.txt with the counts of all; fairseq-train reads `python -m biofairseq.data_bin path DATA_BIN`, one shard an
# epoch. The size is that of the text encode.py writes, whichever way binarizes; fairseq-preprocess (--reference)
# holds a shard's index in Python lists, so there the shard size bounds its memory.
[ -n "${BASH_VERSION:-}" ] || { echo "binarize.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

REFERENCE=0
if [[ ${1:-} == --reference ]]; then REFERENCE=1; shift; fi
if [[ $# -lt 3 || $# -gt 5 ]]; then
    echo "usage: bash preprocess/binarize.sh [--reference] CLEAN_DIR VOCAB_DIR DATA_BIN [WORKERS [SHARD_MB]]" >&2
    exit 2
fi
CLEAN_DIR=$1 VOCAB_DIR=$2 DATA_BIN=$3 WORKERS=${4:-$(nproc)} SHARD_MB=${5:-0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python}

# found, not imported: importing fairseq costs seconds, and fairseq-preprocess below imports it anyway
"$PYTHON" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('fairseq') and u.find_spec('biofairseq.corpus.vocab')))" 2>/dev/null ||
    { echo "error: $PYTHON cannot import biofairseq and fairseq; run 'source .venv/bin/activate' after 'make install' (or set PYTHON=.venv/bin/python)" >&2; exit 1; }
fail() { echo "error: $*" >&2; exit 1; }
SHARD_MB=$("$PYTHON" -m biofairseq.data_bin megabytes "$SHARD_MB") || exit 2  # the recipes' check: 0.0 is 0, 1e2 refused
[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || fail "WORKERS=$WORKERS: give the number of processes, at least 1"
# the usual mistakes first, each named: a path that is not there, the two folders swapped, a file for a folder
for dir in CLEAN_DIR VOCAB_DIR; do
    [[ -e ${!dir} ]] || fail "$dir ${!dir}: no such folder; usage: bash preprocess/binarize.sh CLEAN_DIR VOCAB_DIR DATA_BIN"
    [[ -d ${!dir} ]] || fail "$dir ${!dir}: a file, not a folder; usage: bash preprocess/binarize.sh CLEAN_DIR VOCAB_DIR DATA_BIN"
done
if [[ -f $CLEAN_DIR/dict.txt && ! -e $CLEAN_DIR/train.txt && -f $VOCAB_DIR/train.txt ]]; then
    fail "$CLEAN_DIR holds a vocabulary and $VOCAB_DIR cleaned text: swap them; usage: bash preprocess/binarize.sh CLEAN_DIR VOCAB_DIR DATA_BIN"
fi
for f in "$CLEAN_DIR/train.txt" "$CLEAN_DIR/valid.txt"; do
    [[ -s $f ]] || fail "$f: missing or empty; CLEAN_DIR is the --output-dir of preprocess/clean_corpus.py (run it first)"
done
for f in "$VOCAB_DIR/dict.txt" "$VOCAB_DIR/vocab_info.json"; do
    [[ -s $f ]] || fail "$f: missing; VOCAB_DIR is the --output-dir of preprocess/train_vocab.py (run it first)"
done
[[ ! -e $DATA_BIN ]] || fail "$DATA_BIN: already exists; remove it or choose another DATA_BIN"
PARENT=$(dirname "$DATA_BIN")
while [[ ! -e $PARENT ]]; do PARENT=$(dirname "$PARENT"); done
[[ -d $PARENT && -w $PARENT ]] || fail "DATA_BIN $DATA_BIN: $PARENT is not a folder this user can write in; choose another DATA_BIN"

# The data-bin is made in DATA_BIN.tmp.HOST.PID, removed on exit; a run killed outright (SIGKILL, a lost node) leaves
# its own, which this run removes: this host's, of a process that is gone (another host's may be a live run's).
for stale in "$DATA_BIN.tmp.$HOSTNAME".*; do
    pid=${stale#"$DATA_BIN.tmp.$HOSTNAME."}
    if [[ -d $stale && $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then rm -rf "$stale"; fi
done
TMP="$DATA_BIN.tmp.$HOSTNAME.$$"
trap 'rm -rf "$TMP"' EXIT
if (( ! REFERENCE )); then
    "$PYTHON" -m biofairseq.corpus.binarize "$CLEAN_DIR" "$VOCAB_DIR" "$TMP" --workers "$WORKERS" --shard-mb "$SHARD_MB"
else
    mkdir -p "$TMP/encoded"
    for split in train valid; do
        echo "+ $PYTHON $HERE/encode.py --vocab $VOCAB_DIR --input $CLEAN_DIR/$split.txt --output $TMP/encoded/$split.bpe --workers $WORKERS" >&2
        "$PYTHON" "$HERE/encode.py" --vocab "$VOCAB_DIR" --input "$CLEAN_DIR/$split.txt" \
            --output "$TMP/encoded/$split.bpe" --workers "$WORKERS" --quiet
    done
    RUNS=()  # fairseq-preprocess's arguments, one run a line: every data-bin, or every shard (the valid split in shard0)
    preprocess() {  # preprocess DESTDIR FLAG...: fairseq-preprocess of the encoded text into DESTDIR
        local command=(--only-source --srcdict "$VOCAB_DIR/dict.txt" --destdir "$1" --workers "$WORKERS" "${@:2}")
        mkdir -p "$1"
        echo "+ fairseq-preprocess ${command[*]}" >&2
        RUNS+=("$(printf '%q ' "${command[@]}")")
    }
    if [[ $SHARD_MB == 0 ]]; then
        preprocess "$TMP" --trainpref "$TMP/encoded/train.bpe" --validpref "$TMP/encoded/valid.bpe"
    else
        mapfile -t PARTS < <("$PYTHON" -m biofairseq.data_bin split "$TMP/encoded/train.bpe" "$SHARD_MB" "$TMP/encoded/shard{}/train.bpe")
        (( ${#PARTS[@]} )) || { echo "error: $TMP/encoded/train.bpe could not be split into shards (see above)" >&2; exit 1; }
        for k in "${!PARTS[@]}"; do
            valid=()
            (( k > 0 )) || valid=(--validpref "$TMP/encoded/valid.bpe")
            preprocess "$TMP/shard$k" --trainpref "${PARTS[$k]}" "${valid[@]}"
        done
    fi
    # fairseq-preprocess's own main, each run in one process (importing fairseq once, not once a shard); each writes
    # its DESTDIR/preprocess.log, as fairseq-preprocess does
    "$PYTHON" -c "import logging, shlex, sys
from fairseq import options
from fairseq_cli.preprocess import main
for line in sys.argv[1:]:
    main(options.get_preprocessing_parser().parse_args(shlex.split(line)))
    for handler in logging.getLogger('fairseq_cli.preprocess').handlers[:]:  # main adds one a run, to its log file
        logging.getLogger('fairseq_cli.preprocess').removeHandler(handler)
        handler.close()" "${RUNS[@]}" >"$TMP/preprocess.out" 2>&1 || { cat "$TMP/preprocess.out" >&2; exit 1; }
    rm -f "$TMP/preprocess.out"
    rm -rf "$TMP/encoded"
    # every shard (or the one data-bin): the vocabulary files, then the training counts of all in each dict.txt
    "$PYTHON" -c "import sys; from biofairseq.corpus.vocab import copy_vocab, write_counts; from biofairseq.data_bin import shards
[copy_vocab(sys.argv[1], shard) for shard in shards(sys.argv[2])]; write_counts(sys.argv[2])" "$VOCAB_DIR" "$TMP"
fi
mv "$TMP" "$DATA_BIN"
trap - EXIT
echo "$DATA_BIN: data-bin for fairseq-train --user-dir biofairseq --task document_mlm"
