"""The learning-rate x seed grid of the bsc-bio-es paper, one run folder per configuration, resumable.

A configuration whose folder holds ``metrics.json`` of the same model (``model_sha256``, a hash of its
weights) is finished and is not run again; one of another model is redone; an interrupted one resumes from
its last checkpoint. The sweep folder records the model in ``model.sha256`` and the runs asked for in ``grid.json``:
its report holds those, so a grid grown or shrunk on a rerun reuses the finished runs and reports what it asks.
"""

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from biofairseq.atomic import write_text
from biofairseq.finetune import NERFormatError, training
from biofairseq.finetune.fingerprint import model_fingerprint
from biofairseq.finetune.sweep_folder import grid, run_folder, write_grid

PAPER_LRS = (8e-6, 1e-5, 2e-5, 3e-5, 5e-5)
PAPER_SEEDS = (1, 2, 3)


def sweep(model_dir: str | Path, train_path: str | Path, dev_path: str | Path, test_path: str | Path | None,
          root: str | Path, options: training.TrainOptions, lrs: Sequence[float] = PAPER_LRS,
          seeds: Sequence[int] = PAPER_SEEDS,
          log: Callable[[str], None] = print, warn: Callable[[str], None] = training.stderr,
          card: Mapping[str, str | None] | None = None, devices: Sequence[str] = ()) -> list[Path]:
    """Runs every (lr, seed) not yet finished; returns the run folders in grid order. The data's warnings are said
    once, not once a run. ``devices`` (GPU numbers): the runs spread over them, one run a device at a time, each in a
    process that sees its device alone; none: one after another here."""
    folders = []
    training.check_output_dir(root)
    for lr in lrs:  # the runs' own check would come only after the grid's first runs
        training.check_options(replace(options, lr=lr))
    devices = _physical(devices)
    fingerprint = model_fingerprint(training.resolve_model(str(model_dir)))
    said = set()

    def warn_once(line: str) -> None:
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
    pending = []
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
        if devices:
            pending.append((model_dir, train_path, dev_path, test_path, folder, replace(options, lr=lr, seed=seed), redo,
                            card, f"[{n}/{len(configurations)}] {folder}:"))
            continue
        training.train(model_dir, train_path, dev_path, test_path, folder, replace(options, lr=lr, seed=seed),
                       overwrite=redo, log=lambda message: log(f"  {message}"), warn=warn_once, card=card)
    if pending:
        _spread(pending, devices, log)
    write_text(Path(root) / "model.sha256", fingerprint + "\n")
    write_grid(root, grid(lrs, seeds))
    return folders


def _physical(devices: Sequence[str]) -> tuple[str, ...]:
    """The GPUs to pin the runs to: the numbers given, or, where CUDA_VISIBLE_DEVICES is set (a Slurm allocation sets
    the GPUs it gives), the ones it lists at those places; each one torch sees."""
    if not devices:
        return ()
    import torch

    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    seen = torch.cuda.device_count()
    for d in devices:
        if (visible and int(d) >= len(visible)) or (seen and int(d) >= seen):
            raise NERFormatError(f"--devices {','.join(devices)}: {d} is not one of the {len(visible) or seen} GPUs this "
                                 f"process sees (0 to {(len(visible) or seen) - 1}); give GPUs among them")
    return tuple(visible[int(d)] for d in devices) if visible else tuple(devices)


def _spread(runs: Sequence[tuple[Any, ...]], devices: Sequence[str], log: Callable[[str], None]) -> None:
    """The runs in processes of their own, as many at once as there are devices, each process seeing one device
    (CUDA_VISIBLE_DEVICES) and training with this process's number of CPU threads, so that a run's results are those
    it gives when run here."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import torch

    context = multiprocessing.get_context("spawn")  # a fresh process: CUDA not yet started, so it sees its device alone
    free = context.Queue()
    for device in devices:
        free.put(str(device))
    log(f"{len(runs)} runs over {len(devices)} devices ({','.join(map(str, devices))}), one run a device at a time")
    with ProcessPoolExecutor(len(devices), mp_context=context, initializer=_take_device,
                             initargs=(free, torch.get_num_threads())) as pool:
        for label in pool.map(_run, runs):
            log(f"{label} done")


def _take_device(free, threads) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = free.get()
    import torch

    torch.set_num_threads(threads)


def _run(run: tuple[Any, ...]) -> str:
    """One run in a device's process; its lines go to stderr, named by the run (the data's warnings were said)."""
    model_dir, train_path, dev_path, test_path, folder, options, redo, card, label = run
    device = os.environ["CUDA_VISIBLE_DEVICES"]
    print(f"{label} on device {device}", file=sys.stderr, flush=True)
    training.train(model_dir, train_path, dev_path, test_path, folder, options, overwrite=redo,
                   log=lambda message: print(f"{label}  {message}", file=sys.stderr, flush=True),
                   warn=lambda line: None, card=card)
    return label
