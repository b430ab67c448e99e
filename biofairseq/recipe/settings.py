"""The one step every recipe runs before any work: the settings merged and checked (biofairseq.recipe.table), its
inputs checked (biofairseq.recipe.inputs), the devices found (biofairseq.recipe.hardware), ``recipe.env`` kept
(biofairseq.recipe.record); then the run rendered as one bash script (biofairseq.recipe.plan), which the recipe runs.
Its command line: biofairseq.recipe.__main__."""

import sys
from pathlib import Path
from typing import Callable, Union

from biofairseq.atomic import write_text
from biofairseq.corpus.checks import source_problem
from biofairseq.recipe.hardware import devices, preview
from biofairseq.recipe.inputs import (init_extension_problem, init_from_problem, init_vocabulary_problem,
                                      init_weights_problem, ner_data, notes_read_as_paragraphs, source_language_problem,
                                      valid_docs_problem)
from biofairseq.recipe.plan import Plan, Run
from biofairseq.recipe.presets import CONTINUATION_CEILINGS, RECIPES, continuation
from biofairseq.recipe.recipes import BUILDERS
from biofairseq.recipe.record import absolute, absolute_pairs, keep_recipe_env
from biofairseq.recipe.table import FORCED, NAMED_PATHS, SettingsError, Values, merge, names, redone

Say = Callable[[str], None]  # where a line for the user goes
PathLike = Union[str, Path]


def resolve(recipe: str, environ: dict, repo: PathLike, script: str = "recipe") -> dict:
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
            given = {name: value for name, value in environ.items() if name in own}
            problem = (init_from_problem(recipe, values, given) or init_vocabulary_problem(values)
                       or init_weights_problem(values) or init_extension_problem(values))
            if problem:
                raise SettingsError(problem)
    return {name: values[name] for name in ["RECIPE", *own, *r.fixed]}


# ---- the recipe's one step


def prepare(recipe: str, environ: dict, repo: PathLike, script: str, say: Say = lambda line: print(line, file=sys.stderr),
            python: str = "python") -> tuple:
    """The settings resolved, checked and kept (recipe.env; under STOP_AFTER=settings compared, not written), as a
    Run for biofairseq.recipe.plan, with recipe.env's text."""
    values = resolve(recipe, environ, repo, script)
    for line in continuation_notes(recipe, values, environ):
        say(line)
    for line in notes_read_as_paragraphs(values) if "SOURCES" in values and "TEXT_DOCS" not in environ else ():
        say(line)
    unused = [name for name in ("CORPUS_SLURM_PARTITION", "CORPUS_SLURM_TIME", "CORPUS_SLURM_MEM_GB") if environ.get(name)]
    if unused and values.get("CORPUS_LAUNCHER") == "local":
        one = len(unused) == 1
        say(f"note: {' and '.join(unused)} {'is' if one else 'are'} for the corpus stages' job arrays, which "
            f"CORPUS_LAUNCHER=local does not make; set CORPUS_LAUNCHER=slurm to use {'it' if one else 'them'}")
    computed = devices(values, environ.get("PATH"), bool(environ.get("SLURM_JOB_ID")))
    r = RECIPES[recipe]
    view = Values(recipe, {**values, "REPO": str(repo)})
    computed.update({name: derived.compute(view) for name, derived in r.computed.items()})
    problem = valid_docs_problem(values) if "VALID_DOCS" in values else None  # after the cheaper checks
    if problem:
        raise SettingsError(problem)
    arrays = ner_data(values, say, given="NER_DATA" in environ)
    if values["INIT_FROM"]:
        values["INIT_FROM"] = absolute(values["INIT_FROM"])
    for name in (n for n in NAMED_PATHS if n in values):  # as recorded, and compared with a rerun's (keep_recipe_env)
        values[name] = absolute_pairs(values[name])
    text = keep_recipe_env(recipe, values, values["RUN_DIR"], say)
    force = [output for stage in redone(values["FORCE"]) for output in FORCED[stage]]
    removed = [str(Path(values["RUN_DIR"]) / o) for o in force if (Path(values["RUN_DIR"]) / o).exists()]
    if removed:
        say(f"note: FORCE={values['FORCE']} {'would remove' if values['STOP_AFTER'] == 'settings' else 'removes'} "
            f"{', '.join(removed)} before the first stage")
    sets = list(zip(arrays["NER_NAMES"], arrays["NER_TRAIN"], arrays["NER_DEV"], arrays["NER_TEST"]))
    # the script's paths absolute, so that it means the same files wherever it is run from
    run = Run(recipe, {**values, **computed, "REPO": str(repo), "RUN_DIR": absolute(values["RUN_DIR"])}, sets, force,
              python)
    return run, text


