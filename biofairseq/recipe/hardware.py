"""The devices a recipe trains on: NUM_GPUS (all that torch sees, where empty), several machines under Slurm, and
the update frequency of either length phase on them."""

import shutil
from typing import Optional

from biofairseq.corpus.checks import launcher_problem
from biofairseq.recipe.table import SettingsError


def devices(values: dict, path: Optional[str] = None, in_allocation: bool = False) -> dict:
    """NUM_GPUS (all torch sees, where empty), and the update frequency of either phase on them. path: the PATH where
    srun and sbatch are looked for; in_allocation: whether this runs inside a Slurm allocation (SLURM_JOB_ID)."""
    given = values["NUM_GPUS"]
    # a run that pretrains here (STOP_AFTER=settings may be a preview on a login node, binarize the CPU part)
    trains = values["STOP_AFTER"] == "none"
    if given == "" or (int(given) > 0 and int(values["NUM_NODES"]) == 1 and trains):
        import torch

        seen = torch.cuda.device_count()
        if given == "" and seen == 0 and values["PRESET"] in ("one_gpu", "paper") and trains:
            raise SettingsError(f"PRESET={values['PRESET']} is for GPUs, and torch sees none; NUM_GPUS=0 runs it on the "
                                "CPU anyway (slowly), STOP_AFTER=binarize runs the corpus stages alone")
        if given != "" and int(given) > seen:
            raise SettingsError(f"NUM_GPUS={given}: torch sees {seen} GPU(s) here; give NUM_GPUS={seen} (0: the CPU), "
                                "or run on a machine with more")
        values["NUM_GPUS"] = given or str(seen)
    problem = values["STOP_AFTER"] != "settings" and launcher_problem(values.get("CORPUS_LAUNCHER"), "CORPUS_LAUNCHER", path)
    if problem:
        raise SettingsError(problem)
    gpus, nodes = int(values["NUM_GPUS"]), int(values["NUM_NODES"])
    ner = values["NER_GPU"].split(",")
    if gpus > 0 and (len(set(ner)) < len(ner) or any(int(g) >= gpus for g in ner)):
        raise SettingsError(f"NER_GPU={values['NER_GPU']}: give distinct GPUs of the NUM_GPUS={gpus} (0 to {gpus - 1}), as "
                            f"{','.join(map(str, range(min(gpus, 4))))}, or more GPUs")
    if nodes > 1:  # several machines: fairseq's launcher under srun, from inside an allocation
        if gpus == 0:
            raise SettingsError(f"NUM_NODES={nodes} needs GPUs: set NUM_GPUS to the GPUs of each machine, or NUM_NODES=1")
        if values["STOP_AFTER"] == "none":
            if not shutil.which("srun", path=path):
                raise SettingsError(f"NUM_NODES={nodes}: srun not found; several machines pretrain under Slurm (see "
                                    "docs/recipes.md), or set NUM_NODES=1")
            if not in_allocation:
                raise SettingsError(f"NUM_NODES={nodes}: not inside a Slurm allocation (no SLURM_JOB_ID); submit the "
                                    "recipe with sbatch (see docs/recipes.md), or STOP_AFTER=binarize for the corpus stages")
    count = gpus * nodes if gpus > 0 else 1
    computed = {"DEVICES": str(count)}
    for prefix in ("", "PHASE2_"):
        sequences, batch = f"{prefix}SEQUENCES_PER_UPDATE", f"{prefix}BATCH_PER_DEVICE"
        total, each = int(values[sequences]), int(values[batch])
        if total % count:  # no batch per device can make it: the devices or the sequences must change
            raise SettingsError(f"{sequences}={total} is not a multiple of {count} device(s); give a number of GPUs "
                                f"that divides it, or a {sequences} that is a multiple of {count}")
        if total % (count * each):
            fits = max(b for b in range(1, min(each, total // count) + 1) if (total // count) % b == 0)
            raise SettingsError(f"{sequences}={total} is not a multiple of {count} device(s) x {batch}={each}; change "
                                f"{batch} (e.g. {batch}={fits}, the largest up to {each} that divides it)")
        computed[f"{prefix}UPDATE_FREQ"] = str(total // (count * each))
    # phase 1's last update, rounded half up (the recipes' awk did it before)
    computed["PHASE1_UPDATES"] = str(int(int(values["MAX_UPDATE"]) * (1 - float(values["PHASE2_SHARE"])) + 0.5))
    return computed


def preview(values: dict, workers_given: bool = False, in_allocation: bool = False) -> list:
    """What STOP_AFTER=settings says of the run besides its commands: where it goes, the devices, and how an update is
    made of them (the values a cluster run depends on), and a WORKERS that is only the previewing machine's. values:
    the resolved settings and the computed ones (DEVICES, UPDATE_FREQ, ...)."""
    gpus, nodes, devices = int(values["NUM_GPUS"]), int(values["NUM_NODES"]), values["DEVICES"]
    where = f"{nodes} machine(s) x {gpus} GPU(s), world size {devices}" if gpus else "the CPU"
    lines = [f"RUN_DIR={values['RUN_DIR']}; pretraining on {where}"]
    for prefix, phase in (("", "an update"), ("PHASE2_", "an update of the second length phase")):
        if prefix and float(values["PHASE2_SHARE"]) == 0:
            continue
        lines.append(f"{phase}: {prefix}SEQUENCES_PER_UPDATE={values[prefix + 'SEQUENCES_PER_UPDATE']} = "
                     f"{prefix}BATCH_PER_DEVICE={values[prefix + 'BATCH_PER_DEVICE']} x {devices} device(s) x update "
                     f"frequency {values[prefix + 'UPDATE_FREQ']}")
    workers, launcher = values["WORKERS"], values.get("CORPUS_LAUNCHER", "local")
    cleaning = f"{workers} local processes" if launcher == "local" else f"job arrays ({launcher}), {workers} tasks at a time"
    lines.append(f"cleaning: {cleaning}; vocabulary and binarizing: on this machine, {workers} processes (WORKERS)")
    if gpus:
        ner = values["NER_GPU"].split(",")
        lines.append(f"NER: the sweep's runs on GPU {ner[0]}" if len(ner) == 1 else
                     f"NER: the sweep's runs spread over GPUs {values['NER_GPU']}, one run a GPU at a time")
    if nodes > 1 and not workers_given and not in_allocation:
        lines.append(f"note: WORKERS={values['WORKERS']} is this machine's cores, and srun gives each machine's task "
                     "that many (--cpus-per-task); set WORKERS to the cores of a cluster machine")
    return lines
