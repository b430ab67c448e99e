#!/usr/bin/env bash
# bsc-bio-es end to end (Carrino et al. 2022, "Pretrained Biomedical Language Models for Clinical NLP in
# Spanish"): raw Spanish clinical text -> cleaned corpus -> byte-level BPE -> data-bin -> RoBERTa pretrained
# with fairseq-train --task document_mlm -> the checkpoint with the lowest validation perplexity ->
# transformers -> NER fine-tuning with the paper's learning-rate x seed sweep -> report.
#
#   bash recipes/bsc_bio_es.sh                                    # PRESET=tiny: the bundled sample, CPU, minutes
#   PRESET=paper SOURCES="scielo=raw/scielo cases=raw/cases.jsonl.gz" \
#       NER_DATA="pharmaconer=data/pharmaconer cantemist=data/cantemist" NUM_GPUS=8 bash recipes/bsc_bio_es.sh
#
# Every command is printed ("+ ...") before it runs, so any stage can be copied and run by hand. A stage
# whose output exists is skipped, so running the recipe again resumes where it stopped: an interrupted
# pretraining continues from checkpoint_last.pt and an interrupted sweep from its unfinished runs. FORCE=1
# redoes every stage. The settings of the first run are kept in RUN_DIR/recipe.env; a rerun with other
# settings says which differ (finished stages keep their outputs unless FORCE=1).
#
# Variables (environment). Inputs and outputs:
#   PRESET         tiny (default): the bundled sample (examples/data), bio_roberta_tiny, minutes on 2 CPU cores.
#                  paper: the paper's Table 3 pretraining and Table 4 fine-tuning values; set SOURCES.
#   SOURCES        pretraining text, space-separated NAME=PATH; a PATH is a file or folder of JSON lines, plain
#                  text or BRAT, optionally compressed (see preprocess/clean_corpus.py --help).
#                  tiny: clinical=examples/data/clinical_cases.jsonl.gz
#   NER_DATA       NER data sets, space-separated NAME=DIR; DIR holds train, valid (or dev, devel) and test
#                  (optional), each a BRAT folder or a CoNLL file (.conll, .tsv, .bio).
#                  tiny: pharmaconer=examples/data/pharmaconer (an excerpt of PharmaCoNER)
#   RUN_DIR        where everything goes (default: runs/bsc_bio_es/$PRESET)
#   FORCE          1: redo every stage (removes its earlier output first)
# Hardware:
#   NUM_GPUS       GPUs per machine (default: all that torch sees; 0: CPU). Pretraining uses all of them,
#                  each NER run one (the paper's batch of 32 x 2 is per device).
#   NUM_NODES      machines for pretraining (default 1). Above 1, fairseq-train runs under Slurm's srun and
#                  fairseq's own launcher (--distributed-port) from inside an sbatch allocation.
#   PRECISION      fp16 (default on GPU, the paper's) or bf16; ignored on CPU, which trains in fp32.
#   WORKERS        processes for cleaning and binarizing (default: all cores)
# Pretraining (preset values; each can be overridden):
#   ARCH, TOKENS_PER_SAMPLE, SEQUENCES_PER_UPDATE (the batch, split over devices and --update-freq),
#   BATCH_PER_DEVICE, PEAK_LR, WARMUP_UPDATES, MAX_UPDATE, SAVE_INTERVAL_UPDATES, VALID_DOCS, VOCAB_SIZE
# Fine-tuning:
#   NER_LRS, NER_SEEDS (comma-separated), NER_EPOCHS, NER_MAX_LENGTH, NER_BATCH, NER_ACCUMULATION,
#   NER_WARMUP_RATIO, NER_EXTRA (more biofairseq-ner flags), NER_GPU (the GPU the runs use, default 0)
#   BASELINE       random-init: also fine-tune a randomly initialised copy of the model (same shape, same
#                  tokenizer), so the report shows what pretraining adds; none: don't (default tiny: random-init)
#   WEAK_PRETRAINING  stop: stop before fine-tuning when the kept checkpoint is not clearly better than word
#                  frequencies or its last layer has collapsed (stage 5b); continue: say so and go on
#                  (default paper: stop; tiny: continue)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PRESET=${PRESET:-tiny}
PYTHON=${PYTHON:-python}

