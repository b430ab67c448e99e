#!/usr/bin/env bash
# BioMegatron's vocabulary and labelling study (Shin et al. 2020, "BioMegatron: Larger Biomedical Domain Language
# Model"): raw text -> cleaned corpus -> SentencePiece vocabularies of 30k and 50k (cased) learned on it, and their
# entity break-out rates on the NER training sets (Table 3) -> one data-bin and one pre-LN ("rearranged layer
# norm") encoder pretrained per vocabulary (biofairseq-train --task document_mlm) -> each in transformers
# (XLMRobertaXLForMaskedLM, the pre-LN layout without an embedding LayerNorm) -> NER with whole-word labelling and
# with sub-token labelling (Figure 1) -> one report, both labellings side by side.
#
#   bash recipes/biomegatron.sh                                     # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed pmc=raw/pmc_cc" NER_DATA="bc5cdr=data/bc5cdr ncbi=data/ncbi_disease" \
#       NUM_GPUS=8 bash recipes/biomegatron.sh
#
# Printing, skipping, resuming, FORCE, recipe.env and Slurm work as in recipes/bsc_bio_es.sh (all recipes use
# recipes/lib/stages.sh); its variables apply here too (VOCAB_SIZE excepted). Besides them:
#   VOCAB_SIZES    the SentencePiece vocabularies, comma-separated (paper: 30000,50000; tiny: 4000,8000); each is
#                  learned, binarized, pretrained and fine-tuned; the models are named bio_30k, bio_50k, ...
#   ARCH           bio_megatron_345m (paper default), bio_megatron_800m, bio_megatron_1_2b; tiny: bio_megatron_tiny
#   CHECKPOINT_ACTIVATIONS  1: recompute activations in the backward pass (fairseq --checkpoint-activations), for
#                  the 800m and 1.2b shapes (benchmarks/results/megatron_memory.md); default 0
#   NER_LABELLINGS whole-word and/or sub-token (default both): whole-word labels a word's first sub-token, sub-token
#                  every sub-token (B-X, I-X, ...); each model is fine-tuned both ways and scored on the same words
#   NER_EXTRA      more biofairseq-ner flags; paper: the fine-tuning head of Table 1 (--num-fc-layers 2
#                  --fc-hidden-size 512 --fc-dropout 0.5; {1, 2} layers and {512, 1024} are the paper's grid)
#   INIT_FROM      continual pretraining (BioMegatron-1.2b's start, a general-domain model): a transformers
#                  RoBERTa-family folder or a fairseq checkpoint (.pt); one model, "continued", with its shape and
#                  vocabulary instead of VOCAB_SIZES (stage 2 converts it with biofairseq-convert from-hf)
#   CORPUS_LANG    the corpus language: the cleaning's language filter and the break-out rate's Moses words
#                  (tiny: es, the bundled sample; paper: en)
#   WEIGHT_DECAY_EXCLUDE  norm_and_bias (default, Megatron-LM's): no weight decay on LayerNorm weights and biases; none
# Pretraining follows Megatron-LM's BERT (the paper gives none of it): batch 1,024 x 512 tokens, Adam (0.9, 0.999,
# 1e-8), weight decay 0.01 (none on LayerNorms and biases), clipping 1.0, LR 1e-4 with 1% warm-up and linear decay, 2M updates (BioMegatron trained
# "about one epoch" of 6.1B words: set MAX_UPDATE for your corpus). Fine-tuning (Table 1): LR 5e-5, 30 epochs,
# 128 tokens. The final checkpoint is kept.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=biomegatron
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"

require_whole MAX_UPDATE
[[ -z ${VOCAB_SIZE:-} ]] || die "VOCAB_SIZE=$VOCAB_SIZE: this recipe learns one vocabulary per entry of VOCAB_SIZES; set VOCAB_SIZES=$VOCAB_SIZE"

