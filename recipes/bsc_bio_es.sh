#!/usr/bin/env bash
# bsc-bio-es end to end (Carrino et al. 2022, "Pretrained Biomedical Language Models for Clinical NLP in
# Spanish"): raw Spanish clinical text -> cleaned corpus -> byte-level BPE -> data-bin -> RoBERTa pretrained
# with biofairseq-train --task document_mlm -> the checkpoint with the lowest validation perplexity ->
# transformers -> NER fine-tuning with the paper's learning-rate x seed sweep -> report.
#
#   bash recipes/bsc_bio_es.sh                                    # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="scielo=raw/scielo cases=raw/cases.jsonl.gz" \
#       NER_DATA="pharmaconer=data/pharmaconer cantemist=data/cantemist" NUM_GPUS=8 bash recipes/bsc_bio_es.sh
#   PRESET=one_gpu SOURCES="cases=clinical_cases.jsonl" NER_DATA="pharmaconer=data/pharmaconer" bash recipes/bsc_bio_es.sh
#
# Every command is printed ("+ ...") before it runs, so any stage can be copied and run by hand. A stage
# whose output exists is skipped, so running the recipe again resumes where it stopped: an interrupted
# pretraining continues from checkpoint_last.pt and an interrupted sweep from its unfinished runs. FORCE=1
# redoes every stage. The settings of the first run are kept in RUN_DIR/recipe.env; a rerun with a setting that
# changes what a finished stage made stops in one line (FORCE=1 or a new RUN_DIR); one of stages not yet run may
# change, and the report lists it (RUN_DIR/recipe.changes).
#
# Variables (environment). Inputs and outputs:
#   PRESET         tiny (default): the bundled sample (examples/data), bio_roberta_tiny, minutes on 2 CPU cores.
#                  paper: the paper's Table 3 pretraining and Table 4 fine-tuning values; set SOURCES.
#                  pilot: your corpus (a few million tokens) in about an hour on 2 CPU cores: bio_roberta_tiny, 5,000
#                  updates of 64 x 128 tokens, the fast path, the NER sweep every recipe's pilot shares (LR 1e-3,
#                  3 seeds, 10 epochs) and a random-init twin; set SOURCES and NER_DATA.
#                  one_gpu: a small in-house corpus (a few million tokens) and one GPU for under an hour: a 6 x 512
#                  RoBERTa, 128 tokens, ~30 passes, the fast path in bf16, an NER sweep and a random-init twin;
#                  set SOURCES and NER_DATA. On one H100: 13 minutes with NER_LRS=2e-4 (docs/results.md).
#   SOURCES        pretraining text, space-separated NAME=PATH; a PATH is a file or folder of JSON lines, plain
#                  text or BRAT, optionally compressed (see preprocess/clean_corpus.py --help).
#                  tiny: clinical=examples/data/clinical_cases.jsonl.gz
#   NER_DATA       NER data sets, space-separated NAME=DIR; DIR holds train, valid (or dev, devel) and test
#                  (optional), each a BRAT folder or a CoNLL file (.conll, .tsv, .bio). Empty (NER_DATA=): pretrain
#                  and convert only.
#                  tiny: pharmaconer=examples/data/pharmaconer (an excerpt of PharmaCoNER)
#   RUN_DIR        where everything goes (default: runs/bsc_bio_es/$PRESET)
#   FORCE          1: redo every stage (every stage's earlier output is removed before the first stage runs)
#   STOP_AFTER     settings: print the resolved settings (what recipe.env records) and stop before any work;
#                  binarize: stop after the corpus stages (1-3), e.g. to run them as a CPU job before the GPU one
#   SHARD_MB       the training data-bin in shards of at most this many megabytes of encoded text (a plain decimal, at
#                  least 0.01; a binary shard is about half as large),
#                  one read an epoch (default 0: one data-bin)
# Hardware:
#   NUM_GPUS       GPUs per machine (default: all that torch sees; 0: CPU). Pretraining uses all of them,
#                  each NER run one (the paper's batch of 32 x 2 is per device).
#   NUM_NODES      machines for pretraining (default 1). Above 1, biofairseq-train runs under Slurm's srun and
#                  fairseq's own launcher (--distributed-port) from inside an sbatch allocation.
#   PRECISION      on GPU: fp16 (the paper's, fairseq's --fp16; one_gpu: bf16) or bf16 (--amp-bf16: bf16 autocast, fp32 weights and
#                  checkpoints; fairseq 0.12.3's own --bf16 means a TPU); ignored on CPU, which trains in fp32.
#   WORKERS        processes for cleaning and binarizing (default: all cores)
#   FAST_PATH      1: --attention sdpa, --pack-documents, --optimizer fused_adamw (default one_gpu: 1; others: 0)
#   COMPILE        inductor: biofairseq-train --compile inductor, the encoder layers through torch.compile (default
#                  none; measured on one H100 and one H200: docs/benchmarks.md)
# Pretraining (preset values; each can be overridden):
#   ARCH, TOKENS_PER_SAMPLE, SEQUENCES_PER_UPDATE (the batch, split over devices and --update-freq),
#   BATCH_PER_DEVICE, PEAK_LR, WARMUP_UPDATES, MAX_UPDATE, SAVE_INTERVAL_UPDATES, VALID_DOCS, VOCAB_SIZE,
#   CLIP_NORM (gradient clipping; paper and tiny: 0, none; one_gpu: 1.0)
# Fine-tuning:
#   NER_LRS, NER_SEEDS (comma-separated), NER_EPOCHS, NER_MAX_LENGTH, NER_BATCH, NER_ACCUMULATION,
#   NER_WARMUP_RATIO, NER_EXTRA (more biofairseq-ner flags), NER_GPU (the GPU the runs use, default 0)
#   BASELINE       random-init: also fine-tune a randomly initialised copy of the model (same shape, same
#                  tokenizer), so the report shows what pretraining adds; none: don't (default tiny: random-init)
#   WEAK_PRETRAINING  stop: stop before fine-tuning when the kept checkpoint is not clearly better than word
#                  frequencies or its last layer has collapsed (stage 5); continue: say so and go on
#                  (default paper: stop; tiny: continue)
#   INIT_FROM      continual pretraining: a transformers RoBERTa-family folder or a fairseq checkpoint (.pt) whose
#                  weights are the start and whose vocabulary replaces the learned one (stage 2, biofairseq-convert
#                  from-hf); the report says so
#   PHASE2_SHARE, PHASE2_TOKENS_PER_SAMPLE, PHASE2_SEQUENCES_PER_UPDATE, PHASE2_BATCH_PER_DEVICE: a second length
#                  phase (default none; see recipes/lib/stages.sh). NER_LAYERWISE_DECAY (default 1: none).
#
# The stage machinery is recipes/lib/stages.sh, shared with the other recipes.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECIPE=bsc_bio_es
# shellcheck source=lib/stages.sh
source "$REPO/recipes/lib/stages.sh"

