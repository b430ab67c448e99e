# The functions every recipe's script starts with (biofairseq.recipe.plan renders the script and copies these into
# it): printing, skipping and resuming, interrupts. The script sets RECIPE (the recipe's name) and FORCE first.

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

elapsed() { printf '%d:%02d elapsed' $((SECONDS / 60)) $((SECONDS % 60)); }
say() { echo "${1//\[elapsed\]/[$(elapsed)]}" >&2; }

# A stage runs (stage returns 0) unless its DONE file exists. A command of it that fails leaves DONE (a marker such as
# pretraining_check's check.json) behind it removed, so that a rerun runs the stage again.
RAN=0 STAGE_OUTPUT= STAGE_DONE=
stage() {  # stage NUMBER TITLE OUTPUT [DONE]
    STAGE_OUTPUT=$3 STAGE_DONE=${4:-$3}
    STAGE_NOW="$1 ($2)"
    echo >&2
    echo "==== $1 $2 -> $STAGE_OUTPUT  [$(elapsed)]" >&2
    if [[ -e $STAGE_DONE ]]; then  # (FORCE removed the outputs of the stages it redoes before the first stage)
        echo "skipped: $STAGE_DONE exists (FORCE=1 redoes every stage, FORCE=STAGE from that stage on)" >&2
        return 1
    fi
    # a stage killed outright (SIGKILL) left its tools' temporaries beside its output, which no trap removed: the
    # .NAME.XXXXXXXX of preprocess/train_vocab.py, and the .NAME.tmp-PID of biofairseq.atomic (conversion, the random-init
    # twin, JSON files, reports); the stage starts again without them
    local leftover output=$STAGE_OUTPUT
    for leftover in "${output%/*}"/.*.tmp-* "${output%/*}/.${output##*/}".*; do
        if [[ -e $leftover ]]; then echo "removed $leftover, a temporary of an interrupted run" >&2; rm -rf "$leftover"; fi
    done
    RAN=1
}

run() {  # prints a command so that it can be pasted into a shell, then runs it (stdout is for the report alone)
    echo "+ $(printf '%q ' "$@")" >&2
    local status=0
    "$@" >&2 || status=$?
    if (( status )); then
        [[ $STAGE_DONE == "$STAGE_OUTPUT" ]] || rm -f "$STAGE_DONE"
        exit $status
    fi
}
