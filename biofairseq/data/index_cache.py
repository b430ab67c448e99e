"""Indexes computed from a split's line sizes (document blocks, packed rows), built once and memory-mapped after.

Every rank of a run, and every run, used to rebuild them at each start: at 50M blocks, gigabytes of temporaries and
minutes of best-fit packing per rank. Now the first process to need one builds it and saves it beside the split
(``SPLIT.index/NAME-KEY/``); the others, and later runs, map it read-only.

KEY hashes all that the index is computed from: the sizes (a split binarized again gets a new one), the settings that
NAME does not hold, and the version of the algorithm (``BLOCKS_VERSION``, ``PACKING_VERSION``, beside the code they
version), so that a changed algorithm never reads an index an earlier one built.

An index folder appears whole or not at all: it is written into a temporary folder named by host, pid and a random
part (so that no other builder, on this node or another, writes into it), then renamed into place, a rename that fails
where the index is already there. So a folder that is present is complete, and is mapped without the lock and without
write access: on a read-only shared corpus every rank maps the index it has. The lock (``flock`` on SPLIT.index/.lock)
only spares the other processes a build of their own, so where the filesystem has none (Lustre mounted without
``-o flock``) each process that finds no index builds one, the first rename wins, and the others drop theirs and map
the winner's. A temporary is removed when its writing fails; one left by a builder that died is never read, and the
next build beside it sweeps it after STALE_AFTER_S. Where an index is absent and the folder cannot be written, each
process builds its own in memory, as before.
"""

import contextlib
import fcntl
import logging
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import xxhash

logger = logging.getLogger(__name__)

# A temporary older than this is a dead builder's: writing an index takes seconds to minutes, once it is built.
STALE_AFTER_S = 6 * 3600


def key_of(*arrays_and_values: object) -> str:
    h = xxhash.xxh3_64()
    for item in arrays_and_values:
        h.update(np.ascontiguousarray(item).tobytes() if isinstance(item, np.ndarray) else repr(item).encode())
    return h.hexdigest()


def cached(split_path: str | os.PathLike[str] | None, name: str, key: str, names: Sequence[str],
           build: Callable[[], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """The arrays ``build()`` returns (in ``names`` order), memory-mapped from SPLIT.index/NAME-KEY/, which the first
    caller builds; ``split_path`` None: built in memory. ``key``: a ``key_of`` all that ``build`` depends on, the
    version of its algorithm included."""
    if split_path is None:
        return build()
    root = Path(f"{split_path}.index")
    folder = root / f"{name}-{key}"
    if folder.is_dir():  # renamed into place whole: complete, and reading it needs neither the lock nor write access
        return _mapped(name, folder, names)
    with _lock(root, name):
        if folder.is_dir():  # built by the process this one waited for
            return _mapped(name, folder, names)
        arrays = build()
        try:
            published = _publish(root, folder, names, arrays)
        except OSError as error:  # a read-only data-bin, a full disk
            logger.info(f"{folder}: cannot be written ({error.strerror}); the {name} index is built in memory")
            return arrays
    if not published:  # another process, without the lock, renamed its own first: the same arrays
        return _mapped(name, folder, names)
    logger.info(f"built the {name} index {folder}")
    return arrays


@contextlib.contextmanager
def _lock(root, name):
    """Holds the flock of ROOT/.lock, so that one process builds and the others wait, then map; holds nothing where
    the folder cannot be written (the build then says so) or the filesystem has no flock (each builds, one
    publishes)."""
    try:
        root.mkdir(exist_ok=True)
        lock = open(root / ".lock", "a")
    except OSError:
        yield
        return
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError as error:  # ENOLCK, EOPNOTSUPP, EINVAL, ENOSYS: a filesystem without flock
            logger.info(f"{root}: no file lock ({error.strerror}); the {name} index is built without one, and the "
                        f"first of the processes building it at once publishes it")
        yield  # closing the file releases the lock


def _publish(root, folder, names, arrays) -> bool:
    """Writes ``arrays`` into a temporary folder and renames it to ``folder``: True, or False where another process's
    rename came first. The temporary never outlives the call."""
    root.mkdir(exist_ok=True)
    _sweep(root)
    tmp = root / f".{folder.name}.tmp-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for array_name, array in zip(names, arrays):
            with open(tmp / f"{array_name}.npy", "wb") as file:
                np.save(file, array)
                file.flush()
                os.fsync(file.fileno())  # on disk before the rename shows it
        try:
            os.rename(tmp, folder)  # fails where folder exists (ENOTEMPTY, EEXIST): the index is never half-read
        except OSError:
            if folder.is_dir():
                return False
            raise
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing left once renamed


def _sweep(root) -> None:
    """Removes the temporaries that builders which died (a killed job, a lost node) left over STALE_AFTER_S ago."""
    now = time.time()
    for tmp in root.glob(".*.tmp-*"):
        with contextlib.suppress(OSError):
            if now - tmp.lstat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(tmp, ignore_errors=True)


def _mapped(name, folder, names):
    logger.info(f"memory-mapped the {name} index {folder}")
    return tuple(np.load(folder / f"{array_name}.npy", mmap_mode="r") for array_name in names)
