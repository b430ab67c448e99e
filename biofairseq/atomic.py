"""Outputs that appear whole or not at all: a crash or an error never leaves a half-written file or folder."""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


def write_text(path: str | Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary sibling and a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8", newline="")  # exactly these characters ("\r\n" stays)
    os.replace(tmp, path)


@contextlib.contextmanager
def staged_folder(output: str | Path, overwrite: bool, error: type[Exception]) -> Iterator[Path]:
    """A hidden sibling folder that becomes ``output`` only if the block succeeds.

    An existing ``output`` raises ``error`` (an exception class) unless ``overwrite``.
    """
    output = Path(output).resolve()
    if output.exists() and not overwrite:
        raise error(f"{output}: already exists; choose another output or pass --overwrite")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = output.parent / f".{output.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if output.exists():
        shutil.rmtree(output) if output.is_dir() else output.unlink()
    staging.rename(output)
