"""Where a pretraining stands, read from its checkpoints before fairseq-train starts again (biofairseq-train,
biofairseq.train_inputs): how many updates checkpoint_last.pt holds, and how a new length phase starts.

A kill can cut a checkpoint short: fairseq writes checkpoint_E_U.pt through a temporary and a rename, then copies it
in place to checkpoint_best.pt and checkpoint_last.pt, and a copy cut short (torch.save's zip lacks its directory,
written last) fails every rerun. Such a file is replaced by the newest complete checkpoint, the copy's source.
fairseq-train started on a checkpoint_last.pt already at --max-update trains one update more (it tests the limit after
an update), so biofairseq-train does not start it there.

A new phase (a recipe's phase 2) continues the previous one's checkpoint_last.pt with other sample lengths and batch
sizes, so fairseq must rebuild its data loader (``--reset-dataloader``), which also restarts at epoch 1: with a
sharded data-bin that would be shard0 again. So the new phase reads the shards in the order that starts with the one
after the shard the previous phase was reading, recorded (SAVE_DIR/phase2.first_shard) before its first update so
that a resumed phase keeps it; once it has saved a checkpoint of its own, a rerun resumes it as it stands (a reset
would restart its epoch).
"""

import argparse
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

from biofairseq.atomic import write_text
from biofairseq.data_bin import shards


def complete(path: str | Path) -> bool:
    """Whether a checkpoint file is whole: a zip with its directory (a legacy pickle checkpoint is taken as whole)."""
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            return True
    try:
        with zipfile.ZipFile(path):
            return True
    except zipfile.BadZipFile:
        return False


def mend(save_dir: str | Path) -> None:
    """Replaces each cut checkpoint in save_dir by the newest complete one (removes it where there is none)."""
    found = sorted(Path(save_dir).glob("checkpoint*.pt"), key=lambda p: p.stat().st_mtime)
    good = [p for p in found if complete(p)]
    for cut in (p for p in found if p not in good):
        if good:
            print(f"{cut}: cut short (killed while fairseq copied it); replaced by {good[-1].name}", file=sys.stderr)
            shutil.copyfile(good[-1], f"{cut}.tmp")
            os.replace(f"{cut}.tmp", cut)
        else:
            print(f"{cut}: cut short (killed while fairseq copied it), and no complete checkpoint to replace it; removed",
                  file=sys.stderr)
            cut.unlink()


def load_state(checkpoint: str | Path) -> dict[str, Any]:
    """A fairseq checkpoint's dictionary, its tensors memory-mapped, without importing fairseq: its one non-plain
    type allowed as biofairseq.models.safe_checkpoints allows it. Not torch's safe_globals context manager: on
    leaving, it removes the type from the allow-list even when it was there before, and later fairseq loads in
    this process would fail."""
    import torch

    torch.serialization.add_safe_globals([argparse.Namespace])
    return torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)


def progress(checkpoint: str | Path) -> tuple[int, int]:
    """(updates, epoch) of a fairseq checkpoint, read without loading its tensors."""
    state = load_state(checkpoint)
    history = state.get("optimizer_history") or [{}]
    epoch = ((state.get("extra_state") or {}).get("train_iterator") or {}).get("epoch", 1)
    return history[-1].get("num_updates", 0), epoch


def updates(save_dir: str | Path) -> int:
    """The updates of save_dir/checkpoint_last.pt once mended; 0 where there is none (or fairseq-train will say what
    is wrong with it)."""
    if not Path(save_dir).is_dir():
        return 0
    mend(save_dir)
    return updates_unmended(save_dir)


def updates_unmended(save_dir: str | Path) -> int:
    last = Path(save_dir) / "checkpoint_last.pt"
    try:
        return progress(last)[0] if last.is_file() else 0
    except Exception:  # noqa: BLE001  fairseq-train's own loading names the problem
        return 0


def phase2(save_dir: str | Path, data_bin: str | Path, phase1_updates: int) -> tuple[str, list[str]]:
    """(fairseq data path, extra flags) of a new phase, recording its first shard at its first launch."""
    save_dir, parts = Path(save_dir), shards(data_bin)
    done, epoch = progress(save_dir / "checkpoint_last.pt")
    first_launch = done <= phase1_updates
    record = save_dir / "phase2.first_shard"
    if first_launch or not record.is_file():
        write_text(record, f"{epoch % len(parts)}\n")  # phase 1's epoch E read shard E-1; phase 2 starts at shard E
    first = int(record.read_text())
    path = ":".join(str(p) for p in parts[first:] + parts[:first])  # the valid split is found in shard0 (document_mlm)
    return path, ["--reset-dataloader"] if first_launch else []
