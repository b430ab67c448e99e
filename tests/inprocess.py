"""The commands of this environment run in this process, as their console scripts and ``python`` run them, the way
fairseq's own tests run fairseq_cli.train (distributed_utils.call_main): importing torch, fairseq and transformers
once per pytest worker instead of once per command. A test that checks a process itself (its exit on a signal, two
distributed ranks, a console script's start-up) starts one; the others call ``run``. A fairseq command run here
should get ``--num-workers 0``: a data loader's forked workers otherwise outlive it, and a later test waits for them."""

import contextlib
import io
import logging
import multiprocessing
import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

# fairseq_cli's own format: fairseq-train's json log lines read "... | INFO | train_inner | {...}"
FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _entry(program):
    """The function a console script of this environment calls, or None."""
    from biofairseq import commands

    ours = {"biofairseq-train": commands.train, "biofairseq-convert": commands.convert, "biofairseq-ner": commands.ner}
    if program in ours:
        return ours[program]
    if program.startswith("fairseq-"):
        import importlib

        return importlib.import_module(f"fairseq_cli.{program[len('fairseq-'):]}").cli_main
    return None


def _loggers():
    return [logging.getLogger(), *(l for l in logging.Logger.manager.loggerDict.values() if isinstance(l, logging.Logger))]


# loggers that the commands quiet (biofairseq-convert's, biofairseq-ner's and binarize's mains): each command starts
# with them as a fresh process has them, whatever an earlier test or command in this process set
QUIETED = ("fairseq", "hydra", "biofairseq", "matplotlib", "PIL")


@contextlib.contextmanager
def _logs_to(stream):
    """Every log record of the call to stream, in fairseq's format; the loggers' handlers, levels and switches as they
    were afterwards, as a process would leave them (fairseq-train's --log-file adds a handler on every run, a command
    may quiet a logger)."""
    before = {logger: (list(logger.handlers), logger.level, logger.disabled) for logger in _loggers()}
    for name in QUIETED:
        logging.getLogger(name).level = logging.NOTSET
    logging.Logger.manager._clear_cache()
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger in _loggers():
            handlers, level, disabled = before.get(logger, ([], logging.NOTSET, False))
            logger.level, logger.disabled = level, disabled
            for extra in [h for h in logger.handlers if h not in handlers]:
                logger.removeHandler(extra)
                if extra is not handler:
                    extra.close()
        logging.Logger.manager._clear_cache()


def _fairseq_as_in_a_new_process():
    """What fairseq keeps from one training run to the next in a process, as a process of its own starts: the best
    validation so far (a function attribute of save_checkpoint, and of fairseq-train's early stop: a later run no
    better than an earlier one wrote no checkpoint_best.pt), and fairseq-train's own main and Trainer, which
    biofairseq-train points at its own for the rest of its process."""
    from fairseq import checkpoint_utils

    for function, names in ((checkpoint_utils.save_checkpoint, ("best",)),
                            (sys.modules.get("fairseq_cli.train") and sys.modules["fairseq_cli.train"].should_stop_early,
                             ("best", "num_runs"))):
        for name in names if function else ():
            if hasattr(function, name):
                delattr(function, name)
    ours = sys.modules.get("biofairseq.train")
    if ours is not None:
        import fairseq_cli.train
        from fairseq.trainer import Trainer

        fairseq_cli.train.main, fairseq_cli.train.Trainer = ours._fairseq_main, Trainer


def _close_tensorboard_writers():
    """fairseq keeps its tensorboard writers in a global by key alone ("train_inner", "valid") and closes them when
    the process exits: a later command in this process would write into the earlier one's folder (a relative one
    resolved from another folder by the writer's thread). They are closed and forgotten as the process would."""
    progress_bar = sys.modules.get("fairseq.logging.progress_bar")
    if progress_bar is not None and getattr(progress_bar, "_tensorboard_writers", None):
        progress_bar._close_writers()
        progress_bar._tensorboard_writers.clear()


def _end_children(before):
    """A process's daemon children end with it: those the command started (fairseq's data loader workers) are ended
    here, or they would wait for the loader to be collected, and a later command would wait for their shutdown."""
    for child in set(multiprocessing.active_children()) - before:
        if child.daemon:
            child.terminate()
            child.join(5)


def run(*argv, cwd=None, env=None, environ=None, check=True):
    """argv as its console script, ``python -m module``, ``python -c code`` or ``python script.py`` runs it, in this
    process and in cwd, with env added to the environment (or environ in its place): its exit status and what it
    printed (log records with stderr, as fairseq logs to the console)."""
    argv = [str(a) for a in argv]
    python = argv[0] in ("python", sys.executable) or argv[0].endswith("/python")
    entry = None if python else _entry(argv[0])
    if not python and entry is None:
        raise ValueError(f"{argv[0]}: not a command of this environment that runs in this process")
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, dict(os.environ), os.getcwd(), list(sys.path)
    children = set(multiprocessing.active_children())
    if "fairseq" in sys.modules:
        _fairseq_as_in_a_new_process()
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    os.environ.update(env or {})
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _logs_to(err):
            try:
                if entry is not None:
                    sys.argv = argv
                    code = entry()
                elif argv[1] == "-m":
                    sys.argv = argv[2:]
                    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
                elif argv[1] == "-c":
                    sys.argv = ["-c", *argv[3:]]
                    exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})
                else:
                    script = Path(argv[1]).resolve()
                    sys.argv = [str(script), *argv[2:]]
                    sys.path.insert(0, str(script.parent))
                    runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exit:
                code = exit.code
            except Exception:  # a traceback and exit status 1, as the interpreter ends a process
                traceback.print_exc()
                code = 1
    finally:
        _close_tensorboard_writers()  # in the command's folder: a relative --tensorboard-logdir is written there
        sys.argv = saved[0]
        os.environ.clear()
        os.environ.update(saved[1])
        os.chdir(saved[2])
        sys.path[:] = saved[3]
        if "fairseq" in sys.modules:
            _fairseq_as_in_a_new_process()
        _end_children(children)
    if isinstance(code, str):  # sys.exit("message"): the interpreter prints it on stderr, status 1
        err.write(code + "\n")
        code = 1
    ran = Ran(code or 0, out.getvalue(), err.getvalue())
    if check and ran.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({ran.returncode}):\n{ran.stderr[-4000:]}\n{ran.stdout[-2000:]}")
    return ran
