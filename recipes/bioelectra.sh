#!/usr/bin/env bash
# BioELECTRA (Kanakarajan et al. 2021, "BioELECTRA: Pretrained Biomedical text Encoder using Discriminators"):
# raw text -> cleaned corpus -> vocabulary -> data-bin -> ELECTRA replaced-token detection with biofairseq-train
# --task electra (90% of updates at 128 tokens, 10% at 512) -> the final checkpoint -> its discriminator in
# transformers (and its generator) -> NER with layer-wise learning-rate decay -> report.
#
#   bash recipes/bioelectra.sh                                   # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="pubmed=raw/pubmed" NER_DATA="ncbi=data/ncbi_disease" NUM_GPUS=8 bash recipes/bioelectra.sh
#
# Printing, skipping, resuming, FORCE, recipe.env and Slurm work as in recipes/bsc_bio_es.sh (both use
# recipes/lib/stages.sh); its variables apply here too. Besides them:
#   EMBEDDING_SHARING  tied (ELECTRA's, default), gdes (DeBERTa-v3's gradient-disentangled sharing), detached (the
#                  generator's tables without the discriminator's gradient, no delta) or none
#   CORPUS_LANG    the corpus language for the cleaning's language filter (tiny: es, the bundled sample; paper: en)
#   VOCAB_TYPE     bytelevel-bpe (default) or sentencepiece. BioELECTRA used PubMedBERT's uncased WordPiece
#                  vocabulary of 30,522 entries; WordPiece is not one of ours, so the paper preset learns a
#                  SentencePiece vocabulary of that size on the corpus.
#   MASK_PROB      share of real tokens the generator fills in (0.15; ELECTRA-large: 0.25)
#   SAMPLING_TEMPERATURE  the generator's samples come from softmax(logits / T) (1, ELECTRA's; pilot: 2, the one
#                  remedy that took electra_tiny off the trivial solution, benchmarks/results/pilot_bioelectra.md)
#   SAMPLING_TEMPERATURE_FINAL  anneal the temperature linearly from SAMPLING_TEMPERATURE to this over the run's
#                  MAX_UPDATE updates (default: SAMPLING_TEMPERATURE, constant)
#   GENERATOR_FRACTION  the generator's width as a share of the discriminator's (default: ARCH's, 1/2 for
#                  electra_tiny, 1/3 for base; pilot: 1/4); it must give the generator whole heads of 64 (or a width
#                  under 128)
#   PHASE2_SHARE, PHASE2_TOKENS_PER_SAMPLE, PHASE2_SEQUENCES_PER_UPDATE, PHASE2_BATCH_PER_DEVICE: the second
#                  length phase (paper: the last 10% of updates at 512 tokens)
#   NER_LAYERWISE_DECAY  ELECTRA's layer-wise learning-rate decay in fine-tuning (paper: 0.8)
#   WEIGHT_DECAY_EXCLUDE  norm_and_bias (default, ELECTRA's): no weight decay on LayerNorm weights and biases; none
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=bioelectra
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"

case $PRESET in
tiny)
    CORPUS_LANG=${CORPUS_LANG:-es}
    VOCAB_TYPE=${VOCAB_TYPE:-bytelevel-bpe}
    ARCH=${ARCH:-electra_tiny}
    PHASE2_SHARE=${PHASE2_SHARE:-0.1}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-512}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-8}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-8}
    PEAK_LR=${PEAK_LR:-5e-4}  # ELECTRA-small's, the reference's rate for small models
    NER_LAYERWISE_DECAY=${NER_LAYERWISE_DECAY:-0.8}  # the paper's, on the bsc_bio_es tiny preset's sweep
    recipe_tiny_defaults
    ;;
