#!/usr/bin/env bash
# ModernBERT's encoder (Warner et al. 2024, "Smarter, Better, Faster, Longer"), on a clinical corpus: recipes/
# bsc_bio_es.sh's stages with bio_modernbert (rotary positions, GeGLU, every third layer global and the others a
# 128-token window, pre-norm without biases) pretrained by masked LM at 30% on unpadded rows (documents packed, each
# attending to itself alone; FAST_PATH=0 gives one right-padded document per row) in two length phases, the final
# checkpoint kept, ModernBertForMaskedLM, and NER with ModernBertForTokenClassification.
#
#   bash recipes/modernbert.sh                                   # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="notes=raw/notes" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/modernbert.sh
#   INIT_FROM=path/to/ModernBERT-base PRESET=paper MAX_UPDATE=... PEAK_LR=... ...   # continual pretraining (English;
#                  CORPUS_LANG=es and a Spanish corpus for Spanish clinical text)
#                  (the paper preset is ModernBERT's schedule from scratch: for a continuation, as BioClinical ModernBERT's,
#                  set MAX_UPDATE, PEAK_LR, WARMUP_UPDATES and PHASE2_SHARE to yours)
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Its own:
# MASK_PROB, WEIGHT_DECAY (on matrices only), CORPUS_LANG; INIT_FROM takes a transformers ModernBERT folder
# (ModernBERT, BioClinical ModernBERT) or a bio_modernbert .pt. Gradients are clipped at CLIP_NORM (1.0). The
# attention is torch's scaled_dot_product_attention with a document and window mask, on CPU and GPU. NER on whole
# documents instead of sentences: NER_MAX_LENGTH=8192 NER_EXTRA="--context document" (with a smaller NER_BATCH and a
# larger NER_ACCUMULATION).
#
# The paper preset follows ModernBERT-base's published training where fairseq has it. Where it differs: AdamW (fused)
# instead of StableAdamW, a linear decay from the peak instead of the warm-up-stable-decay (trapezoidal) schedule, fixed
# batches (ours: 4,096 x 1,024 tokens, then 512 x 8,192) instead of a batch-size warm-up, and a corpus of your own
# rather than 1.7T tokens of English and code.
[ -n "${BASH_VERSION:-}" ] || { echo "modernbert.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=modernbert
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
