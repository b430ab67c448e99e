#!/usr/bin/env bash
# bio-lm's distillation study (Lewis et al. 2020, "Pretrained Language Models for Biomedical and Clinical Tasks",
# sections 5.1 and 7, Table 6): raw text -> cleaned corpus -> byte-level BPE -> data-bin -> four models with
# biofairseq-train, all fine-tuned on NER and reported side by side:
#   base         RoBERTa-base pretrained with masked LM (--task document_mlm)
#   large        RoBERTa-large pretrained the same way: the teacher
#   distilled    base distilled from large (--criterion mlm_distillation: 5.0 x MLM + 2.0 x KL at temperature 2 +
#                1.0 x cosine of the last hidden states through a learned projection), DISTIL_UPDATES more updates
#   base_longer  the paper's control: base trained DISTIL_UPDATES more updates with masked LM alone, same schedule
#
#   bash recipes/bio_lm.sh                                          # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed mimic=raw/mimic" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/bio_lm.sh
#
# Printing, skipping, resuming, FORCE, recipe.env and Slurm work as in recipes/bsc_bio_es.sh (all recipes use
# recipes/lib/stages.sh); its variables apply here too (PEAK_LR excepted). Besides them:
#   BASE_ARCH, LARGE_ARCH  the student's and the teacher's shapes (tiny: bio_roberta_tiny, bio_roberta_small;
#                  paper: bio_roberta_base, bio_roberta_large)
#   BASE_LR, LARGE_LR      peak learning rates of their pretraining (paper: 6e-4, 4e-4)
#   WARMUP_UPDATES linear warm-up of pretraining (default: 5% of MAX_UPDATE, the paper's)
#   LARGE_MAX_UPDATE  the teacher's updates (default MAX_UPDATE), with 5% of them warm-up if fewer
#   DISTIL_UPDATES, DISTIL_LR, DISTIL_WARMUP_UPDATES  the distillation and the control (paper: 50k updates, 5e-4,
#                  5%), both starting from base's final checkpoint (fairseq-train --finetune-from-model)
#   ALPHA_MLM, ALPHA_KL, TEMPERATURE, ALPHA_COS  the distillation loss (paper: 5.0, 2.0, 2.0, 1.0; ALPHA_COS=0 is
#                  the paper's "distill" row without alignment)
#   CORPUS_LANG    the corpus language for the cleaning's language filter (tiny: es, the bundled sample; paper: en)
# Every model keeps its final checkpoint (the paper trains for a fixed number of updates).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=bio_lm
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"
require_whole MAX_UPDATE DISTIL_UPDATES LARGE_MAX_UPDATE
[[ -z ${PEAK_LR:-} ]] || die "PEAK_LR=$PEAK_LR: bio-lm's peak learning rates are BASE_LR, LARGE_LR and DISTIL_LR; set those"

case $PRESET in
tiny | pilot)
    CORPUS_LANG=${CORPUS_LANG:-es}
    BASE_ARCH=${BASE_ARCH:-bio_roberta_tiny}
    LARGE_ARCH=${LARGE_ARCH:-bio_roberta_small}
    # the paper's rates scaled to the tiny base's 1e-3 (recipes/bsc_bio_es.sh): large 4/6 of it, distillation 5/6
    BASE_LR=${BASE_LR:-1e-3}
    LARGE_LR=${LARGE_LR:-7e-4}
    DISTIL_LR=${DISTIL_LR:-8e-4}
    if [[ $PRESET == tiny ]]; then
        MAX_UPDATE=${MAX_UPDATE:-600}
        DISTIL_UPDATES=${DISTIL_UPDATES:-200}
        WARMUP_UPDATES=${WARMUP_UPDATES:-$(( (MAX_UPDATE * 5 + 99) / 100 ))}
        recipe_tiny_defaults
    else
        # base is the masked-LM pilot (bsc_bio_es's); the teacher (4 x 256, about 5 times base's step) gets the same
        # 5,000 updates, so that it is a better model than its student (at fewer it is not: its perplexity after 2,000
        # would have to beat base's after 5,000); distillation and its control 1,000 more of base. About 3 hours on
        # 2 CPU cores (the teacher about 95 minutes), minutes on a GPU: the one pilot that does not fit an hour on a CPU.
        DISTIL_UPDATES=${DISTIL_UPDATES:-1000}
        recipe_pilot_defaults "the pretraining text, e.g. cases=clinical_cases.jsonl"
    fi
    ;;
