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
# shellcheck source=lib/stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/stages.sh"
recipe_settings
KEEP=last BEST_METRIC=loss BEST_MAXIMIZE=0  # ELECTRA keeps the final model

INIT_ARGS=(${GENERATOR_FRACTION:+--generator-fraction "$GENERATOR_FRACTION"}) INIT_TO_HF_ARGS=(--generator)
recipe_corpus "$VOCAB_TYPE"

# ---- 4. pretrain with biofairseq-train --task electra --criterion electra (Table 5)

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task electra --criterion electra --discriminator-weight "$DISCRIMINATOR_WEIGHT"
    --sample-break-mode complete_doc --mask-prob "$MASK_PROB" --leave-unmasked-prob "$LEAVE_UNMASKED_PROB")
MODEL_ARGS=("${ARCH_ARGS[@]}" --sampling-temperature "$SAMPLING_TEMPERATURE"
    --sampling-temperature-final "$SAMPLING_TEMPERATURE_FINAL" --sampling-temperature-updates "$MAX_UPDATE"
    --dropout "$DROPOUT" --attention-dropout "$ATTENTION_DROPOUT")
# INIT_FROM's model brings its embedding sharing and generator width (in ARCH_ARGS)
[[ -n $INIT_FROM ]] || MODEL_ARGS+=(--embedding-sharing "$EMBEDDING_SHARING" ${GENERATOR_FRACTION:+--generator-width-fraction "$GENERATOR_FRACTION"})
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "$ADAM_BETAS" --adam-eps "$ADAM_EPS" --weight-decay "$WEIGHT_DECAY" --clip-norm "$CLIP_NORM"
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
recipe_pretrain

# ---- 5-8. the final checkpoint, checked; its discriminator (and generator) in transformers; NER; report

recipe_finish --generator