def continuation_notes(recipe: str, values: dict, environ: dict) -> list:
    """With INIT_FROM: which values are the continuation's (those not given), and a note for a given one far outside
    what a continuation takes."""
    if not values.get("INIT_FROM") or "CONTINUE_EPOCHS" not in values:
        return []
    own = continuation(recipe)
    taken = [f"{name}={values[name] or '(empty)'}" for name in own if name in values and name not in environ]
    lines = [f"INIT_FROM: a continuation's values where none is given ({', '.join(taken)}); their sources: "
             "docs/recipes.md"] if taken else []
    for name, (ceiling, note) in CONTINUATION_CEILINGS.items():
        if name in environ and name in values and any(float(x) > ceiling for x in values[name].split(",")):
            lines.append(f"note: {name}={values[name]} {note}; unset {name} for the continuation's")
    return lines


def header(run: Run, previewed: list) -> list:
    """The script's opening comments: what it is, how to run it, and what the settings step said of the devices (its
    notes included)."""
    return [f"{run.recipe}.sh, PRESET={run.values['PRESET']}: the run, every stage's command for these settings.",
            "The recipe runs it as it is; STOP_AFTER=settings prints it. Run it with bash and the clone's environment",
            "active (inside the allocation, for a cluster run), or edit it first. A stage whose output exists is",
            "skipped, and each command resumes what it finds.", "", *previewed, ""]


def plan(recipe: str, environ: dict, repo: PathLike, script: str, say: Say = lambda line: print(line, file=sys.stderr)) -> str:
    """The run as one bash script (its text). Under STOP_AFTER=settings, the script of every stage (a run with
    STOP_AFTER unset), the devices said on stderr, and nothing written."""
    return rendered(recipe, environ, repo, script, say)[1]


def rendered(recipe: str, environ: dict, repo: PathLike, script: str, say: Say) -> tuple:
    """The Run and its script."""
    run, text = prepare(recipe, environ, repo, script, say, environ.get("PYTHON", "python"))
    v, previewing = run.values, run.values["STOP_AFTER"] == "settings"
    built = Plan(run, stop_after="none" if previewing else None)  # a preview shows every stage
    built.script.say(f"{recipe}.sh: PRESET={v['PRESET']} RUN_DIR={v['RUN_DIR']}; {v['NUM_GPUS']} GPU(s) x {v['NUM_NODES']} "
              f"machine(s), update frequency {v['UPDATE_FREQ']}")
    BUILDERS[recipe](built)
    previewed = preview(v, "WORKERS" in environ, bool(environ.get("SLURM_JOB_ID")))
    if previewing:
        for line in previewed:
            say(line)
        say("the run: on stdout, as a bash script (STOP_AFTER=settings bash ... >run.sh keeps it)")
        say(f"{recipe}.sh: STOP_AFTER=settings: stopped before any work")
    return run, built.render(header(run, previewed), text)


def render(recipe: str, environ: dict, repo: PathLike, script: str, say: Say = lambda line: print(line, file=sys.stderr)) -> str:
    """What recipes/lib/recipe.sh runs: the path of RUN_DIR/run.sh, written; under STOP_AFTER=settings, the script
    itself (written nowhere)."""
    run, text = rendered(recipe, environ, repo, script, say)
    if run.values["STOP_AFTER"] == "settings":
        return text
    path = Path(run.values["RUN_DIR"]).absolute() / "run.sh"
    write_text(path, text)
    return str(path)

