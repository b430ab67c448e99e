"""The model a run continued, measured as the continued one is: its validation perplexity on the run's own validation
split, with the run's masking, lengths and criterion.

    python -m biofairseq.recipe.original_check WEIGHTS LIKE DATA_BIN --output original.json [--head-warmup N]

WEIGHTS: the original's fairseq weights (``init/model.pt`` of ``biofairseq-convert from-hf``, or the head warm-up's
last checkpoint for a model published without a trained LM head, whose encoder is still the original's). LIKE: a
checkpoint of the continued run, whose task, criterion and seed the validation takes, so that the two numbers differ
by the weights alone (fairseq's validation: the split's masks are fixed by the seed and the sample, not the batch).
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from biofairseq.atomic import write_text


def validate(weights: Path, like: Path, data_bin: Path) -> dict:
    """{loss, ppl, accuracy} of WEIGHTS on DATA_BIN's valid split, as fairseq-train validates LIKE's model."""
    import torch
    from fairseq import checkpoint_utils, utils
    from fairseq.logging import metrics

    from biofairseq.data_bin import fairseq_path
    from biofairseq.training_state import load_state

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(like)], arg_overrides={
        "data": fairseq_path(data_bin)})
    model = models[0]
    model.load_state_dict(load_state(weights)["model"], strict=True)
    device = "cuda" if torch.cuda.is_available() and not cfg.common.cpu else "cpu"
    model.to(device).eval()
    criterion = task.build_criterion(cfg.criterion)
    task.load_dataset("valid", combine=False, epoch=1)
    batches = task.get_batch_iterator(
        dataset=task.dataset("valid"), max_tokens=cfg.dataset.max_tokens_valid, max_sentences=cfg.dataset.batch_size_valid,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=cfg.dataset.skip_invalid_size_inputs_valid_test,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple, seed=cfg.common.seed, num_workers=0,
        epoch=1).next_epoch_itr(shuffle=False)
    outputs = []
    with torch.no_grad():
        for sample in batches:
            outputs.append(task.valid_step(utils.move_to_cuda(sample) if device == "cuda" else sample, model, criterion)[2])
    with metrics.aggregate(new_root=True) as agg:
        task.reduce_metrics(outputs, criterion)
        values = agg.get_smoothed_values()
    return {k: float(values[k]) for k in ("loss", "ppl", "accuracy") if k in values}


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biofairseq.recipe.original_check", description=__doc__.split("\n")[0])
    parser.add_argument("weights", type=Path, help="the original model's fairseq checkpoint")
    parser.add_argument("like", type=Path, help="a checkpoint of the continued run: its task, criterion and seed")
    parser.add_argument("data_bin", type=Path, help="the run's data-bin (its valid split)")
    parser.add_argument("--output", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--head-warmup", type=int, default=0, metavar="N",
                        help="the updates that trained WEIGHTS' LM head alone (0: the head is the original's)")
    args = parser.parse_args(argv)
    for path in (args.weights, args.like):
        if not path.is_file():
            print(f"original_check: error: {path}: missing; run the recipe's stages 2 and 4 first", file=sys.stderr)
            return 1
    result = {"weights": str(args.weights), "like": str(args.like), "head_warmup_updates": args.head_warmup,
              **validate(args.weights, args.like, args.data_bin)}
    write_text(args.output, json.dumps(result, indent=1) + "\n")
    head = f" (its LM head trained alone for {args.head_warmup:,} updates first)" if args.head_warmup else ""
    print(f"original_check: the original model{head}: validation perplexity {result['ppl']:.2f}; wrote {args.output}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    from biofairseq.commands import quiet_known_noise
    from biofairseq.interrupts import ends_in_one_line

    quiet_known_noise()
    with ends_in_one_line("original_check", "nothing was written; run the same command again"):
        sys.exit(main())
