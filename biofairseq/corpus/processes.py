"""Jobs spread over local worker processes, the way the corpus stages run their independent pieces."""

import multiprocessing
from typing import Callable, Sequence, TypeVar

from biofairseq.interrupts import ignore_in_workers

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")


def map_jobs(function: Callable[[_Job], _Result], jobs: Sequence[_Job], workers: int) -> list[_Result]:
    """[function(job) for job in jobs], in up to ``workers`` forked processes when there is more than one job."""
    if workers > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(min(workers, len(jobs)), ignore_in_workers) as pool:
            return pool.map(function, jobs)
    return [function(job) for job in jobs]