case $PRESET in
tiny)
    CORPUS_LANG=${CORPUS_LANG:-es}
    VOCAB_SIZES=${VOCAB_SIZES:-4000,8000}
    ARCH=${ARCH:-bio_megatron_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    recipe_tiny_defaults
    ;;
pilot)  # the pre-LN encoder at the masked-LM pilot's shape and schedule; one vocabulary, one labelling
    recipe_pilot_defaults "the pretraining text, e.g. cases=clinical_cases.jsonl"
    CORPUS_LANG=${CORPUS_LANG:-es}
    VOCAB_SIZES=${VOCAB_SIZES:-8000}
    ARCH=${ARCH:-bio_megatron_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    NER_LABELLINGS=${NER_LABELLINGS-whole-word}
    ;;
paper)
    require_inputs "the raw pretraining corpora: PubMed abstracts and PMC for BioMegatron" "ncbi=path/to/ncbi_disease with train, devel and test"
    CORPUS_LANG=${CORPUS_LANG:-en}
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_SIZES=${VOCAB_SIZES:-30000,50000}
    ARCH=${ARCH:-bio_megatron_345m}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-512}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-1024}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-16}
    PEAK_LR=${PEAK_LR:-1e-4}
    MAX_UPDATE=${MAX_UPDATE:-2000000}
    WARMUP_UPDATES=${WARMUP_UPDATES:-$(( (MAX_UPDATE + 99) / 100 ))}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-10000}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    NER_LRS=${NER_LRS:-5e-5}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-30}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-128}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0}
    NER_EXTRA=${NER_EXTRA:---num-fc-layers 2 --fc-hidden-size 512 --fc-dropout 0.5}
    BASELINE=${BASELINE:-none}
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot or PRESET=paper" ;;
esac
NER_LABELLINGS=${NER_LABELLINGS-whole-word sub-token}
CHECKPOINT_ACTIVATIONS=${CHECKPOINT_ACTIVATIONS:-0}
KEEP=last BEST_METRIC=ppl BEST_MAXIMIZE=0

WEIGHT_DECAY_EXCLUDE=${WEIGHT_DECAY_EXCLUDE:-norm_and_bias}
recipe_check_settings
VOCAB_SIZE=${VOCAB_SIZES%%,*}  # the shared stages' name for the first, once VOCAB_SIZES is checked
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

# ---- 1-3b. clean; per vocabulary size, a cased SentencePiece vocabulary and its data-bin (or INIT_FROM's vocabulary);
# the vocabularies' entity break-out rates on each NER training set

recipe_clean "$CORPUS_LANG"
if [[ -n $INIT_FROM ]]; then
    recipe_init_from
    recipe_binarize
else
    for size in ${VOCAB_SIZES//,/ }; do
        if (( size % 1000 == 0 )); then name=bio_$(( size / 1000 ))k; else name=bio_$size; fi
        recipe_data "$name"
        recipe_vocabulary sentencepiece "$size"
        recipe_binarize
    done
fi
recipe_breakout "$CORPUS_LANG"

# ---- 4-6. one pre-LN encoder per vocabulary, kept at its end and converted

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
    --sample-break-mode complete_doc --mask-prob 0.15)
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.999)" --adam-eps 1e-8 --weight-decay 0.01 --clip-norm 1.0
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
MODEL_ARGS=("${ARCH_ARGS[@]}" --dropout 0.1 --attention-dropout 0.1)
[[ $CHECKPOINT_ACTIVATIONS == 0 ]] || MODEL_ARGS+=(--checkpoint-activations)
for name in "${VOCAB_NAMES[@]:-continued}"; do  # INIT_FROM: one model, on init/'s vocabulary
    [[ $name == continued ]] || recipe_data "$name"
    recipe_model "$name"
    recipe_pretrain
    recipe_pick
    recipe_convert
done
recipe_baseline

# ---- 7-8. NER, both labellings; the report

recipe_ner
recipe_report
