"""What ``biofairseq-train`` reads from our own folders before fairseq parses its arguments, so that one command
line, written before any of them exists, trains right whatever they hold (the recipes print such lines, and a
cluster user can copy them):

- ``DATA`` may be a data-bin of ``preprocess/binarize.sh``: a sharded one is given to fairseq as its shards
  (``shard0:shard1:...``), and its vocabulary's ``--bpe`` flags are added unless ``--bpe`` is given, so that the
  checkpoint records how to encode text.
- ``--init-from DIR``: a folder of ``biofairseq-convert from-hf``; its model's shape (``conversion.json``) and, on a
  first launch, its weights (``--finetune-from-model DIR/model.pt``).
- ``--new-phase-at UPDATES``: this command continues, with other lengths or batches, a run whose previous phase ended
  at update UPDATES; see ``biofairseq.training_state``.
- A ``checkpoint_last.pt`` in ``--save-dir`` that a kill cut short is mended, and one already at ``--max-update`` is
  not trained again (fairseq would train one update more).
"""

import json
import os
import sys
import time
from pathlib import Path

from biofairseq.arguments import first_line


class TrainInputError(Exception):
    pass


def value_of(argv, flag, default=None):
    """The value of ``flag`` in ``argv`` (its last occurrence, as argparse takes it), or default."""
    found = default
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found


def without(argv, flag):
    """argv without ``flag`` and its value."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        elif not word.startswith(flag + "="):
            out.append(word)
    return out


def init_from(argv):
    """``--init-from DIR`` replaced, where it stands, by the converted model's flags (later flags override them, as
    argparse takes the last), and its weights where this is not a new phase of a run."""
    folder = value_of(argv, "--init-from")
    if folder is None:
        return argv
    conversion = Path(folder) / "conversion.json"
    if not conversion.is_file():
        raise TrainInputError(f"--init-from {folder}: no conversion.json; give a folder of biofairseq-convert from-hf")
    flags = list(json.loads(conversion.read_text())["fairseq_flags"])
    if "--new-phase-at" not in argv and "--finetune-from-model" not in argv:
        flags += ["--finetune-from-model", str(Path(folder) / "model.pt")]
    at = next(i for i, w in enumerate(argv) if w == "--init-from" or w.startswith("--init-from="))
    rest = without(argv, "--init-from")
    return rest[:at] + flags + rest[at:]


def ours(data):
    """Whether ``data`` is a data-bin of preprocess/binarize.sh (sharded or not), rather than fairseq's own path."""
    return (Path(data) / "shard0").is_dir() or (Path(data) / "vocab_info.json").is_file()


def rank():
    """This process's task under srun (one a machine): only the first mends checkpoints."""
    return int(os.environ.get("SLURM_PROCID", "0") or 0)


def updates_so_far(save_dir):
    """checkpoint_last.pt's updates, once mended (by the first task; the others wait for it to be whole)."""
    from biofairseq import training_state

    if rank() == 0:
        return training_state.updates(save_dir)
    last = Path(save_dir) / "checkpoint_last.pt"
    for _ in range(60):
        if not last.is_file() or training_state.complete(last):
            break
        time.sleep(5)
    return training_state.updates_unmended(save_dir)


def expand(argv, data, save_dir, max_update, restore_file="checkpoint_last.pt",
           say=lambda line: print(line, file=sys.stderr)):
    """fairseq-train's arguments for argv, or None where checkpoint_last.pt is at max_update already (where fairseq
    resumes from it: no other --restore-file)."""
    from biofairseq import training_state

    done = updates_so_far(save_dir) if restore_file == "checkpoint_last.pt" else 0
    if max_update and done >= max_update:
        say(f"{save_dir}/checkpoint_last.pt: at update {done} already, at or past this command's --max-update {max_update}; "
            "not trained again")
        return None
    if done:
        say(f"resuming: {save_dir}/checkpoint_last.pt is at update {done} of {max_update or '?'}")
    phase, mine = value_of(argv, "--new-phase-at"), ours(data)
    argv, flags = without(argv, "--new-phase-at"), []
    if phase is not None:
        if not phase.isdigit():
            raise TrainInputError(f"--new-phase-at {phase}: give the update at which the previous phase ended")
        if not done:
            raise TrainInputError(f"--new-phase-at {phase}: {save_dir} has no checkpoint_last.pt of the previous phase "
                                  "to continue; train that phase first")
        try:
            path, flags = training_state.phase2(save_dir, data, int(phase))
        except Exception as error:  # noqa: BLE001  a checkpoint torch cannot read, whatever the reason
            raise TrainInputError(f"{save_dir}/checkpoint_last.pt: the previous phase's checkpoint could not be read "
                                  f"({first_line(error)}); train that phase again") from None
    elif mine:
        from biofairseq.data_bin import fairseq_path

        path = fairseq_path(data)
    else:
        return argv  # fairseq's own data path (or a mistake that biofairseq-train names)
    if value_of(argv, "--bpe") is None and mine:
        from biofairseq.bpe_flags import flags as bpe_flags

        flags = bpe_flags(data) + flags
    at = argv.index(data)
    return argv[:at] + [path] + argv[at + 1:] + flags