die() { echo "bsc_bio_es.sh: error: $*" >&2; exit 1; }

case $PRESET in
tiny)
    SOURCES=${SOURCES:-clinical=$REPO/examples/data/clinical_cases.jsonl.gz}
    NER_DATA=${NER_DATA:-pharmaconer=$REPO/examples/data/pharmaconer}
    VALID_DOCS=${VALID_DOCS:-50}
    VOCAB_SIZE=${VOCAB_SIZE:-8000}
    ARCH=${ARCH:-bio_roberta_tiny}
    TOKENS_PER_SAMPLE=${TOKENS_PER_SAMPLE:-128}
    SEQUENCES_PER_UPDATE=${SEQUENCES_PER_UPDATE:-32}
    BATCH_PER_DEVICE=${BATCH_PER_DEVICE:-32}
    PEAK_LR=${PEAK_LR:-1e-3}
    WARMUP_UPDATES=${WARMUP_UPDATES:-50}
    MAX_UPDATE=${MAX_UPDATE:-600}
    SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-100}
    LOG_INTERVAL=${LOG_INTERVAL:-20}
    # A 2-layer model of width 128 learns nothing at the paper's fine-tuning rates in a few epochs; at 2e-3
    # and above it stays at all-O for most of them.
    NER_LRS=${NER_LRS:-5e-4,1e-3}
    NER_SEEDS=${NER_SEEDS:-1,2}
    NER_EPOCHS=${NER_EPOCHS:-10}
    NER_MAX_LENGTH=${NER_MAX_LENGTH:-$TOKENS_PER_SAMPLE}
    NER_BATCH=${NER_BATCH:-32}
    NER_ACCUMULATION=${NER_ACCUMULATION:-1}
    NER_WARMUP_RATIO=${NER_WARMUP_RATIO:-0.1}
    BASELINE=${BASELINE:-random-init}
    # Two minutes of a 2-layer model on a CPU may not beat word frequencies clearly: say so in the report, and go on.
    WEAK_PRETRAINING=${WEAK_PRETRAINING:-continue}
    ;;
paper)
    [[ -n ${SOURCES:-} ]] || die "PRESET=paper needs SOURCES=\"NAME=PATH ...\" (the raw pretraining corpora); see the top of $0"
    [[ -n ${NER_DATA:-} ]] || die "PRESET=paper needs NER_DATA=\"NAME=DIR ...\" (e.g. pharmaconer=path/to/pharmaconer with train/ valid/ test/); see the top of $0"
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
*) die "PRESET=$PRESET: unknown; use PRESET=tiny or PRESET=paper" ;;
esac
RUN_DIR=${RUN_DIR:-runs/bsc_bio_es/$PRESET}
FORCE=${FORCE:-0}
NUM_NODES=${NUM_NODES:-1}
WORKERS=${WORKERS:-$(nproc)}
NER_EXTRA=${NER_EXTRA:-}
WEAK_PRETRAINING=${WEAK_PRETRAINING:-stop}  # the paper preset's

# ---- every setting, checked before any work

