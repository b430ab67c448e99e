"""The one step every recipe runs before any work: the settings merged and checked (biofairseq.recipe.table), its
inputs checked (biofairseq.recipe.inputs), the devices found (biofairseq.recipe.hardware), ``recipe.env`` kept
(biofairseq.recipe.record); the recipe evals what it prints.

    python -m biofairseq.recipe.settings resolve RECIPE SCRIPT REPO   shell assignments of every setting, or one line
    python -m biofairseq.recipe.settings names RECIPE                 the settings the recipe takes
    python -m biofairseq.recipe.settings docs                         docs/recipes.md's tables of the settings
"""

import os
import shlex
import sys
from pathlib import Path

from biofairseq.corpus.checks import source_problem
from biofairseq.recipe.commands import ner_sweep_args
from biofairseq.recipe.hardware import devices, preview
from biofairseq.recipe.inputs import (init_from_problem, init_vocabulary_problem, init_weights_problem, ner_data,
                                      notes_read_as_paragraphs, source_language_problem, valid_docs_problem)
from biofairseq.recipe.presets import RECIPES
from biofairseq.recipe.record import absolute, absolute_pairs, keep
from biofairseq.recipe.table import FORCED, NAMED_PATHS, SettingsError, Values, docs, merge, names, redone


def resolve(recipe, environ, repo, script="recipe"):
    """Every setting of the recipe, checked, as {name: value} (merge), then what its inputs hold: each source's
    documents and language, INIT_FROM's model."""
    values = merge(recipe, environ, repo, script)
    own, r = names(recipe), RECIPES[recipe]
    if "SOURCES" in own:  # what each source holds, as the cleaning will read it: text, not NER columns or a PDF
        for pair in values["SOURCES"].split():
            problem = source_problem(*pair.split("=", 1), values["TEXT_DOCS"], values["TEXT_FIELD"], recipe=True)
            if problem:
                raise SettingsError(problem)
            problem = source_language_problem(pair, values, given="SOURCES" in environ)
            if problem:
                raise SettingsError(problem)
        if "INIT_FROM" in own and values["INIT_FROM"]:
            problem = (init_from_problem(recipe, values, environ) or init_vocabulary_problem(values)
                       or init_weights_problem(values))
            if problem:
                raise SettingsError(problem)
    return {name: values[name] for name in ["RECIPE", *own, *r.fixed]}




# ---- the recipe's one step


def shell(recipe, environ, repo, script, say=lambda line: print(line, file=sys.stderr)):
    """The settings resolved, checked and kept, as the bash the recipe evals: NAME=value and NAME=(...) lines, and
    under STOP_AFTER=settings, recipe.env printed and an exit."""
    values = resolve(recipe, environ, repo, script)
    for line in notes_read_as_paragraphs(values) if "SOURCES" in values and "TEXT_DOCS" not in environ else ():
        say(line)
    unused = [name for name in ("CORPUS_SLURM_PARTITION", "CORPUS_SLURM_TIME", "CORPUS_SLURM_MEM_GB") if environ.get(name)]
    if unused and values.get("CORPUS_LAUNCHER") == "local":
        one = len(unused) == 1
        say(f"note: {' and '.join(unused)} {'is' if one else 'are'} for the corpus stages' job arrays, which "
            f"CORPUS_LAUNCHER=local does not make; set CORPUS_LAUNCHER=slurm to use {'it' if one else 'them'}")
    computed = devices(values, environ)
    r = RECIPES[recipe]
    view = Values(recipe, {**values, "REPO": str(repo)})
    computed.update({name: derived.compute(view) for name, derived in r.computed.items()})
    problem = valid_docs_problem(values) if "VALID_DOCS" in values else None  # after the cheaper checks
    if problem:
        raise SettingsError(problem)
    arrays = ner_data(values, say, given="NER_DATA" in environ)
    if values["INIT_FROM"]:
        values["INIT_FROM"] = absolute(values["INIT_FROM"])
    for name in (n for n in NAMED_PATHS if n in values):  # as recorded, and compared with a rerun's (keep)
        values[name] = absolute_pairs(values[name])
    text = keep(recipe, values, values["RUN_DIR"], say)
    lines = [f"{name}={shlex.quote(value)}" for name, value in {**values, **computed}.items() if name != "RECIPE"]
    if "NER_LRS" in values:
        arrays["NER_ARGS"] = ner_sweep_args({**values, **computed})
    arrays["FORCE_REMOVE"] = [output for stage in redone(values["FORCE"]) for output in FORCED[stage]]
    removed = [str(Path(values["RUN_DIR"]) / o) for o in arrays["FORCE_REMOVE"] if (Path(values["RUN_DIR"]) / o).exists()]
    if removed:
        say(f"note: FORCE={values['FORCE']} {'would remove' if values['STOP_AFTER'] == 'settings' else 'removes'} "
            f"{', '.join(removed)} before the first stage")
    lines += [f"{name}=({' '.join(map(shlex.quote, items))})" for name, items in arrays.items()]
    if values["STOP_AFTER"] == "settings":
        for line in preview(values, computed, environ):
            say(line)
        say(f"{recipe}.sh: STOP_AFTER=settings: stopped before any work")
        lines += [f"printf %s {shlex.quote(text)}", "exit 0"]
    return "".join(line + "\n" for line in lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["docs"]:
        sys.stdout.write(docs())
        return
    if len(argv) < 2 or argv[0] not in ("names", "resolve") or (argv[0] == "resolve" and len(argv) != 4):
        sys.exit(__doc__)
    verb, recipe = argv[0], argv[1]
    try:
        if verb == "names":
            print("\n".join(names(recipe)))
            return
        sys.stdout.write(shell(recipe, dict(os.environ), argv[3], argv[2]))
    except SettingsError as e:
        sys.exit(f"{recipe}.sh: error: {e}")


if __name__ == "__main__":
    main()
