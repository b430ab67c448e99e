"""biofairseq-ner: NER from BRAT or CoNLL data to the papers' tables.

  biofairseq-ner convert INPUT OUTPUT.conll
  biofairseq-ner train --model HF_DIR --train PATH --dev PATH [--test PATH] --output-dir DIR [--lr --seed --epochs ...]
  biofairseq-ner predict --model DIR --input PATH --output-dir DIR
  biofairseq-ner sweep --model HF_DIR --train PATH --dev PATH [--test PATH] --output-dir DIR [--lrs ... --seeds ...]
  biofairseq-ner report RUN_DIR [RUN_DIR ...] [--output-dir DIR]

PATH is a BRAT folder (X.txt + X.ann) or a CoNLL file (token<TAB>tag, blank line between sentences).
"""

import argparse
import json
import sys
import time
from dataclasses import fields
from pathlib import Path


def _floats(text):
    return [float(x) for x in text.split(",") if x]


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def _training_flags(parser, defaults):
    g = parser.add_argument_group("fine-tuning (defaults: bsc-bio-es, Carrino et al. 2022, Table 4)")
    g.add_argument("--epochs", type=float, default=defaults.epochs)
    g.add_argument("--batch-size", type=int, default=defaults.batch_size, help="sequences per device and step")
    g.add_argument("--gradient-accumulation", type=int, default=defaults.gradient_accumulation)
    g.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    g.add_argument("--adam-epsilon", type=float, default=defaults.adam_epsilon)
    g.add_argument("--adam-betas", type=_floats, default=list(defaults.adam_betas), help="two values, as 0.9,0.999")
    g.add_argument("--max-grad-norm", type=float, default=defaults.max_grad_norm, help="gradient clipping")
    g.add_argument("--warmup-ratio", type=float, default=defaults.warmup_ratio, help="linear warm-up over this share of the steps")
    g.add_argument("--layerwise-lr-decay", type=float, default=defaults.layerwise_lr_decay,
                   help="ELECTRA's layer-wise decay (BioELECTRA: 0.8): the head at the full learning rate, the last layer at "
                   "this squared, each layer below this times less, the embeddings at this ** (layers + 2); 1 turns it off")
    g.add_argument("--max-length", type=int, default=defaults.max_length, help="sub-tokens per window, special tokens included")
    g.add_argument("--window-overlap", type=int, default=defaults.window_overlap,
                   help="sub-tokens shared by consecutive windows of a sentence longer than --max-length")
    g.add_argument("--label-scheme", choices=["first-subtoken", "all-subtokens"], default=defaults.label_scheme,
                   help="which sub-tokens of a word carry its label in training (prediction reads the first)")
    g.add_argument("--num-fc-layers", type=int, choices=[1, 2], default=defaults.num_fc_layers,
                   help="the head: 1, a linear layer (transformers'); 2, Linear + ReLU + Linear (BioMegatron's, NeMo's)")
    g.add_argument("--fc-hidden-size", type=int, default=defaults.fc_hidden_size,
                   help="width of a 2-layer head's hidden layer (BioMegatron: 512 or 1024; 0: the encoder's width)")
    g.add_argument("--fc-dropout", type=float, default=defaults.fc_dropout,
                   help="dropout on the encoder's output before the head (BioMegatron: 0.5; default: the encoder's hidden dropout)")
    g.add_argument("--eval-steps", type=int, default=defaults.eval_steps, help="evaluate on dev every N updates (0: every epoch)")
    g.add_argument("--logging-steps", type=int, default=defaults.logging_steps)
    g.add_argument("--eval-batch-size", type=int, default=defaults.eval_batch_size)
    g.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"], default=defaults.precision,
                   help="auto: bf16 on GPUs that have it, else fp16 on GPU, fp32 on CPU")
    g.add_argument("--no-save-model", dest="save_model", action="store_false", help="keep metrics and predictions only")
    g.add_argument("--keep-checkpoints", action="store_true", help="keep Trainer's checkpoints (optimizer state) after a run")


def _data_flags(parser, output_help):
    parser.add_argument("--model", required=True, type=Path, help="transformers encoder folder (biofairseq-convert to-hf output)")
    parser.add_argument("--train", required=True, type=Path, help="training data: BRAT folder or CoNLL file")
    parser.add_argument("--dev", required=True, type=Path, help="development data, for checkpoint selection")
    parser.add_argument("--test", type=Path, default=None, help="test data, scored with the best-on-dev checkpoint")
    parser.add_argument("--output-dir", required=True, type=Path, help=output_help)