paper)
    require_inputs "the raw pretraining corpora: PubMed, PMC, MIMIC-III for bio-lm" "ncbi=path/to/ncbi_disease with train/ valid/ test/"
    CORPUS_LANG=${CORPUS_LANG:-en}
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_SIZE=${VOCAB_SIZE:-50000}  # "50k subword units", byte-level BPE learned on the corpus
    BASE_ARCH=${BASE_ARCH:-bio_roberta_base}
    LARGE_ARCH=${LARGE_ARCH:-bio_roberta_large}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-512}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-8192}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-8}  # large at 512 tokens in fp16, with the teacher's forward beside it
    BASE_LR=${BASE_LR:-6e-4}
    LARGE_LR=${LARGE_LR:-4e-4}
    MAX_UPDATE=${MAX_UPDATE:-500000}
    DISTIL_UPDATES=${DISTIL_UPDATES:-50000}
    DISTIL_LR=${DISTIL_LR:-5e-4}
    WARMUP_UPDATES=${WARMUP_UPDATES:-$(( (MAX_UPDATE * 5 + 99) / 100 ))}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-5000}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    # sequence labelling (section 5.2): LR 1e-5, batch 32, 20 epochs, best checkpoint on dev, median of 5 seeds
    NER_LRS=${NER_LRS:-1e-5}
    NER_SEEDS=${NER_SEEDS:-1,2,3,4,5}
    NER_EPOCHS=${NER_EPOCHS:-20}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-512}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0.06}  # not given in the paper; RoBERTa's fine-tuning warm-up
    BASELINE=${BASELINE:-none}
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot or PRESET=paper" ;;
esac
DISTIL_WARMUP_UPDATES=${DISTIL_WARMUP_UPDATES:-$(( (DISTIL_UPDATES * 5 + 99) / 100 ))}
LARGE_MAX_UPDATE=${LARGE_MAX_UPDATE:-$MAX_UPDATE}
ALPHA_MLM=${ALPHA_MLM:-5.0} ALPHA_KL=${ALPHA_KL:-2.0} TEMPERATURE=${TEMPERATURE:-2.0} ALPHA_COS=${ALPHA_COS:-1.0}
KEEP=last BEST_METRIC=ppl BEST_MAXIMIZE=0

recipe_check_settings
PEAK_LR=$BASE_LR  # the shared stages' name for it, once BASE_LR is checked
LARGE_WARMUP_UPDATES=$(( LARGE_MAX_UPDATE == MAX_UPDATE ? WARMUP_UPDATES : (LARGE_MAX_UPDATE * 5 + 99) / 100 ))
[[ -z ${INIT_FROM:-} ]] || die "INIT_FROM=$INIT_FROM: bio-lm pretrains from scratch here; continue a RoBERTa with recipes/bsc_bio_es.sh INIT_FROM=..."
[[ $PHASE2_SHARE == 0 ]] || die "PHASE2_SHARE=$PHASE2_SHARE: bio-lm pretrains at one length (512 tokens); leave it unset"
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

recipe_corpus "$CORPUS_LANG" bytelevel-bpe

# ---- 4-5. pretrain base and large (section 5.1: 15% masking, AdamW (0.9, 0.98, 1e-6), weight decay 0.01,
# dropout 0.1, 5% warm-up then linear decay), then distil large into base and train base longer, each kept at its end

MLM_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --sample-break-mode complete_doc --mask-prob 0.15)
model_and_optimizer() {  # model_and_optimizer ARCH LR WARMUP
    ARCH=$1
    MODEL_ARGS=(--arch "$ARCH" --dropout 0.1 --attention-dropout 0.1)
    OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0
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