pilot)  # electra_tiny (the masked-LM pilot's 2 x 128 as its discriminator) for the masked-LM pilot's minutes, one length:
    # its step takes 1.67 times the masked LM's on 2 CPU cores (generator, sampling), so 3,000 updates to its 5,000
    # (with the generator at 1/4, 1.4-1.6 times: 3,000 updates take somewhat fewer minutes than masked LM's)
    MAX_UPDATE=${MAX_UPDATE:-3000}
    recipe_pilot_defaults "the pretraining text, e.g. cases=clinical_cases.jsonl"
    CORPUS_LANG=${CORPUS_LANG:-es}
    VOCAB_TYPE=${VOCAB_TYPE:-bytelevel-bpe}
    ARCH=${ARCH:-electra_tiny}
    PEAK_LR=${PEAK_LR:-5e-4}
    SAMPLING_TEMPERATURE=${SAMPLING_TEMPERATURE:-2}
    # a generator 32 wide beside the 128-wide discriminator: of the variants measured (embedding sharing, a
    # temperature annealed to 1, a 4 x 256 discriminator, the generator's size), the best discriminator curve and
    # NER dev F1 (benchmarks/results/pilot_bioelectra_variants.md)
    GENERATOR_FRACTION=${GENERATOR_FRACTION:-0.25}
    ;;
paper)
    require_inputs "the raw pretraining corpora, PubMed for BioELECTRA" "ncbi=path/to/ncbi_disease with train/ valid/ test/"
    CORPUS_LANG=${CORPUS_LANG:-en}
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_TYPE=${VOCAB_TYPE:-sentencepiece}
    VOCAB_SIZE=${VOCAB_SIZE:-30522}
    ARCH=${ARCH:-bio_electra_base}  # Table 5: 12 layers, 768/256, FFN 3072/1024, heads 12/4
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-128}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-256}  # ELECTRA-base's batch (the paper's table gives none)
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-32}
    PHASE2_SHARE=${PHASE2_SHARE:-0.1}
    PHASE2_TOKENS_PER_SAMPLE=${PHASE2_TOKENS_PER_SAMPLE:-512}
    PHASE2_SEQUENCES_PER_UPDATE=${PHASE2_SEQUENCES_PER_UPDATE:-256}
    PHASE2_BATCH_PER_DEVICE=${PHASE2_BATCH_PER_DEVICE:-8}
    PEAK_LR=${PEAK_LR:-2e-4}
    WARMUP_UPDATES=${WARMUP_UPDATES:-10000}
    MAX_UPDATE=${MAX_UPDATE:-1000000}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-10000}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    NER_LRS=${NER_LRS:-3e-5,5e-5,1e-4,1.5e-4,2e-4}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-5}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-512}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0.1}
    NER_LAYERWISE_DECAY=${NER_LAYERWISE_DECAY:-0.8}
    BASELINE=${BASELINE:-none}
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot or PRESET=paper" ;;
esac
EMBEDDING_SHARING=${EMBEDDING_SHARING:-tied}
MASK_PROB=${MASK_PROB:-0.15}
SAMPLING_TEMPERATURE=${SAMPLING_TEMPERATURE:-1}
SAMPLING_TEMPERATURE_FINAL=${SAMPLING_TEMPERATURE_FINAL:-$SAMPLING_TEMPERATURE}
GENERATOR_FRACTION=${GENERATOR_FRACTION:-}
KEEP=last BEST_METRIC=loss BEST_MAXIMIZE=0  # ELECTRA keeps the final model

WEIGHT_DECAY_EXCLUDE=${WEIGHT_DECAY_EXCLUDE:-norm_and_bias}
recipe_check_settings
[[ -z ${INIT_FROM:-} ]] || die "INIT_FROM=$INIT_FROM: an ELECTRA cannot start from a RoBERTa-family masked LM; leave it unset"
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

recipe_corpus "$CORPUS_LANG" "$VOCAB_TYPE"

# ---- 4. pretrain with biofairseq-train --task electra --criterion electra (Table 5)

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task electra --criterion electra --discriminator-weight 50
    --sample-break-mode complete_doc --mask-prob "$MASK_PROB")
MODEL_ARGS=(--arch "$ARCH" --embedding-sharing "$EMBEDDING_SHARING" --sampling-temperature "$SAMPLING_TEMPERATURE"
    --sampling-temperature-final "$SAMPLING_TEMPERATURE_FINAL" --sampling-temperature-updates "$MAX_UPDATE"
    ${GENERATOR_FRACTION:+--generator-width-fraction "$GENERATOR_FRACTION"}
    --dropout 0.1 --attention-dropout 0.1)
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.999)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 1.0
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
recipe_pretrain

# ---- 5-8. the final checkpoint, checked; its discriminator (and generator) in transformers; NER; report

recipe_pick
recipe_convert --generator
recipe_baseline
recipe_ner
recipe_report