def _parser():
    from biofairseq.finetune.sweep import PAPER_LRS, PAPER_SEEDS
    from biofairseq.finetune.training import TrainOptions

    defaults = TrainOptions()
    parser = argparse.ArgumentParser(prog="biofairseq-ner", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="BRAT folder or CoNLL file -> BIO CoNLL, with conversion statistics")
    convert.add_argument("input", type=Path)
    convert.add_argument("output", type=Path, help="CoNLL file to write; its statistics go beside it as OUTPUT.stats.json")
    train = commands.add_parser("train", help="fine-tune one configuration; writes metrics.json, predictions, the best model")
    _data_flags(train, "run folder to create (resumed if it holds checkpoints of an unfinished run)")
    train.add_argument("--lr", type=float, default=defaults.lr)
    train.add_argument("--seed", type=int, default=defaults.seed)
    train.add_argument("--overwrite", action="store_true", help="replace a finished run in --output-dir")
    _training_flags(train, defaults)
    sweep = commands.add_parser("sweep", help="the LR x seed grid, one run folder per configuration, resumable")
    _data_flags(sweep, "sweep folder; runs go to DIR/lr=X/seed=Y/, then the report to DIR")
    sweep.add_argument("--lrs", type=_floats, default=list(PAPER_LRS), help="comma-separated learning rates")
    sweep.add_argument("--seeds", type=_ints, default=list(PAPER_SEEDS), help="comma-separated seeds")
    _training_flags(sweep, defaults)
    predict = commands.add_parser("predict", help="tag a BRAT folder or CoNLL file with a fine-tuned model")
    predict.add_argument("--model", required=True, type=Path, help="a train output folder, or its model/ folder")
    predict.add_argument("--input", required=True, type=Path, help="BRAT folder (.txt, with or without .ann) or CoNLL file")
    predict.add_argument("--output-dir", required=True, type=Path, help="folder to create: predictions/ and metrics.json")
    predict.add_argument("--max-length", type=int, default=defaults.max_length)
    predict.add_argument("--window-overlap", type=int, default=defaults.window_overlap)
    predict.add_argument("--eval-batch-size", type=int, default=defaults.eval_batch_size)
    predict.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16"], default=defaults.precision)
    predict.add_argument("--overwrite", action="store_true", help="replace --output-dir if it exists")
    report = commands.add_parser("report", help="the bsc-bio-es Table 2 layout (+ median over seeds) as Markdown, JSON and a plot")
    report.add_argument("runs", nargs="+", type=Path, help="sweep folders (one per model) or run folders")
    report.add_argument("--output-dir", type=Path, default=None, help="where report.md/.json and dev_f1.png go (default: the one RUN_DIR)")
    return parser


def _options(args):
    from biofairseq.finetune.training import TrainOptions

    values = {f.name: getattr(args, f.name) for f in fields(TrainOptions) if hasattr(args, f.name)}
    if "adam_betas" in values:
        values["adam_betas"] = tuple(values["adam_betas"])
    return TrainOptions(**values)


def _quiet_libraries():
    import logging
    import warnings

    for name in ("fairseq", "hydra", "biofairseq", "matplotlib", "PIL"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    import transformers

    transformers.logging.set_verbosity_error()


def _convert(args, log):
    from biofairseq.text.tables import markdown_table
    from biofairseq.finetune import NERFormatError, conll, data
    from biofairseq.atomic import write_text

    if args.output.is_dir():
        raise NERFormatError(f"{args.output}: is a folder; give the CoNLL file to write")
    dataset = data.read(args.input)
    if not dataset.annotated:
        raise NERFormatError(f"{args.input}: has no annotations (.ann files or a tag column); nothing to convert")
    stats = dataset.statistics()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    conll.write_file(args.output, [(s.tokens, s.tags) for s in dataset.sentences])
    write_text(args.output.with_suffix(".stats.json"), json.dumps(stats, indent=1, ensure_ascii=False) + "\n")
    rows = [[k, f"{v:,}"] for k, v in stats.items() if isinstance(v, int) and v is not None]
    rows += [[f"entities: {k}", f"{v:,}"] for k, v in stats["entities_per_type"].items()]
    rows += [[f"problem: {k}", f"{v:,}"] for k, v in stats["problems"].items()]
    print(markdown_table(["", "count"], rows))
    for message in stats["problem_list"][:50]:
        print(f"  {message}")
    if len(stats["problem_list"]) > 50:
        print(f"  ... {len(stats['problem_list']) - 50} more in {args.output.with_suffix('.stats.json')}")
    log(f"wrote {args.output} and {args.output.with_suffix('.stats.json')}")


def main(argv=None):
    args = _parser().parse_args(argv)
    _quiet_libraries()
    from biofairseq.finetune import NERFormatError, report, sweep, training

    log = lambda message: print(f"biofairseq-ner: {message}", flush=True)
    started = time.time()
    try:
        if args.command == "convert":
            _convert(args, log)
        elif args.command == "train":
            training.train(args.model, args.train, args.dev, args.test, args.output_dir, _options(args), args.overwrite, log)
            log(f"wrote {args.output_dir}/metrics.json in {time.time() - started:.0f} s")
        elif args.command == "predict":
            training.predict(args.model, args.input, args.output_dir, _options(args), args.overwrite, log)
            log(f"wrote {args.output_dir}/predictions in {time.time() - started:.0f} s")
        elif args.command == "sweep":
            folders = sweep.sweep(args.model, args.train, args.dev, args.test, args.output_dir, _options(args), args.lrs, args.seeds, log)
            print(report.write([args.output_dir], args.output_dir))
            log(f"{len(folders)} runs; wrote {args.output_dir}/report.md, report.json and dev_f1.png in {time.time() - started:.0f} s")
        else:
            if args.output_dir is None and len(args.runs) > 1:
                raise NERFormatError("report: several RUN_DIRs; give --output-dir for the report")
            output = args.output_dir or args.runs[0]
            print(report.write(args.runs, output))
            log(f"wrote {output}/report.md, report.json and dev_f1.png")
    except NERFormatError as error:
        print(f"biofairseq-ner: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
