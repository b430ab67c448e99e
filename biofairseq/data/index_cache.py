"""Indexes computed from a split's line sizes (document blocks, packed rows), built once and memory-mapped after.

Every rank of a run, and every run, used to rebuild them at each start: at 50M blocks, gigabytes of temporaries and
minutes of best-fit packing per rank. Now the first process to need one builds it under a file lock and saves it
beside the split (``SPLIT.index/NAME-KEY/``, KEY a hash of the sizes it was built from, so a split binarized again
gets a new one); the others wait for it and map it read-only. Where the data-bin cannot be written, each process
builds its own, as before.
"""

import fcntl
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import xxhash

logger = logging.getLogger(__name__)


def key_of(*arrays_and_values):
    h = xxhash.xxh3_64()
    for item in arrays_and_values:
        h.update(np.ascontiguousarray(item).tobytes() if isinstance(item, np.ndarray) else repr(item).encode())
    return h.hexdigest()


def cached(split_path, name, key, names, build):
    """The arrays ``build()`` returns (in ``names`` order), memory-mapped from SPLIT.index/NAME-KEY/, which the first
    caller builds; ``split_path`` None: built in memory."""
    if split_path is None:
        return build()
    root = Path(f"{split_path}.index")
    folder = root / f"{name}-{key}"
    try:
        root.mkdir(exist_ok=True)
        with open(root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process builds; the others wait, then read
            if not folder.is_dir():
                arrays = build()
                tmp = root / f".{folder.name}.tmp-{os.getpid()}"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                for array_name, array in zip(names, arrays):
                    np.save(tmp / f"{array_name}.npy", array)
                os.replace(tmp, folder)
                logger.info(f"built the {name} index {folder}")
                return arrays
    except OSError as error:  # a read-only data-bin
        logger.info(f"{folder}: cannot be written ({error.strerror}); the {name} index is built in memory")
        return build()
    logger.info(f"memory-mapped the {name} index {folder}")
    return tuple(np.load(folder / f"{array_name}.npy", mmap_mode="r") for array_name in names)
