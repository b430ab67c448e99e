"""recipe.env: what a run's first settings step records, and what a rerun compares with it (a changed setting of a
stage that has outputs stops the rerun, others are taken and listed in recipe.changes, which the report reads)."""

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional, Union

from biofairseq.atomic import write_text
from biofairseq.recipe.table import FORCED, GRID, SETTINGS, STAGES, SettingsError, path_pairs, redone, same

PathLike = Union[str, Path]


def absolute(path: str) -> str:
    """A path made absolute as the shell's cd && pwd would (links kept), for recipe.env."""
    path = path.rstrip("/") or "/"
    return os.path.join(os.path.abspath(os.path.dirname(path) or "."), os.path.basename(path))


def absolute_pairs(value: str) -> str:
    """NAME=PATH ... with each PATH absolute, so that a rerun from another folder means the same files; a path that
    would then hold a space (the recipes split the pairs at spaces) is kept as given."""
    pairs = []
    for name, path in path_pairs(value):
        whole = absolute(os.path.expanduser(path))
        pairs.append(f"{name}={path if any(c.isspace() for c in whole) else whole}")
    return " ".join(pairs)


# ---- recipe.env: written on the first run, compared with on the next


def recorded(recipe: str, values: dict) -> dict:
    """What recipe.env records: RECIPE, then every recorded setting in the list's order."""
    return {"RECIPE": recipe, **{s.name: values[s.name] for s in SETTINGS if s.recorded and s.name in values}}


def _env_text(settings):
    return "".join(f"{name}={value}\n" for name, value in settings.items())


def read(run_dir: PathLike) -> dict:
    """The settings recipe.env records, by name (the report's source)."""
    path = Path(run_dir) / "recipe.env"
    if not path.is_file():
        raise SettingsError(f"{path}: missing; run the recipe (recipes/*.sh) into this folder first")
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines() if "=" in line)


def produced(run_dir: PathLike, stage: str) -> Optional[Path]:
    """The first output of a stage in run_dir, or None."""
    for pattern in STAGES[stage][2]:
        found = next(iter(sorted(Path(run_dir).glob(pattern))), None)
        if found is not None:
            return found
    return None


def keep_recipe_env(recipe: str, values: dict, run_dir: PathLike,
                    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> str:
    """recipe.env: written on the first run (or with FORCE=1); on a rerun, a changed setting of a stage that has
    outputs stops the recipe (SettingsError, naming every such setting) unless FORCE redoes that stage; the others are
    taken, recipe.env rewritten and each change added to recipe.changes, which the report lists. STOP_AFTER=settings
    compares the same way and writes nothing. Returns recipe.env's text."""
    now, dry, force = recorded(recipe, values), values["STOP_AFTER"] == "settings", values["FORCE"]
    path, changes = Path(run_dir) / "recipe.env", Path(run_dir) / "recipe.changes"
    changed = []
    forced = redone(force)
    if "clean" not in forced and path.is_file():
        before = read(run_dir)
        # a setting the first run did not record (an older version) takes today's value
        changed = [s for s in SETTINGS if s.name in now and s.recorded and s.name in before
                   and not same(before[s.name], now[s.name], s.name)]
        order = list(FORCED)
        conflicts = [(s, produced(run_dir, s.stage)) for s in sorted((s for s in changed if s.stage and s.stage not in forced),
                                                                     key=lambda s: order.index(s.stage))]
        conflicts = [(s, output) for s, output in conflicts if output is not None]
        if conflicts:
            (first, output), others = conflicts[0], [s for s, _ in conflicts[1:]]
            number, title, _ = STAGES[first.stage]
            also = "".join(f"; {s.name}={now[s.name]} too, was {before[s.name]}" for s in others)
            old = " ".join(f"{s.name}={before[s.name]}" for s, _ in conflicts)
            raise SettingsError(
                f"{first.name}={now[first.name]}, but stage {number} ({title}) already made {output} with "
                f"{first.name}={before[first.name]}{also}; give {old} to go on, FORCE={first.stage} to redo from "
                f"stage {number} on, or a new RUN_DIR")
        for s in changed:
            why = ("its stage is redone (FORCE)" if s.stage in forced else "no stage made with it has run yet" if s.stage
                   else "the sweep keeps its finished runs, runs the missing ones and reports those asked for"
                   if s.name in GRID else "taken")
            say(f"note: {s.name}={now[s.name]} (was {before[s.name]}): {why}; "
                f"{'would be ' if dry else ''}recorded in {changes}")
    text = _env_text(now)
    if dry:
        return text
    if "clean" in forced or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
        changes.unlink(missing_ok=True)
    elif changed:
        when = datetime.now().astimezone().isoformat(timespec="seconds")
        history = changes.read_text(encoding="utf-8") if changes.is_file() else ""
        write_text(changes, history + "".join(f"{when}\t{s.name}\t{before[s.name]}\t{now[s.name]}\n" for s in changed))
        write_text(path, text)
    return text


def changes_of(run_dir: PathLike) -> list:
    """(when, name, before, after) of each setting changed between runs into run_dir, oldest first."""
    path = Path(run_dir) / "recipe.changes"
    if not path.is_file():
        return []
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line.count("\t") == 3]
