"""biofairseq.data.index_cache: an index is rebuilt when its algorithm changes, mapped from a read-only folder, built
and published once without flock, and leaves no temporary behind.

The tests of several processes run this file as a script (``_child``), which loads index_cache.py alone: importing it
through ``biofairseq.data`` would import fairseq, 4 s a process.
"""

import errno
import fcntl
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

INDEX_CACHE = Path(__file__).resolve().parents[1] / "biofairseq" / "data" / "index_cache.py"
NAME, KEY, NAMES = "packed-128", "0123456789abcdef", ("order", "offsets")


def arrays():
    """What the index of these tests holds."""
    return np.arange(10_000, dtype=np.int64) * 7 % 1013, np.array([0, 3, 10_000], dtype=np.int64)


def no_flock(*args):
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))  # as Lustre mounted without -o flock answers


def folders(root):
    """Every entry of SPLIT.index but its lock file: the published indexes and any temporary."""
    return sorted(p.name for p in Path(root).iterdir() if p.name != ".lock")


def _child(job):
    """One process: index_cache.cached(job's split), printing what it returned as JSON (its log goes to stderr)."""
    spec = importlib.util.spec_from_file_location("index_cache", INDEX_CACHE)
    index_cache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(index_cache)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if job.get("no_flock"):
        fcntl.flock = no_flock

    def build():
        if job.get("must_not_build"):
            raise AssertionError("built although the index is there")
        if job.get("barrier"):  # every process is building before any publishes
            Path(job["barrier"], str(os.getpid())).touch()
            deadline = time.monotonic() + 60
            while len(os.listdir(job["barrier"])) < job["parties"]:
                assert time.monotonic() < deadline, "the other builder never started"
                time.sleep(0.01)
        return arrays()

    got = index_cache.cached(job["split"], job.get("name", NAME), KEY, NAMES, build)
    print(json.dumps({"memmap": [isinstance(a, np.memmap) for a in got], "arrays": [a.tolist() for a in got]}))


