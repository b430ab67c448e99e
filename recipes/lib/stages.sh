# The stage machinery every recipe shares: the settings step, printing, skipping and resuming, FORCE, and the stages
# themselves (clean, vocabulary, binarize, pretrain in one or two length phases, pick, check, convert, random-init
# baseline, NER sweep, report). Sourced by recipes/*.sh after they set RECIPE (the recipe's name: messages, the
# report's title, the transformers folder hf/$RECIPE); it sets REPO, the clone; then
#
#   recipe_settings   every setting: the recipe's table in biofairseq/recipe/presets.py, merged with the environment,
#                     checked and kept in RUN_DIR/recipe.env by biofairseq/recipe/settings.py (docs/recipes.md)
#   TASK_ARGS, MODEL_ARGS, OPTIM_ARGS   before recipe_pretrain: fairseq-train flags of the objective, model, optimizer
#   KEEP          best: the checkpoint with the best validation BEST_METRIC; last: the final one (ELECTRA's way)
#
# Two length phases (BERT, BETO, BioELECTRA), any objective: PHASE2_SHARE=0.1 trains the last 10% of MAX_UPDATE
# updates at PHASE2_TOKENS_PER_SAMPLE tokens with PHASE2_SEQUENCES_PER_UPDATE sequences (PHASE2_BATCH_PER_DEVICE
# per device). Phase 2 continues from phase 1's checkpoint_last.pt with --reset-dataloader only (on its first launch;
# with shards, from the shard after phase 1's: biofairseq/recipe/pretraining_state.py): the optimizer
# state and one learning-rate schedule over --total-num-update MAX_UPDATE run on. The model's position table
# has 512 rows from the first update (the presets' --max-positions), so it is not outgrown.
#
# The optimizer: OPTIMIZER_ARGS, which every recipe's OPTIM_ARGS start with. fairseq's adam (AdamW: decoupled weight
# decay) on every parameter, as fairseq's RoBERTa; with WEIGHT_DECAY_EXCLUDE=norm_and_bias (BERT's, ELECTRA's and
# Megatron-LM's way) LayerNorm weights and biases get none, through --optimizer adamw, the same update with parameter
# groups (and --fp16-no-flatten-grads under --fp16). FAST_PATH=1 trains with --attention sdpa, --pack-documents and the
# recipe's Adam settings in --optimizer fused_adamw. COMPILE=inductor adds biofairseq-train --compile inductor.
#
# Several models in one run (recipes/bio_lm.sh): recipe_model NAME before each model's stages 4-6 sends them to
# pretrain/NAME and hf/NAME; without it a recipe has one model, in pretrain/ and hf/$RECIPE.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)  # the clone: the preprocess/ scripts and the user dir
PYTHON=${PYTHON:-python}
SDPA_ARGS=(--attention sdpa)  # what the fast path adds to choose SDPA; a model that only has SDPA (ModernBERT's) sets ()

die() { echo "$RECIPE.sh: error: $*" >&2; exit 1; }

# An interrupt (Ctrl-C: SIGINT to the recipe and the command it runs; SIGTERM: a scheduler's stop) ends in one line
# saying where the run was and that the same command resumes; the command running says what it kept. bash runs a trap
# once its foreground command has ended: SIGTERM sent to bash alone stops the recipe after that command.
STAGE_NOW=
on_interrupt() {  # on_interrupt STATUS
    trap - INT TERM
    echo >&2
    local again="run the same command again"  # without FORCE, which would remove what this run has made
    [[ ${FORCE:-0} == 0 ]] || again="run the same command again without FORCE=$FORCE"
    echo "$RECIPE.sh: interrupted${STAGE_NOW:+ in stage $STAGE_NOW}; finished stages are kept and an unfinished one resumes where it stopped: $again [$(elapsed)]" >&2
    exit "$1"
}
trap 'on_interrupt 130' INT
trap 'on_interrupt 143' TERM

