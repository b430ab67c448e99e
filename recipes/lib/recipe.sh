# What every recipes/*.sh runs after it sets RECIPE (the recipe's name): the settings step (biofairseq/recipe/settings.py:
# every setting merged with the environment and checked, recipe.env kept: docs/recipes.md) renders the run as one bash
# script, RUN_DIR/run.sh (the stages: biofairseq/recipe/recipes.py), which then runs as it is. Under
# STOP_AFTER=settings the step prints that script on stdout instead, and nothing runs.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)  # the clone: the preprocess/ scripts and the user dir
PYTHON=${PYTHON:-python}

recipe_run() {
    local tool script
    for tool in "$PYTHON" biofairseq-train fairseq-preprocess biofairseq-convert biofairseq-ner; do
        command -v "$tool" >/dev/null || {
            echo "$RECIPE.sh: error: $tool: not found; run 'make install' and 'source .venv/bin/activate' (or 'make demo'), then run this again" >&2
            exit 1
        }
    done
    # the script's path, or under STOP_AFTER=settings the script itself (which starts with #!)
    script=$("$PYTHON" -m biofairseq.recipe render "$RECIPE" "$0" "$REPO") || exit  # the step said what is wrong
    case $script in
    '#!'*) printf '%s\n' "$script" ;;
    *) exec bash "$script" ;;
    esac
}
