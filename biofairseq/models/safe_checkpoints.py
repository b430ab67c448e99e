"""fairseq checkpoints under torch's default ``weights_only=True`` load, and nothing unsafe does.

torch >= 2.6 refuses the ``argparse.Namespace`` that fairseq stores in every checkpoint. Rather than
turn weights-only loading off (which would run any code a checkpoint holds), the few plain types
fairseq saves are allow-listed, and a checkpoint holding anything else fails with one line that
names the type and the file.
"""

import argparse
import functools
import pickle
from typing import Any

import torch
from fairseq import checkpoint_utils

SAFE_GLOBALS = [argparse.Namespace]


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds a Python object that weights-only loading does not allow."""


def _explain(path, error) -> str:
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a zip checkpoint
        found = []
    with open(path, "rb") as f:
        head = f.read(2)
    if not found and head != b"PK" and not head.startswith(b"\x80"):  # neither torch's zip nor a pickle
        return f"{path}: not a PyTorch checkpoint; give the path of a .pt file that fairseq (torch.save) wrote"
    what = ", ".join(found) if found else str(error).strip().splitlines()[-1]
    return (
        f"{path}: holds {what}, which is not one of the plain types fairseq checkpoints contain; "
        "it is not loaded because unpickling it could run code. Re-save it from trusted code with "
        "only tensors and plain values"
    )


def _guard(load):
    if getattr(load, "biofairseq_guarded", False):
        return load

    @functools.wraps(load)
    def guarded(path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return load(path, *args, **kwargs)
        except pickle.UnpicklingError as error:
            raise UnsafeCheckpointError(_explain(path, error)) from None

    guarded.biofairseq_guarded = True
    return guarded


torch.serialization.add_safe_globals(SAFE_GLOBALS)
# Every fairseq entry point (trainer, fairseq-validate, hub from_pretrained) loads through this one function, and
# fairseq has no setting for another: wrapping it (once, at registration) is the one place that covers them all.
checkpoint_utils.load_checkpoint_to_cpu = _guard(checkpoint_utils.load_checkpoint_to_cpu)
