"""``biofairseq-train``: fairseq-train, flags and all, with a trainer that does not read the GPU's metrics every step.

fairseq's ``Trainer`` ends every update by turning this update's meters into host numbers (the loss, perplexity,
accuracy, and a second finiteness test of the gradient norm), each a host-device synchronisation: the GPU runs
dry while the host then logs, fetches and collates the next batch and queues its kernels. Those numbers are only
``train_step``'s return value, which ``fairseq_cli.train`` tests for None, so ``MeteredTrainer`` keeps the meters
on the device and reads them when a log line or a validation prints them, as fairseq itself does on TPUs.

One read stays per update, before the optimizer step: fairseq's test that the gradients are finite, which raises
and writes ``crash.pt`` on a NaN (or skips the batch under ``--amp``). Kept on purpose; since it comes before the
optimizer step is queued, the host's work between updates (logging, the next batch) now overlaps the optimizer
step on the GPU instead of following it. What that saves on a GPU has not been measured.

Everything else is fairseq's: ``biofairseq-train`` takes fairseq-train's arguments, and the biofairseq user
directory is loaded with it (``--user-dir`` may be given or left out). Model-parallel runs keep fairseq's
MegatronTrainer. One argument is its own, ``--compile``: the trainer compiles the encoder layers it trains
(``biofairseq.models.compiled_layers``); loading a checkpoint elsewhere (conversion, fine-tuning) never compiles.
"""

import argparse
import functools
import logging
import os
import shlex
import sys
from typing import Any, Optional

import fairseq_cli.train as fairseq_train
import torch
from fairseq.dataclass.configs import FairseqConfig
from fairseq.logging import metrics
from fairseq.trainer import Trainer

import biofairseq  # noqa: F401  (registers the tasks, models, criterions and optimizers)
from biofairseq.models.compiled_layers import COMPILE_CHOICES, compile_layers
from biofairseq.optim.grad_norm import clip_grad_norm_, plain

logger = logging.getLogger("biofairseq.train")
_fairseq_main = fairseq_train.main


class MeteredTrainer(Trainer):
    """fairseq's Trainer whose updates leave their metrics on the device until something prints them, and whose
    gradient norm takes a few multi-tensor launches instead of one a tensor (biofairseq.optim.grad_norm)."""

    def __init__(self, cfg, task, model, criterion, quantizer=None, compile="none") -> None:
        super().__init__(cfg, task, compile_layers(model, compile), criterion, quantizer)

    def clip_grad_norm(self, clip_norm: float) -> torch.Tensor:
        if self.is_fsdp or not plain(self.optimizer):  # FSDP aggregates the norm across ranks; fp16 unscales first
            return super().clip_grad_norm(clip_norm)
        return clip_grad_norm_(self.optimizer.params, clip_norm)

    def _reduce_and_log_stats(self, logging_outputs, sample_size, grad_norm=None):
        # train_step passes grad_norm here only when it was finite: otherwise it raised (FloatingPointError) or
        # skipped the update (--amp overflow, fp16 OverflowError), so fairseq's second isfinite test is not repeated.
        if grad_norm is not None:
            metrics.log_speed("ups", 1.0, priority=100, round=2)
            metrics.log_scalar("gnorm", grad_norm, priority=400, round=3)
            clip = self.cfg.optimization.clip_norm
            if clip > 0:
                clipped = torch.where(grad_norm > clip, grad_norm.new_tensor(100), grad_norm.new_tensor(0))
                metrics.log_scalar("clip", clipped, priority=500, round=1)
        with metrics.aggregate() as step:
            if logging_outputs is not None:
                self.task.reduce_metrics(logging_outputs, self.get_criterion())
            if "loss" not in step:
                if "loss" not in self._warn_once:
                    self._warn_once.add("loss")
                    logger.warning("Criterion.reduce_metrics did not log a 'loss' value, which may break some functionality")
                metrics.log_scalar("loss", -1)
        return {}  # not None: the update happened (fairseq_cli.train reads nothing else from it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    if parser.get_default("compile") is not None:  # fairseq modifies its parser twice
        return
    group = parser.add_argument_group("biofairseq-train")
    group.add_argument("--compile", choices=COMPILE_CHOICES, default="none",
                       help="torch.compile the encoder layers: inductor (torch's compiler; needs a C++ compiler on CPU), "
                            "aot_eager (traced, not compiled: a check), none (default)")
    # read and replaced by biofairseq.train_inputs before fairseq parses; listed here for --help
    group.add_argument("--init-from", metavar="DIR", help="a folder of biofairseq-convert from-hf: its model's shape, "
                       "and its weights on a first launch")
    group.add_argument("--fit-epochs", metavar="E", help="at most --max-update updates, fewer where E passes over the "
                       "data-bin's training samples take fewer (warm-up and checkpoint interval shortened in proportion)")
    group.add_argument("--new-phase-at", metavar="UPDATES", help="continue, at other lengths or batch sizes, a run whose "
                       "previous phase ended at update UPDATES (a recipe's second length phase)")


