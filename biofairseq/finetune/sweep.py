"""The learning-rate x seed grid of the bsc-bio-es paper, one run folder per configuration, resumable.

A configuration whose folder holds ``metrics.json`` of the same model (``model_sha256``, a hash of its
weights) is finished and is not run again; one of another model is redone; an interrupted one resumes from
its last checkpoint. The sweep folder records the model in ``model.sha256``.
"""

import json
from dataclasses import replace
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.finetune import training
from biofairseq.finetune.fingerprint import model_fingerprint

PAPER_LRS = (8e-6, 1e-5, 2e-5, 3e-5, 5e-5)
PAPER_SEEDS = (1, 2, 3)


def run_folder(root, lr, seed):
    return Path(root) / f"lr={lr:g}" / f"seed={seed}"


def runs(root):
    """The run folders of a sweep folder (lr=X/seed=Y), finished or not; none for any other folder."""
    return sorted(p for p in Path(root).glob("lr=*/seed=*") if p.is_dir())


def which_model(root, folders):
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


def sweep(model_dir, train_path, dev_path, test_path, root, options, lrs=PAPER_LRS, seeds=PAPER_SEEDS, log=print,
          warn=training.stderr, card=None):
    """Runs every (lr, seed) not yet finished; returns the run folders in grid order. The data's warnings are said
    once, not once a run."""
    folders = []
    training.check_output_dir(root)
    for lr in lrs:  # the runs' own check would come only after the grid's first runs
        training.check_options(replace(options, lr=lr))
    fingerprint = model_fingerprint(training.resolve_model(str(model_dir)))
    said = set()

    def warn_once(line):
        if line not in said:
            said.add(line)
            warn(line)

    # the data too, before the first run starts: a wrong path is one line, not a line after the first run's
    paths = {"train": train_path, "dev": dev_path, **({"test": test_path} if test_path else {})}
    sets = {name: training.read_annotated(path, {"train": "training"}.get(name, name), warn_once) for name, path in paths.items()}
    training.unseen_types(sets, paths, options.allow_unseen_types, warn_once)

    # 1e-3 and 0.001 are one setting: one folder (lr=0.001), run once
    grid = list({(f"{lr:g}", seed): (lr, seed) for lr in lrs for seed in seeds}.values())
    for n, (lr, seed) in enumerate(grid, 1):
        folder = run_folder(root, lr, seed)
        folders.append(folder)
        finished = folder / "metrics.json"
        redo = False
        if finished.is_file():
            if json.loads(finished.read_text()).get("model_sha256") == fingerprint:
                log(f"[{n}/{len(grid)}] {folder}: finished earlier, skipped")
                continue
            log(f"[{n}/{len(grid)}] {folder}: finished with another model than {model_dir}; redone")
            redo = True
        else:
            log(f"[{n}/{len(grid)}] {folder}")
        training.train(model_dir, train_path, dev_path, test_path, folder, replace(options, lr=lr, seed=seed),
                       overwrite=redo, log=lambda message: log(f"  {message}"), warn=warn_once, card=card)
    write_text(Path(root) / "model.sha256", fingerprint + "\n")
    return folders