case $PRESET in
tiny)
    ARCH=${ARCH:-bio_roberta_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    recipe_tiny_defaults
    ;;
paper)
    require_inputs "the raw pretraining corpora" "pharmaconer=path/to/pharmaconer with train/ valid/ test/"
    VALID_DOCS=${VALID_DOCS:-2000}
    VOCAB_SIZE=${VOCAB_SIZE:-50262}
    ARCH=${ARCH:-bio_roberta_base}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-512}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-2048}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-16}
    PEAK_LR=${PEAK_LR:-5e-4}
    WARMUP_UPDATES=${WARMUP_UPDATES:-10000}
    MAX_UPDATE=${MAX_UPDATE:-125000}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-2500}
    LOG_INTERVAL=${LOG_INTERVAL:-100}
    NER_LRS=${NER_LRS:-8e-6,1e-5,2e-5,3e-5,5e-5}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-20}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-512}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-2}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0}
    BASELINE=${BASELINE:-none}
    ;;
pilot)
    # the masked-LM CPU pilot (benchmarks/results/pilot_bsc_bio_es.md): +7.9 F1 over its twin on PharmaCoNER
    recipe_pilot_defaults "the in-house pretraining text, e.g. cases=clinical_cases.jsonl"
    ARCH=${ARCH:-bio_roberta_tiny}
    PEAK_LR=${PEAK_LR:-1e-3}
    ;;