def main(cfg: FairseqConfig, compile: str = "none", **kwargs: Any) -> None:
    """fairseq_cli.train.main with MeteredTrainer; a module-level function, so that spawned ranks find it too."""
    # Kept on purpose: main builds its trainer by this module-level name and has no argument or registry for another
    # class; the alternative is a copy of its 150 lines. Set in each process that runs main, before it runs.
    fairseq_train.Trainer = functools.partial(MeteredTrainer, compile=compile)
    return _fairseq_main(cfg, **kwargs)


# Tasks whose data-bin must hold the dictionary (fairseq's masked_lm and ours read DATA/dict.txt first thing).
DICT_TASKS = ("document_mlm", "electra", "masked_lm")
HALF_FLAGS = {"fp16": "--fp16", "bf16": "--bf16", "memory_efficient_bf16": "--memory-efficient-bf16"}


def user_error(args: argparse.Namespace) -> Optional[str]:
    """The first mistake in fairseq-train's parsed arguments that would otherwise end in a traceback (or, for
    --restore-file, in a silent start from scratch) after the save folder is made: one line, or None."""
    import torch

    implied = {"fp16": "memory_efficient_fp16", "bf16": "memory_efficient_bf16"}  # fairseq sets fp16 for these too
    for name, flag in HALF_FLAGS.items():
        if getattr(args, implied.get(name, ""), False):
            continue  # --memory-efficient-fp16 trains on a CPU; --memory-efficient-bf16 is checked as itself
        if getattr(args, name, False) and (args.cpu or not torch.cuda.is_available()):
            why = "--cpu was given" if args.cpu else f"this torch ({torch.__version__}) sees no CUDA GPU"
            return (f"{flag} needs a CUDA GPU and {why}: drop {flag} (fp32), or give --memory-efficient-fp16 to train "
                    "in float16 on the CPU, or install a CUDA build of torch (README: make clean, then make install TORCH_INDEX=...)")
    data = getattr(args, "data", None)
    for shard in data.split(os.pathsep) if data else []:
        if not os.path.isdir(shard):
            return f"{shard}: no such data-bin folder; give the folder preprocess/binarize.sh wrote"
        if args.task in DICT_TASKS and not os.path.isfile(os.path.join(shard, "dict.txt")):
            if os.path.isfile(os.path.join(shard, "shard0", "dict.txt")):
                continue  # a sharded data-bin of ours: read as its shards (biofairseq.train_inputs)
            return (f"{shard}: no dict.txt, so not a data-bin for --task {args.task}; give the folder "
                    "preprocess/binarize.sh wrote")
    problem = criterion_problem(args)
    if problem:
        return problem
    restore = getattr(args, "restore_file", "checkpoint_last.pt")
    sharded = getattr(args, "model_parallel_size", 1) > 1 or getattr(args, "ddp_backend", "") == "fully_sharded"
    if restore != "checkpoint_last.pt" and not sharded and not os.path.isfile(restore):
        return (f"--restore-file {restore}: no such checkpoint file (fairseq would train from scratch); give the path "
                "of a .pt file, relative to this folder, or leave the flag out")
    return None


