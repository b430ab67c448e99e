#!/usr/bin/env bash
# BETO (Cañete et al., "Spanish Pre-Trained BERT Model and Evaluation Data"): raw Spanish text -> cleaned corpus ->
# a cased SentencePiece vocabulary of 32k -> data-bin -> BERT-base pretrained with whole-word masking (biofairseq-train
# --task document_mlm --mask-whole-words, dynamic: fresh masks every epoch) in two length phases (batch 2,048 at 128
# tokens, then 256 at 512) -> the final checkpoint -> transformers -> NER -> report.
#
#   bash recipes/beto.sh                                            # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="wiki=raw/eswiki opus=raw/opus" NER_DATA="conll2002=data/conll2002_es" NUM_GPUS=8 bash recipes/beto.sh
#
# Printing, skipping, resuming, FORCE, recipe.env and Slurm work as in recipes/bsc_bio_es.sh (all recipes use
# recipes/lib/stages.sh); its variables apply here too. Besides them:
#   PHASE2_SHARE   the share of MAX_UPDATE at the second length (paper: 0.55, 2M updates of which the first 900k at
#                  128 tokens; tiny: 0.1). PHASE2_TOKENS_PER_SAMPLE, PHASE2_SEQUENCES_PER_UPDATE (paper: 512, 256),
#                  PHASE2_BATCH_PER_DEVICE: see recipes/lib/stages.sh.
#   INIT_FROM      continual pretraining: a transformers RoBERTa-family folder or a fairseq checkpoint (.pt) whose
#                  weights are the start and whose vocabulary replaces the SentencePiece one (stage 2 converts it
#                  with biofairseq-convert from-hf; the report says so)
#   CORPUS_LANG    the corpus language for the cleaning's language filter (default: es)
#   WEIGHT_DECAY_EXCLUDE  norm_and_bias (default, BERT's): no weight decay on LayerNorm weights and biases; none
# The optimizer is BERT's (Adam β (0.9, 0.999), ε 1e-6, weight decay 0.01 except on LayerNorms and biases, 10k warm-up,
# linear decay, clipping 1.0, LR 1e-4); the paper gives the schedule of lengths and batches, not these. The final
# checkpoint is kept.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=beto
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"

case $PRESET in
tiny)
    ARCH=${ARCH:-bio_roberta_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    PHASE2_SHARE=${PHASE2_SHARE:-0.1}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-512}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-8}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-8}
    recipe_tiny_defaults
    ;;
pilot)  # whole-word masking with SentencePiece at the masked-LM pilot's shape and schedule, one length
    recipe_pilot_defaults "the Spanish pretraining text, e.g. cases=clinical_cases.jsonl"
    ARCH=${ARCH:-bio_roberta_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    ;;
paper)
    require_inputs "the raw pretraining corpora: Spanish Wikipedia and OPUS for BETO" "conll2002=path/to/conll2002_es with train, dev and test"
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_SIZE=${VOCAB_SIZE:-32000}
    ARCH=${ARCH:-beto_base}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-128}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-2048}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-64}
    PHASE2_SHARE=${PHASE2_SHARE:-0.55}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-512}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-256}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-16}
    PEAK_LR=${PEAK_LR:-1e-4}
    WARMUP_UPDATES=${WARMUP_UPDATES:-10000}
    MAX_UPDATE=${MAX_UPDATE:-2000000}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-10000}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    NER_LRS=${NER_LRS:-2e-5,3e-5,5e-5}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-4}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-512}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0.1}
    BASELINE=${BASELINE:-none}
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot or PRESET=paper" ;;
esac
CORPUS_LANG=${CORPUS_LANG:-es}
KEEP=last BEST_METRIC=ppl BEST_MAXIMIZE=0  # a fixed number of updates; the final model is BETO

WEIGHT_DECAY_EXCLUDE=${WEIGHT_DECAY_EXCLUDE:-norm_and_bias}
recipe_check_settings
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

# ---- 1-3. clean, a cased SentencePiece vocabulary (32k; or INIT_FROM's), encode and binarize

recipe_corpus "$CORPUS_LANG" sentencepiece

# ---- 4. whole-word masking (the data-bin records the SentencePiece model that marks word starts), two phases

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
    --sample-break-mode complete_doc --mask-prob 0.15 --mask-whole-words)
MODEL_ARGS=("${ARCH_ARGS[@]}" --dropout 0.1 --attention-dropout 0.1)
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.999)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
recipe_pretrain

# ---- 5-8. the final checkpoint, checked; transformers; NER; report

recipe_pick
recipe_convert
recipe_baseline
recipe_ner
recipe_report