def run_children(jobs, prefix=()):
    """Runs a process for each job at once: [(its JSON result, its log)]."""
    procs = [subprocess.Popen([*prefix, sys.executable, __file__, json.dumps(job)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for job in jobs]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        results.append((json.loads(out), err))
    return results


def expected():
    return [a.tolist() for a in arrays()]


class Blocks:
    """What PackedBlocksDataset needs of its dataset: the block sizes."""

    def __init__(self, sizes):
        self.sizes = sizes


def one_row_per_block(sizes, capacity):
    return np.arange(len(sizes)), np.arange(len(sizes) + 1)


def one_block_per_line(sizes, break_mode, document_sep_len, block_size):
    ends = np.cumsum(sizes)
    slice_indices = np.stack([ends - sizes, ends], axis=1)
    lines = np.arange(len(sizes))
    return sizes.astype(np.uint16), np.stack([lines, np.zeros_like(lines), lines], axis=1), slice_indices


@pytest.mark.fast  # make test-fast: in this process
@pytest.mark.parametrize("kind", ["packed", "blocks"])
def test_a_changed_algorithm_with_its_version_bumped_is_not_served_the_old_index(kind, tmp_path, monkeypatch):
    import torch

    from biofairseq.data import DocumentBlockDataset, PackedBlocksDataset, document_blocks, packing

    sizes = np.array([10] * 40 + [1] + [30] * 12, dtype=np.int64)  # two documents of short lines
    if kind == "packed":
        module, builder, changed, version = packing, "pack", one_row_per_block, "PACKING_VERSION"
        make = lambda: PackedBlocksDataset(Blocks(sizes), 128, index_path=tmp_path / "train")  # noqa: E731
    else:
        module, builder, changed, version = document_blocks, "_slice_indices", one_block_per_line, "BLOCKS_VERSION"
        lines = [torch.full((int(n),), 5) for n in sizes]
        make = lambda: DocumentBlockDataset(lines, sizes, 127, 1, 2, index_path=tmp_path / "train")  # noqa: E731
    before = make()
    assert len(before) < len(sizes) - 1  # several short lines a block, several blocks a row
    monkeypatch.setattr(module, builder, changed)  # the algorithm changed...
    monkeypatch.setattr(module, version, getattr(module, version, 1) + 1, raising=False)  # ...and says so
    after = make()
    assert len(after) == len(sizes)  # the new algorithm's index, not the one saved before it
    assert len([f for f in folders(tmp_path / "train.index") if f.startswith(kind)]) == 2


def without_write_access():
    """A command prefix under which a read-only folder cannot be written: none, or for root (whom chmod does not
    stop) setpriv dropping the capabilities that override file permissions."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, where chmod does not stop writes, and no setpriv to drop root's overrides")
    drop = "-dac_override,-dac_read_search,-fowner"
    return ["setpriv", "--bounding-set", drop, "--inh-caps", drop]


def chmod_tree(folder, writable):
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o755 if path.is_dir() else 0o644) if writable else (0o555 if path.is_dir() else 0o444))


def test_a_read_only_data_folder_maps_the_index_it_has_and_builds_in_memory_only_what_it_lacks(tmp_path, caplog):
    from biofairseq.data.index_cache import cached

    prefix = without_write_access()
    data_bin = tmp_path / "data-bin"
    data_bin.mkdir()
    with caplog.at_level("INFO", logger="biofairseq.data.index_cache"):
        cached(data_bin / "train", NAME, KEY, NAMES, arrays)  # built while the folder was writable
    assert f"built the {NAME} index" in caplog.text
    published = folders(data_bin / "train.index")
    chmod_tree(data_bin, writable=False)  # a shared corpus that this user cannot write
    try:
        (present, present_log), (other, other_log), (absent, absent_log) = run_children([
            {"split": str(data_bin / "train"), "must_not_build": True},  # its index is there: mapped
            {"split": str(data_bin / "train"), "name": "packed-64"},  # SPLIT.index there, not this index
            {"split": str(data_bin / "valid")},  # no SPLIT.index at all
        ], prefix)
    finally:
        chmod_tree(data_bin, writable=True)
    assert present == {"memmap": [True, True], "arrays": expected()}
    assert f"memory-mapped the {NAME} index {data_bin / 'train.index' / published[0]}" in present_log
    for result, log in ((other, other_log), (absent, absent_log)):
        assert result == {"memmap": [False, False], "arrays": expected()}
        assert "cannot be written" in log and "index is built in memory" in log
    assert folders(data_bin / "train.index") == published and not (data_bin / "valid.index").exists()


@pytest.mark.fast  # make test-fast: in this process
def test_without_flock_the_index_is_built_published_and_mapped(tmp_path, monkeypatch, caplog):
    from biofairseq.data.index_cache import cached

    monkeypatch.setattr(fcntl, "flock", no_flock)
    builds = []
    build = lambda: builds.append(1) or arrays()  # noqa: E731
    with caplog.at_level("INFO", logger="biofairseq.data.index_cache"):
        first = cached(tmp_path / "train", NAME, KEY, NAMES, build)
        second = cached(tmp_path / "train", NAME, KEY, NAMES, build)
    assert len(builds) == 1 and folders(tmp_path / "train.index") == [f"{NAME}-{KEY}"]
    assert [a.tolist() for a in first] == [a.tolist() for a in second] == expected()
    assert all(isinstance(a, np.memmap) for a in second)
    messages = [r.getMessage() for r in caplog.records]
    assert not any("cannot be written" in m for m in messages), messages
    folder = tmp_path / "train.index" / f"{NAME}-{KEY}"
    assert messages[1:] == [f"built the {NAME} index {folder}", f"memory-mapped the {NAME} index {folder}"]
    assert "no file lock" in messages[0] and os.strerror(errno.ENOLCK) in messages[0]


def test_two_processes_building_at_once_without_flock_publish_one_index_and_leave_no_temporary(tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    job = {"split": str(tmp_path / "train"), "no_flock": True, "barrier": str(barrier), "parties": 2}
    (a, a_log), (b, b_log) = run_children([job, job])
    assert a["arrays"] == b["arrays"] == expected()
    assert folders(tmp_path / "train.index") == [f"{NAME}-{KEY}"]  # one index, no temporary
    logs = a_log + b_log
    assert logs.count(f"built the {NAME} index") == 1 and logs.count(f"memory-mapped the {NAME} index") == 1, logs


@pytest.mark.fast  # make test-fast: in this process
def test_a_write_that_fails_leaves_no_temporary_and_the_index_is_built_once_in_memory(tmp_path, monkeypatch, caplog):
    from biofairseq.data.index_cache import cached

    save, saved = np.save, []

    def full_disk(file, array, *args, **kwargs):
        if saved:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        saved.append(1)
        save(file, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", full_disk)
    builds = []
    with caplog.at_level("INFO", logger="biofairseq.data.index_cache"):
        got = cached(tmp_path / "train", NAME, KEY, NAMES, lambda: builds.append(1) or arrays())
    assert folders(tmp_path / "train.index") == []
    assert [a.tolist() for a in got] == expected() and len(builds) == 1
    assert "cannot be written (No space left on device)" in caplog.text


@pytest.mark.fast  # make test-fast: in this process
def test_a_dead_builders_temporary_is_never_read_and_swept_once_stale(tmp_path):
    from biofairseq.data.index_cache import cached

    root = tmp_path / "train.index"
    root.mkdir()
    dead = root / f".{NAME}-{KEY}.tmp-otherhost-4242-0123abcd"  # a builder that died writing this very index
    live = root / f".{NAME}-{KEY}0.tmp-otherhost-4243-4567cdef"  # one that is writing another
    for tmp in (dead, live):
        tmp.mkdir()
        for array_name in NAMES:
            np.save(tmp / f"{array_name}.npy", np.zeros(3, dtype=np.int64))
    day_ago = time.time() - 24 * 3600
    os.utime(dead, (day_ago, day_ago))
    got = cached(tmp_path / "train", NAME, KEY, NAMES, arrays)
    assert [a.tolist() for a in got] == expected()
    assert folders(root) == sorted([f"{NAME}-{KEY}", live.name])


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