def criterion_problem(args: argparse.Namespace) -> Optional[str]:
    """A --criterion the task cannot train with (fairseq-train's default, cross_entropy, on our masked-LM tasks),
    said before the save folder is made rather than by the task's ValueError inside fairseq's start-up."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    task, name = TASK_REGISTRY.get(getattr(args, "task", None)), getattr(args, "criterion", None)
    accepted = getattr(task, "CRITERIA", None)
    if accepted is None or name not in CRITERION_REGISTRY or issubclass(CRITERION_REGISTRY[name], accepted):
        return None
    default = " (fairseq-train's default)" if name == "cross_entropy" else ""
    return f"--criterion {name}{default}: not a loss for --task {args.task}'s batches: {task.CRITERION_ADVICE}"


def arch_missing(parser: argparse.ArgumentParser) -> Optional[str]:
    """fairseq's parse_args_and_arch meets a missing --arch with a bare RuntimeError: one line instead, or None.
    (An unknown --arch or --task is argparse's invalid-choice error.) Read as its own first pass reads it."""
    from fairseq.models import ARCH_CONFIG_REGISTRY

    if parser.parse_known_args()[0].arch is not None:
        return None
    ours = sorted(a for a, f in ARCH_CONFIG_REGISTRY.items() if f.__module__.startswith("biofairseq."))
    return f"--arch is missing; give one of biofairseq's ({', '.join(ours)}) or fairseq's (--help lists them)"


def cli_main() -> Optional[int]:
    """fairseq-train's cli_main, after biofairseq-train's own checks of its arguments, parsed by fairseq's parser."""
    from fairseq import options

    from biofairseq import train_inputs

    help_asked = any(a in ("-h", "--help") for a in sys.argv[1:])
    try:
        given = list(sys.argv[1:])
        if not help_asked:
            sys.argv[1:] = train_inputs.init_from(given)
        error = None if help_asked else arch_missing(options.get_training_parser())
        if error is None:
            args = options.parse_args_and_arch(options.get_training_parser(), modify_parser=add_arguments)
            error = user_error(args)  # the mistakes first, in one line, before a checkpoint is mended
            if error is None and not help_asked and args.data and os.path.isdir(args.data):
                expanded = train_inputs.expand(sys.argv[1:], args.data, args.save_dir, args.max_update,
                                               getattr(args, "restore_file", "checkpoint_last.pt"))
                if expanded is None:
                    return 0
                sys.argv[1:] = expanded
                args = options.parse_args_and_arch(options.get_training_parser(), modify_parser=add_arguments)
                error = user_error(args)
            if error is None and sys.argv[1:] != given:
                print(f"biofairseq-train: as fairseq-train {shlex.join(sys.argv[1:])}", file=sys.stderr)
    except train_inputs.TrainInputError as problem:
        error = str(problem)
    if error:
        print(f"biofairseq-train: error: {error}", file=sys.stderr)
        return 1
    # fairseq's parser accepts --compile (and lists it in --help); its configuration has no place for it, so it is
    # handed to main, which fairseq's cli_main passes to distributed_utils.call_main.
    # Kept on purpose: cli_main calls this module-level main (through distributed_utils.call_main, in every rank)
    # and takes no other; the alternative is a copy of cli_main and its distributed start-up.
    fairseq_train.main = functools.partial(main, compile=args.compile)
    fairseq_train.cli_main(modify_parser=add_arguments)


if __name__ == "__main__":
    sys.exit(cli_main())