recipe_settings() {  # every setting, resolved and checked before any work (one line and exit 1 at the first wrong one),
    # kept in recipe.env and set here; STOP_AFTER=settings prints recipe.env and stops
    local tool resolved
    for tool in "$PYTHON" biofairseq-train fairseq-preprocess biofairseq-convert biofairseq-ner; do
        command -v "$tool" >/dev/null || die "$tool: not found; run 'make install' and 'source .venv/bin/activate' (or 'make demo'), then run this again"
    done
    resolved=$("$PYTHON" -m biofairseq.recipe.settings resolve "$RECIPE" "$0" "$REPO") || exit 1
    eval "$resolved"
    OPTIMIZER_ARGS=(--optimizer adam) FAST_ARGS=()
    [[ $WEIGHT_DECAY_EXCLUDE == none ]] || OPTIMIZER_ARGS=(--optimizer adamw --weight-decay-exclude "$WEIGHT_DECAY_EXCLUDE")
    if [[ $FAST_PATH == 1 ]]; then  # the fast path: same weights and schedule, other kernels; several documents per row
        OPTIMIZER_ARGS[1]=fused_adamw FAST_ARGS=("${SDPA_ARGS[@]}" --pack-documents)
    fi
    [[ $COMPILE == none ]] || FAST_ARGS+=(--compile "$COMPILE")
    CLEAN=$RUN_DIR/clean VOCAB=$RUN_DIR/vocab DATA_BIN=$RUN_DIR/data-bin PRETRAIN=$RUN_DIR/pretrain
    HF_MODEL=$RUN_DIR/hf/$RECIPE NER_DIR=$RUN_DIR/ner MODEL_NAME= MODELS=() PRETRAINED=() VOCAB_NAMES=() BREAKOUT_ARGS=()
    ARCH_ARGS=(--arch "$ARCH") INIT_CHECKPOINT= INIT_ARGS=() INIT_TO_HF_ARGS=()  # recipe_init_from sets the first two
    (( ${#FORCE_REMOVE[@]} == 0 )) || recipe_force
    echo "$RECIPE.sh: PRESET=$PRESET RUN_DIR=$RUN_DIR; $NUM_GPUS GPU(s) x $NUM_NODES machine(s), update frequency $UPDATE_FREQ" >&2
}

recipe_model() {  # recipe_model NAME: stages 4-6 of model NAME, in pretrain/NAME and hf/NAME
    MODEL_NAME=$1 PRETRAIN=$RUN_DIR/pretrain/$1 HF_MODEL=$RUN_DIR/hf/$1
}

# ---- printing, skipping, resuming

run() {  # prints a command so that it can be pasted into a shell, then runs it
    echo "+ $(printf '%q ' "$@")" >&2
    "$@" >&2  # stdout is for the report alone
}
elapsed() { printf '%d:%02d elapsed' $((SECONDS / 60)) $((SECONDS % 60)); }
RAN=0
stage() {  # stage NUMBER TITLE OUTPUT [DONE]: runs (returns 0) unless DONE (default OUTPUT) exists
    local output=$3 done=${4:-$3}
    STAGE_NOW="$1 ($2)"
    echo >&2
    echo "==== $1 $2 -> $output  [$(elapsed)]" >&2
    if [[ -e $done ]]; then  # (FORCE removed the outputs of the stages it redoes before the first: recipe_force)
        echo "skipped: $done exists (FORCE=1 redoes every stage, FORCE=STAGE from that stage on)" >&2
        return 1
    fi
    # a stage killed outright (SIGKILL) left its tools' temporaries beside its output, which no trap removed: the
    # .NAME.XXXXXXXX of preprocess/train_vocab.py, and the .NAME.tmp-PID of biofairseq.atomic (conversion, the random-init
    # twin, JSON files, reports); the stage starts again without them
    local leftover
    for leftover in "${output%/*}"/.*.tmp-* "${output%/*}/.${output##*/}".*; do
        if [[ -e $leftover ]]; then echo "removed $leftover, a temporary of an interrupted run" >&2; rm -rf "$leftover"; fi
    done
    RAN=1
}

recipe_force() {  # FORCE=1 (or FORCE=STAGE): the outputs of every stage (from STAGE on), named by the settings step
    # in FORCE_REMOVE, go before the first stage runs, so that a run that stops early (STOP_AFTER=binarize) leaves
    # nothing of an earlier run's later stages to be taken for this one's
    local output
    for output in "${FORCE_REMOVE[@]}"; do
        if [[ -e $RUN_DIR/$output ]]; then run rm -rf "${RUN_DIR:?}/$output"; fi
    done
}

# ---- 1-3. corpus, vocabulary (or INIT_FROM's), data-bin

recipe_corpus() {  # recipe_corpus VOCAB_TYPE: stages 1-3 of a recipe with one vocabulary
    recipe_clean
    if [[ -n ${INIT_FROM:-} ]]; then
        recipe_init_from
    else
        recipe_vocabulary "$1" "$VOCAB_SIZE"
    fi
    recipe_binarize
}

recipe_clean() {  # the sources in CORPUS_LANG
    local source
    if stage 1 "clean the sources" "$CLEAN" "$CLEAN/stats.json"; then
        local clean_args=(--output-dir "$CLEAN" --lang "$CORPUS_LANG" --valid-docs "$VALID_DOCS" --workers "$WORKERS"
            --text-docs "$TEXT_DOCS" --text-field "$TEXT_FIELD")
        if [[ $CORPUS_LAUNCHER != local ]]; then  # every cleaning stage as job arrays: WORKERS tasks at a time
            clean_args+=(--launcher "$CORPUS_LAUNCHER" --slurm-time "$CORPUS_SLURM_TIME"
                ${CORPUS_SLURM_PARTITION:+--slurm-partition "$CORPUS_SLURM_PARTITION"}
                ${CORPUS_SLURM_MEM_GB:+--slurm-mem-gb "$CORPUS_SLURM_MEM_GB"})
        fi
        for source in $SOURCES; do clean_args+=(--source "$source"); done
        run "$PYTHON" "$REPO/preprocess/clean_corpus.py" "${clean_args[@]}"
    fi
}

recipe_data() {  # recipe_data NAME: a run with several vocabularies; stages 2-3 (and 4, after) use vocab/NAME, data-bin/NAME
    VOCAB=$RUN_DIR/vocab/$1 DATA_BIN=$RUN_DIR/data-bin/$1
    [[ " ${VOCAB_NAMES[*]} " == *" $1 "* ]] || VOCAB_NAMES+=("$1")  # the report's vocabularies, in this order
}

recipe_vocabulary() {  # recipe_vocabulary TYPE SIZE
    if stage 2 "learn the vocabulary ($1, $2 entries)" "$VOCAB"; then
        local vocab_args=(--input "$CLEAN/train.txt" --type "$1" --vocab-size "$2" --output-dir "$VOCAB" --workers "$WORKERS")
        run "$PYTHON" "$REPO/preprocess/train_vocab.py" "${vocab_args[@]}"
    fi
}

recipe_binarize() {
    if stage 3 "encode and binarize" "$DATA_BIN"; then
        PYTHON=$PYTHON run bash "$REPO/preprocess/binarize.sh" "$CLEAN" "$VOCAB" "$DATA_BIN" "$WORKERS" "$SHARD_MB"
    fi
}

recipe_breakout() {  # each vocabulary's entity break-out rate on each NER training set
    # (BioMegatron's Table 3: sub-tokens per Moses word over the entity mentions), for the report
    local i name vocabs=() out
    for name in "${VOCAB_NAMES[@]}"; do vocabs+=("$name=$RUN_DIR/vocab/$name"); done
    (( ${#vocabs[@]} )) || vocabs=("vocabulary=$VOCAB")
    for i in "${!NER_NAMES[@]}"; do
        out=$RUN_DIR/breakout/${NER_NAMES[$i]}
        if stage 3b "entity break-out rates of the vocabularies on ${NER_NAMES[$i]}" "$out.json"; then
            mkdir -p "$RUN_DIR/breakout"
            run "$PYTHON" "$REPO/preprocess/vocab_stats.py" --vocab "${vocabs[@]}" --ner "${NER_TRAIN[$i]}" --lang "$CORPUS_LANG" \
                --output "$out"
        fi
        BREAKOUT_ARGS+=(--breakout "${NER_NAMES[$i]}=$out.json")
    done
}

recipe_init_from() {
    # Continual pretraining (BETO, BioMegatron-1.2b, bio-lm's RoBERTa-initialised models): INIT_FROM's weights, and its
    # vocabulary in place of one learned on the corpus, in fairseq's format (biofairseq-convert from-hf, parity-checked).
    # INIT_ARGS: more from-hf flags (an ELECTRA's --generator-fraction); INIT_TO_HF_ARGS: to-hf's, for a .pt
    VOCAB=$RUN_DIR/init
    if stage 2 "take the weights and the vocabulary of INIT_FROM=$INIT_FROM" "$VOCAB"; then
        local hf=$INIT_FROM
        if [[ $INIT_FROM == *.pt ]]; then
            hf=$RUN_DIR/init.hf
            rm -rf "$hf"
            run biofairseq-convert to-hf "$INIT_FROM" "$hf" "${INIT_TO_HF_ARGS[@]}"
        fi
        run biofairseq-convert from-hf "$hf" "$VOCAB" "${INIT_ARGS[@]}"
        [[ $hf == "$INIT_FROM" ]] || rm -rf "$hf"
    fi
    # the model's shape is the converted checkpoint's, and its weights the start (fairseq-train --finetune-from-model)
    mapfile -t ARCH_ARGS < <("$PYTHON" -c "import json, sys; print('\n'.join(json.load(open(sys.argv[1]))['fairseq_flags']))" \
        "$VOCAB/conversion.json")
    ARCH=${ARCH_ARGS[1]} INIT_CHECKPOINT=$VOCAB/model.pt
}

# ---- 4. pretrain with biofairseq-train (resumes from checkpoint_last.pt), in one or two length phases

pretrain_phase() {  # pretrain_phase TOKENS_PER_SAMPLE BATCH_PER_DEVICE UPDATE_FREQ UNTIL_UPDATE [FLAG...]
    local tokens=$1 batch=$2 freq=$3 until=$4 updates
    shift 4
    # a checkpoint a kill cut short is mended first; fairseq-train started on a checkpoint_last.pt at --max-update trains
    # one update more, so a run killed after its last checkpoint, before the stage was marked finished, is not started
    updates=$("$PYTHON" -m biofairseq.recipe.pretraining_state updates "$PRETRAIN/checkpoints") || updates=0
    if (( updates >= until )); then
        echo "$PRETRAIN/checkpoints/checkpoint_last.pt: at update $updates already, where this run ends; not trained again" >&2
        return 0
    fi
    (( updates == 0 )) || echo "resuming: $PRETRAIN/checkpoints/checkpoint_last.pt is at update $updates of $until" >&2
    run "${LAUNCH[@]}" biofairseq-train "$DATA_PATH" "${TASK_ARGS[@]}" --tokens-per-sample "$tokens" "${BPE_ARGS[@]}" \
        "${MODEL_ARGS[@]}" "${FAST_ARGS[@]}" "${OPTIM_ARGS[@]}" --total-num-update "$UPDATES" --max-update "$until" \
        --batch-size "$batch" --update-freq "$freq" --num-workers "$DATA_WORKERS" "${CHECKPOINT_ARGS[@]}" "${LOG_ARGS[@]}" \
        "${HARDWARE_ARGS[@]}" "$@"
}

recipe_pretrain() {  # recipe_pretrain [UPDATES [FLAG...]]: UPDATES (default MAX_UPDATE) updates; FLAGs go to biofairseq-train
    if [[ $STOP_AFTER == binarize ]]; then  # the corpus stages as a CPU job; pretraining in another, on the GPUs
        echo "$RECIPE.sh: STOP_AFTER=binarize: stopped after the corpus stages [$(elapsed)]; run again without it to pretrain" >&2
        exit 0
    fi
    UPDATES=${1:-$MAX_UPDATE}
    (( $# == 0 )) || shift
    stage 4 "pretrain ${MODEL_NAME:+$MODEL_NAME, }$ARCH" "$PRETRAIN" "$PRETRAIN/finished" || return 0
    # the checkpoint records its BPE, so that fairseq's from_pretrained encodes text with no further arguments
    mapfile -t BPE_ARGS < <("$PYTHON" -m biofairseq.bpe_flags "$DATA_BIN")
    (( ${#BPE_ARGS[@]} )) || die "$DATA_BIN: no vocabulary recorded (vocab_info.json); FORCE=1 rebuilds the data-bin"
    DATA_PATH=$("$PYTHON" -m biofairseq.data_bin path "$DATA_BIN")  # shard0:shard1:... when sharded (SHARD_MB)
    CHECKPOINT_ARGS=(--save-dir "$PRETRAIN/checkpoints" --save-interval-updates "$SAVE_INTERVAL_UPDATES"
        --keep-interval-updates "$KEEP_INTERVAL_UPDATES" --no-epoch-checkpoints --best-checkpoint-metric "$BEST_METRIC")
    [[ $BEST_MAXIMIZE == 1 ]] && CHECKPOINT_ARGS+=(--maximize-best-checkpoint-metric)
    LOG_ARGS=(--log-format json --log-interval "$LOG_INTERVAL" --log-file "$PRETRAIN/train.log"
        --tensorboard-logdir "$PRETRAIN/tensorboard" --seed "$SEED")
    LAUNCH=()
    if (( NUM_GPUS == 0 )); then
        HARDWARE_ARGS=(--cpu)
    else
        local precision=(--fp16)
        [[ $PRECISION == fp16 ]] || precision=(--amp-bf16)  # fairseq 0.12.3's own --bf16 means a TPU
        # fp16's one flat fp32 copy of the parameters cannot tell LayerNorms and biases apart
        [[ ${precision[0]} != --fp16 || $WEIGHT_DECAY_EXCLUDE == none ]] || precision+=(--fp16-no-flatten-grads)
        HARDWARE_ARGS=("${precision[@]}" --distributed-world-size "$DEVICES")
        if (( NUM_NODES > 1 )); then
            # fairseq's launcher reads Slurm's variables (and runs scontrol): one task per machine, which starts one
            # process per GPU; the task gets the machine's cores (srun does not inherit sbatch's --cpus-per-task since
            # Slurm 22.05), and one failing machine stops them all
            LAUNCH=(srun --nodes "$NUM_NODES" --ntasks-per-node 1 --gpus-per-node "$NUM_GPUS" --cpus-per-task "$WORKERS"
                --kill-on-bad-exit 1)
            HARDWARE_ARGS+=(--distributed-port "$DISTRIBUTED_PORT")
        fi
    fi
    mkdir -p "$PRETRAIN"
    echo "$ARCH" >"$PRETRAIN/arch"  # for the report
    # INIT_FROM: the first (or only) phase starts from its weights; fairseq refuses --finetune-from-model beside
    # phase 2's --reset-dataloader, and phase 2 starts from phase 1's checkpoint anyway
    local start=()
    [[ -z $INIT_CHECKPOINT ]] || start=(--finetune-from-model "$INIT_CHECKPOINT")
    if [[ $PHASE2_SHARE == 0 ]]; then
        pretrain_phase "$TOKENS_PER_SAMPLE" "$BATCH_PER_DEVICE" "$UPDATE_FREQ" "$UPDATES" "${start[@]}" "$@"
    else
        local phase1=$PHASE1_UPDATES  # of MAX_UPDATE (bio_lm's distillation, the one to pass UPDATES, has one phase)
        if [[ ! -f $PRETRAIN/phase1.finished ]]; then
            echo "phase 1: updates 1-$phase1 at $TOKENS_PER_SAMPLE tokens" >&2
            pretrain_phase "$TOKENS_PER_SAMPLE" "$BATCH_PER_DEVICE" "$UPDATE_FREQ" "$phase1" "${start[@]}" "$@"
            date -Is >"$PRETRAIN/phase1.finished"
        fi
        echo "phase 2: updates $((phase1 + 1))-$UPDATES at $PHASE2_TOKENS_PER_SAMPLE tokens, $PHASE2_SEQUENCES_PER_UPDATE sequences per update; optimizer and learning-rate schedule continue" >&2
        # the shards from the one after phase 1's; --reset-dataloader on phase 2's first launch only (a rerun resumes it)
        local phase2
        mapfile -t phase2 < <("$PYTHON" -m biofairseq.recipe.pretraining_state phase2 "$PRETRAIN" "$DATA_BIN" "$phase1")
        (( ${#phase2[@]} )) || die "$PRETRAIN/checkpoints/checkpoint_last.pt: phase 1's checkpoint could not be read (see above); FORCE=1 pretrains again"
        DATA_PATH=${phase2[0]} pretrain_phase "$PHASE2_TOKENS_PER_SAMPLE" "$PHASE2_BATCH_PER_DEVICE" "$PHASE2_UPDATE_FREQ" \
            "$UPDATES" "$@" "${phase2[@]:1}"
    fi
    date -Is >"$PRETRAIN/finished"
}

# ---- 5. the checkpoint to keep, and is it clearly better than word frequencies? (one process: importing fairseq is
# most of the time of either step)

recipe_pick() {
    if stage 5 "pick the checkpoint ($KEEP), check it against word frequencies and for a collapsed last layer" \
        "$PRETRAIN/check.json"; then
        local pick_args=("$PRETRAIN/checkpoints" "$PRETRAIN/train.log" --keep "$KEEP" --output "$PRETRAIN/best.json"
            --check "$DATA_BIN" --check-output "$PRETRAIN/check.json") status=0
        [[ $WEAK_PRETRAINING == continue ]] && pick_args+=(--go-on)
        run "$PYTHON" -m biofairseq.recipe.best_checkpoint "${pick_args[@]}" || status=$?
        if (( status == 3 )); then
            rm -f "$PRETRAIN/check.json"  # so that a rerun checks again (or goes on with WEAK_PRETRAINING=continue)
            die "stopped before fine-tuning (see the line above and $PRETRAIN/best.json); WEAK_PRETRAINING=continue goes on anyway"
        fi
        (( status == 0 )) || die "the checkpoint could not be picked or checked (see the line above)"
    fi
}

# ---- 6, 6b. transformers (parity-checked), and a randomly initialised twin

recipe_convert() {  # recipe_convert [FLAG...]: the kept checkpoint in transformers; FLAGs go to biofairseq-convert
    if stage 6 "convert ${MODEL_NAME:+$MODEL_NAME }to transformers" "$HF_MODEL"; then
        run biofairseq-convert to-hf "$(kept_checkpoint)" "$HF_MODEL" --language "$CORPUS_LANG" "$@"
    fi
    MODELS+=("$HF_MODEL")
    [[ -z $MODEL_NAME ]] || PRETRAINED+=(--pretrain "$MODEL_NAME=$PRETRAIN")  # the report's models, in this order
}

recipe_baseline() {  # BASELINE: random-init (a randomly initialised copy of the model converted last) and/or original
    # (INIT_FROM's model as it was given, before the continued pretraining), each fine-tuned beside it
    if [[ " $BASELINE " == *" random-init "* ]]; then
        if stage 6b "a randomly initialised copy of $(basename "$HF_MODEL"), as a baseline" "$RUN_DIR/hf/random_init"; then
            run "$PYTHON" -m biofairseq.recipe.random_init "$HF_MODEL" "$RUN_DIR/hf/random_init"
        fi
        MODELS+=("$RUN_DIR/hf/random_init")
    fi
    if [[ " $BASELINE " == *" original "* ]]; then
        if stage 6c "INIT_FROM's model as it was given, as a baseline" "$RUN_DIR/hf/original"; then
            if [[ $INIT_FROM == *.pt ]]; then
                run biofairseq-convert to-hf "$INIT_FROM" "$RUN_DIR/hf/original" "${INIT_TO_HF_ARGS[@]}"
            else
                run ln -s "$INIT_FROM" "$RUN_DIR/hf/original"  # fine-tuned as the folder holds it
            fi
        fi
        MODELS+=("$RUN_DIR/hf/original")
    fi
}

kept_checkpoint() {  # kept_checkpoint [PRETRAIN_DIR]: the checkpoint its best.json names (default: the current model's)
    "$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['checkpoint'])" "${1:-$PRETRAIN}/best.json"
}

# ---- 7. NER: the learning-rate x seed sweep, per data set and model

recipe_ner() {
    # NER_LABELLINGS (BioMegatron's comparison): "whole-word sub-token" fine-tunes each model both ways, in sweeps
    # model=NAME,labels=whole-word and model=NAME,labels=sub-token; empty: the default (whole-word), in model=NAME
    # NER_ARGS: the sweep's flags from the settings (biofairseq/recipe/commands.py), one GPU per run as in the papers
    # (NER_GPU=0,1,2,3: the runs spread over them, one a GPU)
    local i name train dev test model labelling sweep_dir ner_args
    REPORT_ARGS=()
    for i in "${!NER_NAMES[@]}"; do
        name=${NER_NAMES[$i]} train=${NER_TRAIN[$i]} dev=${NER_DEV[$i]} test=${NER_TEST[$i]}
        for model in "${MODELS[@]}"; do
            for labelling in ${NER_LABELLINGS:-default}; do
                sweep_dir=$NER_DIR/$name/model=$(basename "$model")
                [[ $labelling == default ]] || sweep_dir+=",labels=$labelling"
                REPORT_ARGS+=(--ner "$name=$sweep_dir")
                # a sweep of another model (pretrained again since), one whose report was cut short, or one of
                # another grid (NER_LRS, NER_SEEDS grown or shrunk) runs again, keeping its finished runs
                "$PYTHON" -m biofairseq.finetune.fingerprint check-sweep "$sweep_dir" "$model" "$NER_LRS" "$NER_SEEDS"
                stage 7 "fine-tune $(basename "$model") on $name${NER_LABELLINGS:+, $labelling labelling}" "$sweep_dir" \
                    "$sweep_dir/report.json" || continue
                ner_args=(--model "$model" --train "$train" --dev "$dev" ${test:+--test "$test"} --output-dir "$sweep_dir"
                    "${NER_ARGS[@]}")
                case $labelling in
                whole-word) ner_args+=(--label-scheme first-subtoken) ;;
                sub-token) ner_args+=(--label-scheme all-subtokens) ;;
                esac
                # shellcheck disable=SC2086  # NER_EXTRA holds several flags
                run biofairseq-ner sweep "${ner_args[@]}" $NER_EXTRA
            done
        done
    done
}

recipe_finish() {  # recipe_finish [CONVERT_FLAG...]: stages 5-8 of a recipe with one model: the checkpoint kept and
    # checked, transformers (FLAGs go to biofairseq-convert), its random-init twin, NER, the report
    recipe_pick
    recipe_convert "$@"
    recipe_baseline
    recipe_ner
    recipe_report
}

# ---- 8. the report: corpus, vocabulary, pretraining and the NER tables (Markdown, JSON, plot)

recipe_report() {
    (( RAN == 0 )) || rm -f "$RUN_DIR/report.md"  # a stage ran: the report is out of date
    if stage 8 "write the report" "$RUN_DIR/report.md"; then
        local name data_bins=()
        for name in "${VOCAB_NAMES[@]}"; do data_bins+=(--data-bin "$name=$RUN_DIR/data-bin/$name"); done
        run "$PYTHON" -m biofairseq.recipe.report "$RUN_DIR" "${data_bins[@]}" "${BREAKOUT_ARGS[@]}" "${PRETRAINED[@]}" \
            "${REPORT_ARGS[@]}"
    fi
    cat "$RUN_DIR/report.md"
    echo "$RECIPE.sh: done [$(elapsed)]; the report is $RUN_DIR/report.md (and .json, .png)" >&2
}