one_of() {  # one_of NAME VALUE CHOICES...
    local name=$1 value=$2 choice
    shift 2
    for choice in "$@"; do [[ $value == "$choice" ]] && return; done
    die "$name=$value: unknown; use one of: $*"
}
one_of FORCE "$FORCE" 0 1
one_of BASELINE "$BASELINE" random-init none
one_of WEAK_PRETRAINING "$WEAK_PRETRAINING" stop continue
[[ -z ${PRECISION:-} ]] || one_of PRECISION "$PRECISION" fp16 bf16
for v in VALID_DOCS VOCAB_SIZE TOKENS_PER_SAMPLE SEQUENCES_PER_UPDATE BATCH_PER_DEVICE WARMUP_UPDATES MAX_UPDATE \
    SAVE_INTERVAL_UPDATES LOG_INTERVAL NER_MAX_LENGTH NER_BATCH NER_ACCUMULATION NUM_NODES WORKERS ${NUM_GPUS:+NUM_GPUS}; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v}: not a whole number"
done
for v in SEQUENCES_PER_UPDATE BATCH_PER_DEVICE MAX_UPDATE SAVE_INTERVAL_UPDATES NER_BATCH NER_ACCUMULATION NUM_NODES WORKERS; do
    (( ${!v} > 0 )) || die "$v=${!v}: must be at least 1"
done
number='[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?'
for v in PEAK_LR NER_EPOCHS NER_WARMUP_RATIO; do
    [[ ${!v} =~ ^$number$ ]] || die "$v=${!v}: not a number"
done
for v in NER_LRS NER_SEEDS; do
    [[ ${!v} =~ ^$number(,$number)*$ ]] || die "$v=${!v}: give comma-separated numbers, as 5e-5,1e-4"
done

for tool in "$PYTHON" fairseq-train fairseq-preprocess biofairseq-convert biofairseq-ner; do
    command -v "$tool" >/dev/null || die "$tool: not found; run 'make install' and 'source .venv/bin/activate' (or 'make demo'), then run this again"
done
if [[ -z ${NUM_GPUS:-} ]]; then
    NUM_GPUS=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
fi
DEVICES=$(( NUM_GPUS > 0 ? NUM_GPUS * NUM_NODES : 1 ))
(( SEQUENCES_PER_UPDATE % (DEVICES * BATCH_PER_DEVICE) == 0 )) ||
    die "SEQUENCES_PER_UPDATE=$SEQUENCES_PER_UPDATE is not a multiple of $DEVICES device(s) x BATCH_PER_DEVICE=$BATCH_PER_DEVICE; change BATCH_PER_DEVICE"
UPDATE_FREQ=$(( SEQUENCES_PER_UPDATE / (DEVICES * BATCH_PER_DEVICE) ))

# ---- the inputs, checked before any work