one_gpu)
    # A small in-house corpus on one GPU. With ~3M tokens, data and not compute is the limit: on one H100 a 6 x 512
    # RoBERTa (this shape, 128 tokens, 256 sequences per update, LR 1e-3, dropout 0.1) had its lowest validation
    # perplexity at update 1,500, about 15 passes over the corpus, then memorised it (training perplexity 1.00,
    # validation 20x worse; benchmarks/results/pretraining_vs_random_init.md), and its early checkpoint beat its
    # random-init twin on PharmaCoNER by 16 F1 points. So: ~30 passes with the LR decaying to zero, validation every
    # 250 updates, the checkpoint of lowest validation perplexity. Pretraining takes minutes, not the hour; the NER
    # sweep and its random-init twin take most of it. The preset itself on one H100 (packed rows, so ~34 passes):
    # lowest validation perplexity at update 720, test F1 78.92 +- 0.94 against 63.19 +- 0.29
    # (benchmarks/results/one_gpu_recipe_gpu.md).
    require_inputs "the in-house pretraining text, e.g. cases=clinical_cases.jsonl" "pharmaconer=path/to/pharmaconer with train/ valid/ test/"
    VALID_DOCS=${VALID_DOCS:-200}
    VOCAB_SIZE=${VOCAB_SIZE:-8000}
    ARCH=${ARCH:-bio_roberta_l6_h512}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-128}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-256}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-256}
    PEAK_LR=${PEAK_LR:-1e-3}
    WARMUP_UPDATES=${WARMUP_UPDATES:-300}
    MAX_UPDATE=${MAX_UPDATE:-3000}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-250}
    LOG_INTERVAL=${LOG_INTERVAL:-50}
    CLIP_NORM=${CLIP_NORM:-1.0}
    PRECISION=${PRECISION:-bf16}
    FAST_PATH=${FAST_PATH:-1}
    NER_LRS=${NER_LRS:-1e-4,2e-4,4e-4}
    NER_SEEDS=${NER_SEEDS:-1,2,3}
    NER_EPOCHS=${NER_EPOCHS:-10}
    recipe_small_model_ner_defaults
    ;;
*) die "PRESET=$PRESET: unknown; use PRESET=tiny, PRESET=pilot, PRESET=one_gpu or PRESET=paper" ;;
esac

KEEP=best BEST_METRIC=ppl BEST_MAXIMIZE=0  # the paper's: the lowest validation perplexity
CLIP_NORM=${CLIP_NORM:-0.0}  # the paper's: none

recipe_check_settings
recipe_check_tools
recipe_check_inputs
recipe_keep_settings

# ---- 1-3. clean the sources (sentence split, language id, noisy sentences, dedup; VALID_DOCS held out), learn the
# byte-level BPE (50,262 entries in the paper), encode and binarize

recipe_corpus es bytelevel-bpe

# ---- 4. pretrain with biofairseq-train --task document_mlm

TASK_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
    --sample-break-mode complete_doc --mask-prob 0.15)
MODEL_ARGS=("${ARCH_ARGS[@]}" --dropout 0.1 --attention-dropout 0.1)
OPTIM_ARGS=("${OPTIMIZER_ARGS[@]}" --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm "$CLIP_NORM"
    --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES")
recipe_pretrain

# ---- 5-8. the checkpoint with the lowest validation perplexity, checked; transformers; NER sweep; report

recipe_pick
recipe_convert
recipe_baseline
recipe_ner
recipe_report
