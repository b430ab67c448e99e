"""The learning-rate x seed grid of the bsc-bio-es paper, one run folder per configuration, resumable.

A configuration whose folder holds ``metrics.json`` of the same model (``model_sha256``, a hash of its
weights) is finished and is not run again; one of another model is redone; an interrupted one resumes from
its last checkpoint. The sweep folder records the model in ``model.sha256`` and the runs asked for in ``grid.json``:
its report holds those, so a grid grown or shrunk on a rerun reuses the finished runs and reports what it asks.
"""

import json
from dataclasses import replace
from pathlib import Path

from biofairseq.atomic import write_text
from biofairseq.finetune import training
from biofairseq.finetune.fingerprint import model_fingerprint
from biofairseq.finetune.sweep_folder import grid, run_folder, write_grid

PAPER_LRS = (8e-6, 1e-5, 2e-5, 3e-5, 5e-5)
PAPER_SEEDS = (1, 2, 3)


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

    # 1e-3 and 0.001 are one setting: one folder (lr=0.001), run once; the report holds these runs alone (a grid
    # shrunk since an earlier sweep leaves that sweep's other runs on disk, out of the report)
    configurations = {run_folder(root, lr, seed): (lr, seed) for lr in lrs for seed in seeds}
    for n, (folder, (lr, seed)) in enumerate(configurations.items(), 1):
        folders.append(folder)
        finished = folder / "metrics.json"
        redo = False
        if finished.is_file():
            if json.loads(finished.read_text()).get("model_sha256") == fingerprint:
                log(f"[{n}/{len(configurations)}] {folder}: finished earlier, skipped")
                continue
            log(f"[{n}/{len(configurations)}] {folder}: finished with another model than {model_dir}; redone")
            redo = True
        else:
            log(f"[{n}/{len(configurations)}] {folder}")
        training.train(model_dir, train_path, dev_path, test_path, folder, replace(options, lr=lr, seed=seed),
                       overwrite=redo, log=lambda message: log(f"  {message}"), warn=warn_once, card=card)
    write_text(Path(root) / "model.sha256", fingerprint + "\n")
    write_grid(root, grid(lrs, seeds))
    return folders