for source in $SOURCES; do
    [[ $source == *=* && -e ${source#*=} ]] || die "SOURCES: '$source': give NAME=PATH, PATH an existing file or folder"
done
split_path() {  # split_path DIR NAME...: the first DIR/NAME[.conll|.tsv|.bio] that exists
    local dir=$1 name ext
    shift
    for name in "$@"; do
        for ext in "" .conll .tsv .bio; do
            [[ -e $dir/$name$ext ]] && { echo "$dir/$name$ext"; return; }
        done
    done
}
NER_NAMES=() NER_TRAIN=() NER_DEV=() NER_TEST=()
for dataset in $NER_DATA; do
    name=${dataset%%=*} dir=${dataset#*=}
    [[ $name != "$dataset" && -d $dir ]] || die "NER_DATA: '$dataset': give NAME=DIR, DIR a folder with train, valid and test"
    train=$(split_path "$dir" train) dev=$(split_path "$dir" valid dev devel) test=$(split_path "$dir" test)
    [[ -n $train && -n $dev ]] || die "$dir: needs train and valid (or dev, devel): BRAT folders or CoNLL files (.conll, .tsv, .bio)"
    NER_NAMES+=("$name") NER_TRAIN+=("$train") NER_DEV+=("$dev") NER_TEST+=("$test")
done

CLEAN=$RUN_DIR/clean VOCAB=$RUN_DIR/vocab DATA_BIN=$RUN_DIR/data-bin PRETRAIN=$RUN_DIR/pretrain
HF_MODEL=$RUN_DIR/hf/bsc_bio_es NER_DIR=$RUN_DIR/ner

# ---- printing, skipping, resuming

run() {  # prints a command so that it can be pasted into a shell, then runs it
    echo "+ $(printf '%q ' "$@")" >&2
    "$@" >&2  # stdout is for the report alone
}
weights_sha256() {  # the fingerprint biofairseq-ner records for a model folder: sha256 of its weight files, in name order
    cat $(find "$1" -maxdepth 1 \( -name '*.safetensors' -o -name '*.bin' \) | LC_ALL=C sort) | sha256sum | cut -d' ' -f1
}
elapsed() { printf '%d:%02d elapsed' $((SECONDS / 60)) $((SECONDS % 60)); }
RAN=0
stage() {  # stage NUMBER TITLE OUTPUT [DONE]: runs (returns 0) unless DONE (default OUTPUT) exists
    local output=$3 done=${4:-$3}
    echo >&2
    echo "==== $1 $2 -> $output  [$(elapsed)]" >&2
    if [[ $FORCE == 1 && -e $output ]]; then
        run rm -rf "$output"  # FORCE=1: start the stage afresh
    fi
    if [[ -e $done ]]; then
        echo "skipped: $done exists (FORCE=1 redoes it)" >&2
        return 1
    fi
    RAN=1
}
mkdir -p "$RUN_DIR"
SETTINGS=$(for v in PRESET SOURCES NER_DATA VALID_DOCS VOCAB_SIZE ARCH TOKENS_PER_SAMPLE SEQUENCES_PER_UPDATE PEAK_LR \
    WARMUP_UPDATES MAX_UPDATE NER_LRS NER_SEEDS NER_EPOCHS NER_MAX_LENGTH NER_BATCH NER_ACCUMULATION NER_WARMUP_RATIO \
    NER_EXTRA BASELINE WEAK_PRETRAINING; do echo "$v=${!v}"; done)
if [[ $FORCE != 1 && -f $RUN_DIR/recipe.env ]] && ! differing=$(diff <(echo "$SETTINGS") "$RUN_DIR/recipe.env"); then
    echo "note: settings differ from $RUN_DIR/recipe.env; stages already done keep their outputs (FORCE=1 redoes them):" >&2
    echo "$differing" | sed -n 's/^[<>]/  &/p' >&2
else
    echo "$SETTINGS" >"$RUN_DIR/recipe.env"
fi
echo "bsc_bio_es.sh: PRESET=$PRESET RUN_DIR=$RUN_DIR; $(( NUM_GPUS > 0 ? NUM_GPUS : 0 )) GPU(s) x $NUM_NODES machine(s), update frequency $UPDATE_FREQ" >&2

# ---- 1. clean the sources (sentence split, language id, noisy sentences, dedup; VALID_DOCS held out)

if stage 1 "clean the sources" "$CLEAN" "$CLEAN/stats.json"; then
    CLEAN_ARGS=(--output-dir "$CLEAN" --lang es --valid-docs "$VALID_DOCS" --workers "$WORKERS")
    for source in $SOURCES; do CLEAN_ARGS+=(--source "$source"); done
    run "$PYTHON" "$REPO/preprocess/clean_corpus.py" "${CLEAN_ARGS[@]}"
fi

# ---- 2. learn the byte-level BPE (50,262 entries in the paper)

if stage 2 "learn the byte-level BPE" "$VOCAB"; then
    VOCAB_ARGS=(--input "$CLEAN/train.txt" --type bytelevel-bpe --vocab-size "$VOCAB_SIZE" --output-dir "$VOCAB" --workers "$WORKERS")
    run "$PYTHON" "$REPO/preprocess/train_vocab.py" "${VOCAB_ARGS[@]}"
fi

# ---- 3. encode and binarize (fairseq-preprocess)

if stage 3 "encode and binarize" "$DATA_BIN"; then
    PYTHON=$PYTHON run bash "$REPO/preprocess/binarize.sh" "$CLEAN" "$VOCAB" "$DATA_BIN" "$WORKERS"
fi

# ---- 4. pretrain with fairseq-train --task document_mlm (resumes from checkpoint_last.pt)

if stage 4 "pretrain $ARCH" "$PRETRAIN" "$PRETRAIN/finished"; then
    TASK_ARGS=(--user-dir "$REPO/biofairseq" --task document_mlm --criterion masked_lm_accuracy
        --sample-break-mode complete_doc --tokens-per-sample "$TOKENS_PER_SAMPLE" --mask-prob 0.15)
    # the checkpoint records its BPE, so that fairseq's from_pretrained encodes text with no further arguments
    mapfile -t BPE_ARGS < <("$PYTHON" -m biofairseq.bpe_flags "$DATA_BIN")
    (( ${#BPE_ARGS[@]} )) || die "$DATA_BIN: no vocabulary recorded (vocab_info.json); FORCE=1 rebuilds the data-bin"
    TASK_ARGS+=("${BPE_ARGS[@]}")
    MODEL_ARGS=(--arch "$ARCH" --dropout 0.1 --attention-dropout 0.1)
    OPTIM_ARGS=(--optimizer adam --adam-betas "(0.9,0.98)" --adam-eps 1e-6 --weight-decay 0.01 --clip-norm 0.0
        --lr "$PEAK_LR" --lr-scheduler polynomial_decay --warmup-updates "$WARMUP_UPDATES"
        --total-num-update "$MAX_UPDATE" --max-update "$MAX_UPDATE")
    BATCH_ARGS=(--batch-size "$BATCH_PER_DEVICE" --update-freq "$UPDATE_FREQ" --num-workers 2)
    CHECKPOINT_ARGS=(--save-dir "$PRETRAIN/checkpoints" --save-interval-updates "$SAVE_INTERVAL_UPDATES"
        --keep-interval-updates 2 --no-epoch-checkpoints --best-checkpoint-metric ppl)
    LOG_ARGS=(--log-format json --log-interval "$LOG_INTERVAL" --log-file "$PRETRAIN/train.log"
        --tensorboard-logdir "$PRETRAIN/tensorboard" --seed 1)
    LAUNCH=()
    if (( NUM_GPUS == 0 )); then
        HARDWARE_ARGS=(--cpu)
    else
        HARDWARE_ARGS=("--${PRECISION:-fp16}" --distributed-world-size "$DEVICES")
        if (( NUM_NODES > 1 )); then
            # fairseq's launcher reads Slurm's variables: one task per machine, one process per GPU.
            LAUNCH=(srun --nodes "$NUM_NODES" --ntasks-per-node 1 --gpus-per-node "$NUM_GPUS")
            HARDWARE_ARGS+=(--distributed-port "${DISTRIBUTED_PORT:-12345}")
        fi
    fi
    mkdir -p "$PRETRAIN"
    run "${LAUNCH[@]}" fairseq-train "$DATA_BIN" "${TASK_ARGS[@]}" "${MODEL_ARGS[@]}" "${OPTIM_ARGS[@]}" \
        "${BATCH_ARGS[@]}" "${CHECKPOINT_ARGS[@]}" "${LOG_ARGS[@]}" "${HARDWARE_ARGS[@]}"
    date -Is >"$PRETRAIN/finished"
fi

# ---- 5. pick the checkpoint with the lowest validation perplexity

if stage 5 "pick the checkpoint with the lowest validation perplexity" "$PRETRAIN/best.json"; then
    run "$PYTHON" -m biofairseq.recipe.best_checkpoint "$PRETRAIN/checkpoints" "$PRETRAIN/train.log" --output "$PRETRAIN/best.json"
fi

# ---- 5b. is it clearly better than word frequencies? (a collapsed pretraining is worse than none)

if stage 5b "compare with word frequencies, look for a collapsed last layer" "$PRETRAIN/check.json"; then
    CHECK_ARGS=("$PRETRAIN/best.json" "$DATA_BIN" --output "$PRETRAIN/check.json")
    [[ $WEAK_PRETRAINING == continue ]] && CHECK_ARGS+=(--go-on)
    if ! run "$PYTHON" -m biofairseq.recipe.pretraining_check "${CHECK_ARGS[@]}"; then
        rm -f "$PRETRAIN/check.json"  # so that a rerun checks again (or goes on with WEAK_PRETRAINING=continue)
        die "stopped before fine-tuning (see the line above and $PRETRAIN/best.json); WEAK_PRETRAINING=continue goes on anyway"
    fi
fi

# ---- 6. convert to transformers (parity-checked)

if stage 6 "convert to transformers" "$HF_MODEL"; then
    run biofairseq-convert to-hf "$PRETRAIN/checkpoints/checkpoint_best.pt" "$HF_MODEL"
fi
MODELS=("$HF_MODEL")
if [[ $BASELINE == random-init ]]; then
    if stage 6b "a randomly initialised copy, as a baseline" "$RUN_DIR/hf/random_init"; then
        run "$PYTHON" -m biofairseq.recipe.random_init "$HF_MODEL" "$RUN_DIR/hf/random_init"
    fi
    MODELS+=("$RUN_DIR/hf/random_init")
fi

# ---- 7. fine-tune and evaluate NER: the learning-rate x seed sweep, per data set and model

NER_LAUNCH=()
(( NUM_GPUS == 0 )) || NER_LAUNCH=(env "CUDA_VISIBLE_DEVICES=${NER_GPU:-0}")  # one GPU per run, as in the paper
REPORT_ARGS=()
for i in "${!NER_NAMES[@]}"; do
    name=${NER_NAMES[$i]} train=${NER_TRAIN[$i]} dev=${NER_DEV[$i]} test=${NER_TEST[$i]}
    for model in "${MODELS[@]}"; do
        sweep_dir=$NER_DIR/$name/model=$(basename "$model")
        REPORT_ARGS+=(--ner "$name=$sweep_dir")
        # a sweep of another model (pretrained again since) is out of date: the sweep redoes its runs
        if [[ -f $sweep_dir/report.json && $(cat "$sweep_dir/model.sha256" 2>/dev/null) != "$(weights_sha256 "$model")" ]]; then
            echo "note: $model changed since $sweep_dir was run; its runs are redone" >&2
            rm -f "$sweep_dir/report.json"
        fi
        stage 7 "fine-tune $(basename "$model") on $name" "$sweep_dir" "$sweep_dir/report.json" || continue
        NER_ARGS=(--model "$model" --train "$train" --dev "$dev" ${test:+--test "$test"} --output-dir "$sweep_dir"
            --lrs "$NER_LRS" --seeds "$NER_SEEDS" --epochs "$NER_EPOCHS" --max-length "$NER_MAX_LENGTH"
            --batch-size "$NER_BATCH" --gradient-accumulation "$NER_ACCUMULATION" --warmup-ratio "$NER_WARMUP_RATIO")
        # shellcheck disable=SC2086  # NER_EXTRA holds several flags
        run "${NER_LAUNCH[@]}" biofairseq-ner sweep "${NER_ARGS[@]}" $NER_EXTRA
    done
done

# ---- 8. the report: corpus, vocabulary, pretraining and the NER table (Markdown, JSON, plot)

(( RAN == 0 )) || rm -f "$RUN_DIR/report.md"  # a stage ran: the report is out of date
if stage 8 "write the report" "$RUN_DIR/report.md"; then
    run "$PYTHON" -m biofairseq.recipe.report "$RUN_DIR" "${REPORT_ARGS[@]}"
fi
cat "$RUN_DIR/report.md"
echo "bsc_bio_es.sh: done [$(elapsed)]; the report is $RUN_DIR/report.md (and .json, .png)" >&2
