#!/usr/bin/env bash
# BioELECTRA (Kanakarajan et al. 2021, "BioELECTRA: Pretrained Biomedical text Encoder using Discriminators"):
# recipes/bsc_bio_es.sh's stages with ELECTRA replaced-token detection (biofairseq-train --task electra) in two length
# phases (90% of updates at 128 tokens, 10% at 512) instead of masked LM, the final checkpoint kept, its discriminator
# converted to ElectraForPreTraining (and its generator to ElectraForMaskedLM), and NER with layer-wise learning-rate
# decay.
#
#   bash recipes/bioelectra.sh                                   # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/bioelectra.sh
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Its own:
# EMBEDDING_SHARING (tied, ELECTRA's; gdes, detached, none), VOCAB_TYPE (BioELECTRA used PubMedBERT's WordPiece of
# 30,522 entries, which is not one of ours: the paper preset learns SentencePiece of that size), MASK_PROB,
# SAMPLING_TEMPERATURE (and _FINAL, annealed over MAX_UPDATE), GENERATOR_FRACTION, CORPUS_LANG, NER_LAYERWISE_DECAY.
# INIT_FROM continues a published ELECTRA (BioELECTRA): its discriminator's transformers folder (ElectraForPreTraining),
# with its generator (ElectraForMaskedLM) in its generator/ folder; both towers, their embeddings and the WordPiece
# vocabulary are the folder's, and a folder without a generator gets a fresh one of GENERATOR_FRACTION's width.
[ -n "${BASH_VERSION:-}" ] || { echo "bioelectra.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=bioelectra
# shellcheck source=lib/recipe.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/recipe.sh"
recipe_run  # its stages: biofairseq/recipe/recipes.py
