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
import sys

import fairseq_cli.train as fairseq_train
import torch
from fairseq.logging import metrics
from fairseq.trainer import Trainer

import biofairseq  # noqa: F401  (registers the tasks, models, criterions and optimizers)
from biofairseq.models.compiled_layers import COMPILE_CHOICES, compile_layers

logger = logging.getLogger("biofairseq.train")
_fairseq_main = fairseq_train.main


class MeteredTrainer(Trainer):
    """fairseq's Trainer whose updates leave their metrics on the device until something prints them."""

    def __init__(self, cfg, task, model, criterion, quantizer=None, compile="none"):
        super().__init__(cfg, task, compile_layers(model, compile), criterion, quantizer)

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


def add_arguments(parser):
    if parser.get_default("compile") is not None:  # fairseq modifies its parser twice
        return
    parser.add_argument_group("biofairseq-train").add_argument(
        "--compile", choices=COMPILE_CHOICES, default="none",
        help="torch.compile the encoder layers: inductor (torch's compiler; needs a C++ compiler on CPU), aot_eager "
             "(traced, not compiled: a check), none (default)")


def main(cfg, compile="none", **kwargs):
    """fairseq_cli.train.main with MeteredTrainer; a module-level function, so that spawned ranks find it too."""
    # Kept on purpose: main builds its trainer by this module-level name and has no argument or registry for another
    # class; the alternative is a copy of its 150 lines. Set in each process that runs main, before it runs.
    fairseq_train.Trainer = functools.partial(MeteredTrainer, compile=compile)
    return _fairseq_main(cfg, **kwargs)


def cli_main():
    # fairseq's parser accepts --compile (and lists it in --help); its configuration has no place for it, so it is
    # read here and handed to main, which fairseq's cli_main passes to distributed_utils.call_main
    ours = argparse.ArgumentParser(prog="biofairseq-train", add_help=False)
    add_arguments(ours)
    # Kept on purpose: cli_main calls this module-level main (through distributed_utils.call_main, in every rank)
    # and takes no other; the alternative is a copy of cli_main and its distributed start-up.
    fairseq_train.main = functools.partial(main, compile=ours.parse_known_args(sys.argv[1:])[0].compile)
    fairseq_train.cli_main(modify_parser=add_arguments)


if __name__ == "__main__":
    cli_main()
