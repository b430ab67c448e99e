"""An interrupt (Ctrl-C's SIGINT, a scheduler's SIGTERM) ends a command in one line saying what it kept and how it
resumes, not in a traceback per process: the command's main runs inside ``ends_in_one_line``, and its pools' workers
leave an interrupt to it (``ignore_in_workers``), which ends them."""

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn, Optional


class Interrupted(BaseException):
    """SIGTERM, raised where the command is, as SIGINT raises KeyboardInterrupt."""


def _terminated(signum: int, frame: Optional[FrameType]) -> NoReturn:
    raise Interrupted()


def ignore_in_workers() -> None:
    """A pool's initializer: its workers ignore SIGINT (Ctrl-C reaches the whole process group), and SIGTERM ends
    them quietly, as the parent's pool does when the interrupt stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def ends_in_one_line(prog: str, kept: str) -> Iterator[None]:
    """Runs the body; an interrupt ends it with ``PROG: interrupted; KEPT`` on stderr and exit status 130 (SIGINT) or
    143 (SIGTERM), as a shell reports a signal."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        yield
    except (KeyboardInterrupt, Interrupted) as interrupt:
        _close_progress_bars()  # else a bar's last refresh, at exit, would come after the line
        print(f"\n{prog}: interrupted; {kept}", file=sys.stderr, flush=True)
        raise SystemExit(143 if isinstance(interrupt, Interrupted) else 130) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _close_progress_bars() -> None:
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()
