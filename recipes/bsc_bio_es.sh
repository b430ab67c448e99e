#!/usr/bin/env bash
# bsc-bio-es end to end (Carrino et al. 2022, "Pretrained Biomedical Language Models for Clinical NLP in
# Spanish"): raw Spanish clinical text -> cleaned corpus -> byte-level BPE -> data-bin -> RoBERTa pretrained
# with biofairseq-train --task document_mlm -> the checkpoint with the lowest validation perplexity ->
# transformers -> NER fine-tuning with the paper's learning-rate x seed sweep -> report.
#
#   bash recipes/bsc_bio_es.sh                                    # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="scielo=raw/scielo cases=raw/cases.jsonl.gz" \
#       NER_DATA="pharmaconer=data/pharmaconer cantemist=data/cantemist" NUM_GPUS=8 bash recipes/bsc_bio_es.sh
#   PRESET=one_gpu SOURCES="cases=clinical_cases.jsonl" NER_DATA="pharmaconer=data/pharmaconer" bash recipes/bsc_bio_es.sh
#
# Every command is printed ("+ ...") before it runs, so any stage can be copied and run by hand. A stage
# whose output exists is skipped, so running the recipe again resumes where it stopped: an interrupted
# pretraining continues from checkpoint_last.pt and an interrupted sweep from its unfinished runs. FORCE=1
# redoes every stage. The settings of the first run are kept in RUN_DIR/recipe.env; a rerun with a setting that
# changes what a finished stage made stops in one line (FORCE=1 or a new RUN_DIR); one of stages not yet run may
# change, and the report lists it (RUN_DIR/recipe.changes).
#
# Settings are environment variables over the preset's values: PRESET=tiny (default: the bundled sample on 2 CPU
# cores), pilot (your corpus of a few million tokens in about an hour on 2 CPU cores), one_gpu (the same on one GPU, a
# 6 x 512 model) or paper (the paper's Tables 3 and 4). docs/recipes.md lists every setting and each preset's values
# with their sources (biofairseq/recipe/presets.py); STOP_AFTER=settings prints the run and stops. Every
# value is checked before any work, and a name this recipe does not take stops it (NER_EPOCH for NER_EPOCHS). The
# inputs and outputs:
#   SOURCES        pretraining text, space-separated NAME=PATH; a PATH is a file or folder of JSON lines, plain
#                  text or BRAT, optionally compressed (see preprocess/clean_corpus.py --help)
#   CORPUS_LANG    the corpus language (default es; en, pt, ...: a code of fastText's lid.176): the cleaning keeps it
#   TEXT_DOCS      plain text's documents: blank-line (default: separated by blank lines), line (one a line), file
#   NER_DATA       NER data sets, space-separated NAME=DIR; DIR holds train, valid (or dev, devel) and test
#                  (optional), each a BRAT folder or a CoNLL file (.conll, .tsv, .bio). NER_DATA=: pretrain and
#                  convert only
#   RUN_DIR        where everything goes (default: runs/bsc_bio_es/$PRESET)
#   STOP_AFTER     settings: print the run as a bash script and stop; binarize: stop after the corpus stages (1-3)
#   NUM_GPUS       GPUs per machine (default: all that torch sees; 0: CPU); NUM_NODES above 1: Slurm (docs/recipes.md)
#   INIT_FROM      continual pretraining from a transformers RoBERTa or BERT folder (bsc-bio-es, BETO, PubMedBERT,
#                  BioBERT) or a fairseq checkpoint (.pt); docs/recipes.md
#   VOCAB_EXTEND   with INIT_FROM: add up to this many of the corpus's words its vocabulary cuts most (default 0)
#
# recipes/lib/recipe.sh renders the run as one bash script, RUN_DIR/run.sh, and runs it (STOP_AFTER=settings prints it).
[ -n "${BASH_VERSION:-}" ] || { echo "bsc_bio_es.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=bsc_bio_es
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
