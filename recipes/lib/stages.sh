# The stage machinery every recipe shares: printing, skipping and resuming, FORCE, interrupts. Sourced by
# recipes/*.sh after they set RECIPE (the recipe's name); it sets REPO, the clone. recipe_run asks
# biofairseq/recipe/settings.py for the run (every setting merged with the environment, checked, kept in
# RUN_DIR/recipe.env: docs/recipes.md) and gets every stage's finished commands (biofairseq/recipe/plan.py, the
# recipe's stages in biofairseq/recipe/recipes.py) as NUL-separated records, which it runs in order: each command
# printed so that it can be pasted into a shell, then run; a stage whose output exists skipped. STOP_AFTER=settings
# prints the same commands as a script instead. Why bash runs them: docs/development.md.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)  # the clone: the preprocess/ scripts and the user dir
PYTHON=${PYTHON:-python}

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
    if [[ -e $done ]]; then  # (FORCE removed the outputs of the stages it redoes before the first stage)
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

say() { echo "${1//\[elapsed\]/[$(elapsed)]}" >&2; }

recipe_run() {  # every stage of the recipe, as biofairseq/recipe/plan.py wrote them (its docstring lists the records)
    local tool plan at=0 kind n skip=0 output= done_marker= status
    for tool in "$PYTHON" biofairseq-train fairseq-preprocess biofairseq-convert biofairseq-ner; do
        command -v "$tool" >/dev/null || die "$tool: not found; run 'make install' and 'source .venv/bin/activate' (or 'make demo'), then run this again"
    done
    mapfile -d '' -t plan < <("$PYTHON" -m biofairseq.recipe.settings plan "$RECIPE" "$0" "$REPO")
    wait $! || exit  # the settings step said what is wrong (its status kept)
    while (( at < ${#plan[@]} )); do
        kind=${plan[at]}
        case $kind in
        say) say "${plan[at + 1]}"; at=$((at + 2)) ;;
        out) printf %s "${plan[at + 1]}"; at=$((at + 2)) ;;
        stop) [[ -z ${plan[at + 1]} ]] || say "${plan[at + 1]}"; exit 0 ;;
        remove)  # FORCE: an earlier run's output, gone before the first stage, so that a run that stops early
            # (STOP_AFTER=binarize) leaves nothing of an earlier run's later stages to be taken for this one's
            if [[ -e ${plan[at + 1]} ]]; then run rm -rf "${plan[at + 1]}"; fi
            at=$((at + 2)) ;;
        stage)
            skip=0 output=${plan[at + 3]} done_marker=${plan[at + 4]}
            stage "${plan[at + 1]}" "${plan[at + 2]}" "$output" "$done_marker" || skip=1
            at=$((at + 5)) ;;
        check | run)
            n=${plan[at + 1]}
            if [[ $kind == check ]]; then
                "${plan[@]:at + 2:n}" || die "the check before the next stage failed (see above): ${plan[*]:at + 2:n}"
            elif (( ! skip )); then
                # a stage whose command fails is not left marked finished (pretraining_check's check.json), so that
                # a rerun runs it again
                run "${plan[@]:at + 2:n}" || { status=$?; [[ $done_marker == "$output" ]] || rm -f "$done_marker"; exit $status; }
            fi
            at=$((at + 2 + n)) ;;
        note) (( skip )) || say "${plan[at + 1]}"; at=$((at + 2)) ;;
        mkdir) (( skip )) || mkdir -p "${plan[at + 1]}"; at=$((at + 2)) ;;
        write) (( skip )) || printf '%s\n' "${plan[at + 2]}" >"${plan[at + 1]}"; at=$((at + 3)) ;;
        mark) (( skip )) || date -Is >"${plan[at + 1]}"; at=$((at + 2)) ;;
        stale) (( RAN == 0 )) || rm -f "${plan[at + 1]}"; at=$((at + 2)) ;;
        show) cat "${plan[at + 1]}"; at=$((at + 2)) ;;
        *) die "unknown record '$kind' from biofairseq/recipe/plan.py" ;;
        esac
    done
}

