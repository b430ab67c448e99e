#!/usr/bin/env bash
# BioMegatron's vocabulary and labelling study (Shin et al. 2020, "BioMegatron: Larger Biomedical Domain Language
# Model"): recipes/bsc_bio_es.sh's stages with cased SentencePiece vocabularies of 30k and 50k learned on the corpus and
# their entity break-out rates on the NER training sets (Table 3), one data-bin and one pre-LN ("rearranged layer
# norm") encoder pretrained per vocabulary, each converted to transformers (XLMRobertaXLForMaskedLM, the pre-LN layout
# without an embedding LayerNorm), and NER with whole-word and with sub-token labelling (Figure 1) side by side.
#
#   bash recipes/biomegatron.sh                                     # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed pmc=raw/pmc_cc" NER_DATA="bc5cdr=data/bc5cdr ncbi=data/ncbi_disease" \
#       NUM_GPUS=8 bash recipes/biomegatron.sh
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Instead of
# VOCAB_SIZE it takes VOCAB_SIZES (comma-separated; the models are named bio_30k, bio_50k, ...); its own are
# CHECKPOINT_ACTIVATIONS (for the 800m and 1.2b shapes, benchmarks/results/megatron_memory_gpu.md), NER_LABELLINGS
# (both by default), CORPUS_LANG (the cleaning's language and the break-out rate's Moses words). INIT_FROM continues
# one model, "continued", with its shape and vocabulary instead of VOCAB_SIZES: a published Megatron-BERT
# (BioMegatron, its WordPiece vocabulary; given back as MegatronBertForMaskedLM) or a pre-LN RoBERTa. Pretraining follows Megatron-LM's BERT
# (the paper gives none of it): Adam (0.9, 0.999, 1e-8), weight decay 0.01 (none on LayerNorms and biases), clipping
# 1.0, linear decay; BioMegatron trained "about one epoch" of 6.1B words: set MAX_UPDATE for your corpus. The final
# checkpoint is kept.
[ -n "${BASH_VERSION:-}" ] || { echo "biomegatron.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=biomegatron
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
