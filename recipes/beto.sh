#!/usr/bin/env bash
# BETO (Cañete et al., "Spanish Pre-Trained BERT Model and Evaluation Data"): recipes/bsc_bio_es.sh's stages with a
# cased SentencePiece vocabulary (32k in the paper) instead of byte-level BPE, BERT-base pretrained with whole-word
# masking (biofairseq-train --task document_mlm --mask-whole-words, dynamic: fresh masks every epoch) in two length
# phases (batch 2,048 at 128 tokens, then 256 at 512), and the final checkpoint kept instead of the best.
#
#   bash recipes/beto.sh                                            # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="wiki=raw/eswiki opus=raw/opus" NER_DATA="conll2002=data/conll2002_es" NUM_GPUS=8 bash recipes/beto.sh
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Besides its
# settings: CORPUS_LANG (the cleaning's language, es), WEIGHT_DECAY_EXCLUDE (norm_and_bias, BERT's), the second
# length phase (PHASE2_*; paper: the last 55% of 2M updates at 512 tokens). The optimizer is BERT's (Adam β (0.9,
# 0.999), ε 1e-6, weight decay 0.01 except on LayerNorms and biases, linear decay, clipping 1.0); the paper gives the
# schedule of lengths and batches, not these. INIT_FROM continues a published BERT (BETO itself:
# dccuchile/bert-base-spanish-wwm-cased, downloaded beforehand) with its WordPiece vocabulary, whole words over its ##
# continuations, and gives it back as a BertForMaskedLM with its own vocab.txt (or a RoBERTa, as bsc_bio_es.sh).
[ -n "${BASH_VERSION:-}" ] || { echo "beto.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=beto
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
