#!/usr/bin/env bash
# ModernBERT's encoder (Warner et al. 2024, "Smarter, Better, Faster, Longer"), on a clinical corpus: raw text ->
# cleaned corpus -> vocabulary -> data-bin -> bio_modernbert (rotary positions, GeGLU, every third layer global and the
# others a 128-token window, pre-norm without biases) pretrained by masked LM at 30% on unpadded rows (documents packed, each
# attending to itself alone) in two length phases -> the final checkpoint -> transformers' ModernBertForMaskedLM ->
# NER (ModernBertForTokenClassification) -> report.
#
#   bash recipes/modernbert.sh                                   # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="notes=raw/notes" NER_DATA="pharmaconer=data/pharmaconer" NUM_GPUS=8 bash recipes/modernbert.sh
#   INIT_FROM=path/to/ModernBERT-base CORPUS_LANG=en PRESET=paper MAX_UPDATE=... PEAK_LR=... ...   # continual pretraining
#                  (the paper preset is ModernBERT's schedule from scratch: for a continuation, as BioClinical ModernBERT's,
#                  set MAX_UPDATE, PEAK_LR, WARMUP_UPDATES and PHASE2_SHARE to yours)
#
# Printing, skipping, resuming, FORCE, recipe.env and Slurm work as in recipes/bsc_bio_es.sh (all recipes use
# recipes/lib/stages.sh); its variables apply here too, but for CLIP_NORM (below). Besides them:
#   MASK_PROB      the share of tokens masked (ModernBERT: 0.3)
#   WEIGHT_DECAY   AdamW's weight decay, on matrices only (ModernBERT: 1e-5; norms and the decoder's bias get none)
#   PHASE2_SHARE, PHASE2_TOKENS_PER_SAMPLE, PHASE2_SEQUENCES_PER_UPDATE, PHASE2_BATCH_PER_DEVICE: the second length
#                  phase (paper: ModernBERT's context extension from 1,024 to 8,192 tokens)
#   INIT_FROM      a transformers ModernBERT folder (ModernBERT, BioClinical ModernBERT) or a bio_modernbert .pt whose
#                  weights are the start and whose vocabulary replaces one learned on the corpus (stage 2, converted by
#                  biofairseq-convert from-hf, which renumbers ModernBERT's ids for fairseq's dictionary)
#   CORPUS_LANG    the corpus language for the cleaning's language filter (default: es; en for English notes, as
#                  ModernBERT's own weights are)
#   WEIGHT_DECAY_EXCLUDE  norm_and_bias (default): no weight decay on norms and the decoder's bias; none
# Gradients are clipped at 1.0 (bsc_bio_es's CLIP_NORM is not read here). Rows hold several documents by default
# (FAST_PATH=1 here: ModernBERT trains unpadded); FAST_PATH=0 gives one right-padded document per row. The attention
# is torch's scaled_dot_product_attention with a document and window mask, on CPU and GPU. NER on whole documents
# instead of sentences: NER_MAX_LENGTH=8192 NER_EXTRA="--context document" (with a smaller NER_BATCH and a larger
# NER_ACCUMULATION). Lengths: paper 1,024 then 8,192 tokens; tiny 128 then 512; pilot one length, 128.
#
# The paper preset follows ModernBERT-base's published training where fairseq has it: 30% masking, peak LR 8e-4 after
# a warm-up, weight decay 1e-5, Adam betas (0.9, 0.98) and eps 1e-6, a first phase at 1,024 tokens and a context
# extension to 8,192. Where it differs: AdamW (fused) instead of StableAdamW, a linear decay from the peak instead of
# the warm-up-stable-decay (trapezoidal) schedule, fixed batches (ours: 4,096 x 1,024 tokens, then 512 x 8,192)
# instead of a batch-size warm-up, and a corpus of your own rather than 1.7T tokens of English and code. It trains in
# bf16 (--amp-bf16) as ModernBERT did.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=modernbert
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"
SDPA_ARGS=()  # ModernBERT's attention is SDPA already
FAST_PATH=${FAST_PATH:-1}

case $PRESET in
tiny)
    ARCH=${ARCH:-bio_modernbert_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    PHASE2_SHARE=${PHASE2_SHARE:-0.1}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-512}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-8}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-8}
    recipe_tiny_defaults
    ;;
pilot)  # ModernBERT's block at the masked-LM pilot's width, one length, in the masked-LM pilot's minutes: in the pilot's
    # shape (64 rows of 128 tokens, 2 CPU cores) its step cost 1.48x bio_roberta_tiny's with its dropout when this was
    # set, 1.23x on another day (benchmarks/results/modernbert_step.md, last two sections), so 3,300 updates where the
    # other pilots train 5,000: their minutes within about 25%
    MAX_UPDATE=${MAX_UPDATE:-3300} WARMUP_UPDATES=${WARMUP_UPDATES:-165}
    recipe_pilot_defaults "the Spanish pretraining text, e.g. cases=clinical_cases.jsonl"
    ARCH=${ARCH:-bio_modernbert_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    ;;
paper)
    require_inputs "the raw pretraining corpora" "pharmaconer=path/to/pharmaconer with train, dev and test"
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_SIZE=${VOCAB_SIZE:-50368}
    ARCH=${ARCH:-bio_modernbert_base}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-1024}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-4096}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-64}
    PHASE2_SHARE=${PHASE2_SHARE:-0.15}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-8192}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-512}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-8}
    PEAK_LR=${PEAK_LR:-8e-4}
    WARMUP_UPDATES=${WARMUP_UPDATES:-1000}
    MAX_UPDATE=${MAX_UPDATE:-400000}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-5000}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    NER_LRS=${NER_LRS:-3e-5,5e-5,8e-5}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-5}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-512}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0.1}
    BASELINE=${BASELINE:-none}
    PRECISION=${PRECISION:-bf16}
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot or PRESET=paper" ;;
esac
CORPUS_LANG=${CORPUS_LANG:-es}
MASK_PROB=${MASK_PROB:-0.3}
WEIGHT_DECAY=${WEIGHT_DECAY:-1e-5}
KEEP=last BEST_METRIC=ppl BEST_MAXIMIZE=0  # a fixed number of updates; the final model is ModernBERT's

WEIGHT_DECAY_EXCLUDE=${WEIGHT_DECAY_EXCLUDE:-norm_and_bias}
recipe_check_settings
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

# ---- 1-3. clean, a byte-level BPE vocabulary (or INIT_FROM's), encode and binarize

recipe_corpus "$CORPUS_LANG" bytelevel-bpe

# ---- 4. masked LM at MASK_PROB on packed rows, in one or two length phases

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
    --sample-break-mode complete_doc --mask-prob "$MASK_PROB")
MODEL_ARGS=("${ARCH_ARGS[@]}")  # ModernBERT trains without dropout (the model's defaults)
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay "$WEIGHT_DECAY" --clip-norm 1.0
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
recipe_pretrain

# ---- 5-8. the final checkpoint, checked; transformers; NER; report

recipe_pick
recipe_convert
recipe_baseline
recipe_ner
recipe_report
