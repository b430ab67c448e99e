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
- ``--fit-epochs E``: a run of at most ``--max-update`` updates (a recipe's continued pretraining) shortened to E
  passes over the data-bin's training samples (its document blocks) where that is fewer; its
  ``--total-num-update``, ``--warmup-updates`` and ``--save-interval-updates`` shortened in proportion, and
  validations at those intervals only (a pass over a task's text can be a few updates).
- A ``checkpoint_last.pt`` in ``--save-dir`` that a kill cut short is mended, and one already at ``--max-update`` is
  not trained again (fairseq would train one update more).
"""

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

from biofairseq.arguments import first_line

_T = TypeVar("_T")


class TrainInputError(Exception):
    pass


def value_of(argv: Sequence[str], flag: str, default: Optional[_T] = None) -> str | _T | None:
    """The value of ``flag`` in ``argv`` (its last occurrence, as argparse takes it), or default."""
    found = default
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found


def without(argv: Sequence[str], flag: str) -> list[str]:
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


def init_from(argv: list[str]) -> list[str]:
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


def replaced(argv: Sequence[str], flag: str, value: str | int) -> list[str]:
    """argv with ``flag``'s value (every occurrence) replaced, or the flag added."""
    out, changed = list(argv), False
    for i, word in enumerate(out):
        if word == flag and i + 1 < len(out):
            out[i + 1], changed = str(value), True
        elif word.startswith(flag + "="):
            out[i], changed = f"{flag}={value}", True
    return out if changed else out + [flag, str(value)]


NEVER = "1000000"  # epochs between end-of-epoch checkpoints and validations: never, the update intervals rule


def training_samples(data: str | Path, tokens_per_sample: int, break_mode: str, packed: bool) -> int:
    """The samples of a pass over the data-bin's training text, built as document_mlm builds them (its document
    blocks, each with its <s>; with --pack-documents, the rows they are packed into), and cached beside each shard as
    the run will read them."""
    from fairseq.data import PrependTokenDataset, data_utils

    from biofairseq.data.document_blocks import DocumentBlockDataset
    from biofairseq.data.packing import PackedBlocksDataset
    from biofairseq.data_bin import shards

    total = 0
    for shard in (s for s in shards(data) if (s / "train.idx").is_file()):
        path = str(shard / "train")
        lines = data_utils.load_indexed_dataset(path, None)
        if lines is None or not len(lines):
            continue
        # the ids of fairseq's Dictionary (<s> 0, <pad> 1, </s> 2): the blocks' sizes do not depend on them
        blocks = PrependTokenDataset(DocumentBlockDataset(lines, lines.sizes, tokens_per_sample - 1, pad=1, eos=2,
                                                          break_mode=break_mode, index_path=path), 0)
        total += len(PackedBlocksDataset(blocks, tokens_per_sample, index_path=path) if packed else blocks)
    return total


def fit_epochs(argv: list[str], data: str | Path,
               say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> tuple[list[str], int]:
    """argv with ``--fit-epochs E`` applied (see the module's docstring): (argv, its --max-update)."""
    epochs = value_of(argv, "--fit-epochs")
    argv = without(argv, "--fit-epochs")
    most = int(value_of(argv, "--max-update", 0) or 0)
    if epochs is None:
        return argv, most
    try:
        epochs = float(epochs)
    except ValueError:
        raise TrainInputError(f"--fit-epochs {epochs}: give a number of passes over the training text, as 100") from None
    if epochs <= 0 or not most:
        raise TrainInputError("--fit-epochs needs a positive number of passes and --max-update, the most updates")
    if "--new-phase-at" in argv:
        raise TrainInputError("--fit-epochs with --new-phase-at: a run in length phases counts updates; give --max-update")
    samples = training_samples(data, int(value_of(argv, "--tokens-per-sample", 512)),
                               value_of(argv, "--sample-break-mode", "complete_doc"), "--pack-documents" in argv)
    per_update = (int(value_of(argv, "--batch-size", 1)) * int(value_of(argv, "--update-freq", 1))
                  * int(value_of(argv, "--distributed-world-size", 1)))
    updates = max(1, math.ceil(epochs * samples / per_update))
    argv = replaced(replaced(argv, "--save-interval", NEVER), "--validate-interval", NEVER)
    if updates >= most:
        say(f"--fit-epochs {epochs:g}: {samples:,} training samples, {per_update:,} an update: {epochs:g} passes take "
            f"{updates:,} updates, more than --max-update {most:,}, which stands")
        return argv, most

    def share(flag: str) -> int:
        return max(1, round(int(value_of(argv, flag, 0) or 0) * updates / most))

    warmup, save = min(share("--warmup-updates"), updates), min(share("--save-interval-updates"), updates)
    argv = replaced(replaced(argv, "--max-update", updates), "--total-num-update", updates)
    argv = replaced(replaced(argv, "--warmup-updates", warmup), "--save-interval-updates", save)
    say(f"--fit-epochs {epochs:g}: {samples:,} training samples, {per_update:,} an update: {updates:,} updates (of "
        f"--max-update {most:,}), warm-up {warmup:,}, a checkpoint and validation every {save:,}")
    return argv, updates


def ours(data: str | Path) -> bool:
    """Whether ``data`` is a data-bin of preprocess/binarize.sh (sharded or not), rather than fairseq's own path."""
    return (Path(data) / "shard0").is_dir() or (Path(data) / "vocab_info.json").is_file()


def rank() -> int:
    """This process's task under srun (one a machine): only the first mends checkpoints."""
    return int(os.environ.get("SLURM_PROCID", "0") or 0)


def updates_so_far(save_dir: str | Path) -> int:
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


def expand(argv: list[str], data: str, save_dir: str | Path, max_update: int, restore_file: str = "checkpoint_last.pt",
           say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Optional[list[str]]:
    """fairseq-train's arguments for argv, or None where checkpoint_last.pt is at max_update already (where fairseq
    resumes from it: no other --restore-file)."""
    from biofairseq import training_state

    if value_of(argv, "--fit-epochs") is not None:
        if not ours(data):
            raise TrainInputError(f"--fit-epochs: {data} is not a data-bin of preprocess/binarize.sh, whose training "
                                  "samples it counts; give --max-update alone")
        argv, max_update = fit_epochs(argv, data, say)
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
