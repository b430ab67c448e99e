"""The learning-rate x seed grid of the bsc-bio-es paper, one run folder per configuration, resumable.

A configuration whose folder holds ``metrics.json`` is finished and is not run again; an interrupted one
resumes from its last checkpoint.
"""

from dataclasses import replace
from pathlib import Path

from biofairseq.finetune import training

PAPER_LRS = (8e-6, 1e-5, 2e-5, 3e-5, 5e-5)
PAPER_SEEDS = (1, 2, 3)


def run_folder(root, lr, seed):
    return Path(root) / f"lr={lr:g}" / f"seed={seed}"


def sweep(model_dir, train_path, dev_path, test_path, root, options, lrs=PAPER_LRS, seeds=PAPER_SEEDS, log=print):
    """Runs every (lr, seed) not yet finished; returns the run folders in grid order."""
    folders = []
    grid = [(lr, seed) for lr in lrs for seed in seeds]
    for n, (lr, seed) in enumerate(grid, 1):
        folder = run_folder(root, lr, seed)
        folders.append(folder)
        if (folder / "metrics.json").is_file():
            log(f"[{n}/{len(grid)}] {folder}: finished earlier, skipped")
            continue
        log(f"[{n}/{len(grid)}] {folder}")
        training.train(model_dir, train_path, dev_path, test_path, folder, replace(options, lr=lr, seed=seed),
                       log=lambda message: log(f"  {message}"))
    return folders
