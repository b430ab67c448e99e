"""The layout of a sweep's output folder, a run folder per configuration (lr=X/seed=Y): read by the sweep that writes
it and by the commands that are given one in place of a model."""

import json
from collections.abc import Sequence
from pathlib import Path

from biofairseq.atomic import write_text


def run_folder(root: str | Path, lr: float, seed: int) -> Path:
    return Path(root) / f"lr={lr:g}" / f"seed={seed}"


GRID = "grid.json"  # the runs a sweep was last asked for (lr=X/seed=Y), which its report holds


def grid(lrs: Sequence[float | str], seeds: Sequence[int | str]) -> list[str]:
    """The run folders' names of a sweep's grid, in order, once each (1e-3 and 0.001 are one learning rate)."""
    return list(dict.fromkeys(str(run_folder("", float(lr), int(seed))) for lr in lrs for seed in seeds))


def write_grid(root: str | Path, names: list[str]) -> None:
    write_text(Path(root) / GRID, json.dumps(names) + "\n")


def asked(root: str | Path) -> list[Path] | None:
    """The run folders a sweep folder was last asked for, or None (a run folder, or a sweep of an older version)."""
    try:
        return [Path(root) / name for name in json.loads((Path(root) / GRID).read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        return None


def runs(root: str | Path) -> list[Path]:
    """The run folders of a sweep folder (lr=X/seed=Y), finished or not; none for any other folder."""
    return sorted(p for p in Path(root).glob("lr=*/seed=*") if p.is_dir())


def which_model(root: str | Path, folders: Sequence[Path]) -> str:
    """How to pick one model of a sweep (``--model`` wants one): the best-on-dev run's, as the sweep's report.json
    names it, else the runs that saved one."""
    models = [f / "model" for f in folders if (f / "model" / "config.json").is_file()]
    if not models:
        return ("its runs saved no model (swept with --no-save-model, or unfinished); train the configuration you want "
                "with biofairseq-ner train, without --no-save-model, and give its folder")
    try:
        summaries = json.loads((Path(root) / "report.json").read_text(encoding="utf-8"))
        best = summaries[0]["best_on_dev"] if len(summaries) == 1 else None
        best = run_folder(root, best["lr"], best["seed"]) / "model" if best else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):  # no report yet, or not one a sweep wrote
        best = None
    if best in models:
        return f"give one run's model, as the best on dev (its report.json): {best}"
    shown = ", ".join(map(str, models[:3])) + (f", ... ({len(models)} in all)" if len(models) > 3 else "")
    return f"give one run's model: {shown} (biofairseq-ner report {root} names the best on dev)"
