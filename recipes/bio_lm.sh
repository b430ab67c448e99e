#!/usr/bin/env bash
# bio-lm's distillation study (Lewis et al. 2020, "Pretrained Language Models for Biomedical and Clinical Tasks",
# sections 5.1 and 7, Table 6): recipes/bsc_bio_es.sh's stages for four models, all fine-tuned on NER and reported side
# by side:
#   base         RoBERTa-base pretrained with masked LM (--task document_mlm)
#   large        RoBERTa-large pretrained the same way: the teacher
#   distilled    base distilled from large (--criterion mlm_distillation: 5.0 x MLM + 2.0 x KL at temperature 2 +
#                1.0 x cosine of the last hidden states through a learned projection), DISTIL_UPDATES more updates
#   base_longer  the paper's control: base trained DISTIL_UPDATES more updates with masked LM alone, same schedule
#
#   bash recipes/bio_lm.sh                                          # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed mimic=raw/mimic" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/bio_lm.sh
#
# Everything else works as in recipes/bsc_bio_es.sh; the settings and presets are in docs/recipes.md. Instead of ARCH
# and PEAK_LR it takes BASE_ARCH, LARGE_ARCH, BASE_LR, LARGE_LR, LARGE_MAX_UPDATE (the teacher's updates), and for the
# distillation and its control DISTIL_UPDATES, DISTIL_LR, DISTIL_WARMUP_UPDATES, ALPHA_MLM, ALPHA_KL, TEMPERATURE and
# ALPHA_COS (0: the paper's "distill" row without alignment); CORPUS_LANG. It pretrains at one length from scratch
# (no PHASE2_*, no INIT_FROM), and every model keeps its final checkpoint.
[ -n "${BASH_VERSION:-}" ] || { echo "bio_lm.sh: error: a bash script; run it with bash: bash $0" >&2; exit 1; }
set -euo pipefail

RECIPE=bio_lm
# shellcheck source=lib/stages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/stages.sh"
recipe_settings
KEEP=last BEST_METRIC=ppl BEST_MAXIMIZE=0

recipe_corpus bytelevel-bpe

# ---- 4-5. pretrain base and large (section 5.1: 15% masking, AdamW (0.9, 0.98, 1e-6), weight decay 0.01,
# dropout 0.1, 5% warm-up then linear decay), then distil large into base and train base longer, each kept at its end

MLM_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --sample-break-mode complete_doc --mask-prob "$MASK_PROB"
    --leave-unmasked-prob "$LEAVE_UNMASKED_PROB" --random-token-prob "$RANDOM_TOKEN_PROB")
model_and_optimizer() {  # model_and_optimizer ARCH LR WARMUP
    ARCH=$1
    MODEL_ARGS=(--arch "$ARCH" --dropout "$DROPOUT" --attention-dropout "$ATTENTION_DROPOUT")
    OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "$ADAM_BETAS" --adam-eps "$ADAM_EPS" --weight-decay "$WEIGHT_DECAY" --clip-norm "$CLIP_NORM"
        --lr "$2" --lr-scheduler polynomial_decay --warmup-updates "$3")
}

TASK_ARGS=("${MLM_ARGS[@]}" --criterion masked_lm_accuracy)
for model in base large; do
    recipe_model "$model"
    if [[ $model == base ]]; then
        model_and_optimizer "$BASE_ARCH" "$BASE_LR" "$WARMUP_UPDATES"
        recipe_pretrain
    else
        model_and_optimizer "$LARGE_ARCH" "$LARGE_LR" "$LARGE_WARMUP_UPDATES"
        recipe_pretrain "$LARGE_MAX_UPDATE"
    fi
    recipe_pick
done

START=$(kept_checkpoint "$RUN_DIR/pretrain/base") TEACHER=$(kept_checkpoint "$RUN_DIR/pretrain/large")
model_and_optimizer "$BASE_ARCH" "$DISTIL_LR" "$DISTIL_WARMUP_UPDATES"
recipe_model distilled
TASK_ARGS=("${MLM_ARGS[@]}" --criterion mlm_distillation --teacher-path "$TEACHER" --alpha-mlm "$ALPHA_MLM"
    --alpha-kl "$ALPHA_KL" --temperature "$TEMPERATURE" --alpha-cos "$ALPHA_COS")
recipe_pretrain "$DISTIL_UPDATES" --finetune-from-model "$START"
recipe_pick
recipe_model base_longer
TASK_ARGS=("${MLM_ARGS[@]}" --criterion masked_lm_accuracy)
recipe_pretrain "$DISTIL_UPDATES" --finetune-from-model "$START"
recipe_pick

# ---- 6-8. each in transformers (the distilled student without its projection), a random-init twin of base's
# shape, NER for all in Table 6's order, the report

for model in base base_longer large distilled; do
    recipe_model "$model"
    recipe_convert
done
recipe_model base
recipe_baseline
recipe_ner
recipe_report
