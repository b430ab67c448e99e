"""biofairseq-ner: NER from BRAT, CoNLL or the annotation tools' data to the papers' tables.

  biofairseq-ner convert INPUT OUTPUT.conll [--to conll|doccano|labelstudio|prodigy]
  biofairseq-ner train --model HF_DIR --train PATH --dev PATH [--test PATH] --output-dir DIR [--lr --seed --epochs ...]
  biofairseq-ner predict --model DIR --input PATH --output-dir DIR
  biofairseq-ner sweep --model HF_DIR --train PATH --dev PATH [--test PATH] --output-dir DIR [--lrs ... --seeds ...]
  biofairseq-ner report RUN_DIR [RUN_DIR ...] [--output-dir DIR]

PATH is a BRAT folder (X.txt + X.ann), a CoNLL file (token<TAB>tag, blank line between sentences), or JSON (.jsonl,
.json): doccano's, Label Studio's or Prodigy's export, our predict's entities.jsonl, or token lists (tokens + ner_tags).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from biofairseq.arguments import DefaultsHelp, OneLineParser, add_fields
from biofairseq.finetune.json_formats import WRITTEN

if TYPE_CHECKING:
    from biofairseq.finetune.training import TrainOptions


def _numbers(kind: Callable[[str], float], example: str) -> Callable[[str], list[float]]:
    def parse(text: str) -> list[float]:
        values = []
        for x in text.split(","):
            try:
                values.append(kind(x))
            except ValueError:
                raise argparse.ArgumentTypeError(f"{x.strip()!r} in {text!r} is not a number; give comma-separated values, as {example}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"no values; give comma-separated values, as {example}")
        return values

    parse.__name__ = "list"
    return parse


_floats = _numbers(float, "2e-5,5e-5")
_ints = _numbers(int, "1,2,3")


def _devices(text: str) -> tuple[str, ...]:
    devices = text.split(",") if text else []
    if not all(d.isdigit() for d in devices) or len(set(devices)) != len(devices):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct GPU numbers separated by commas, as 0,1,2,3")
    return tuple(devices)


def _listed(values: Iterable[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


def _option_flags(parser, prediction_only=False, skip=()) -> None:
    """The flags of TrainOptions' fields (biofairseq.finetune.training), from their defaults and help."""
    from biofairseq.finetune.training import TrainOptions

    add_fields(parser, TrainOptions, numbers=_floats,
               keep=lambda f: f.name not in skip and (f.metadata.get("prediction") or not prediction_only))


def _training_flags(parser, skip) -> None:
    g = parser.add_argument_group("fine-tuning (defaults: bsc-bio-es, Carrino et al. 2022, Table 4)")
    _option_flags(g, skip=skip)
    c = parser.add_argument_group("model card (model/README.md)")
    c.add_argument("--language", default=None, help="the data's language code, as es (default: the base model card's, if any)")
    c.add_argument("--license", default=None, help="the fine-tuned model's license, as apache-2.0 (default: the base model card's, else unknown)")
    c.add_argument("--dataset", default=None,
                   help="the data set's Hub id or name, as PlanTL-GOB-ES/pharmaconer (default: left out of the metadata; "
                   "the results name the folder holding --train)")


def _data_flags(parser, output_help) -> None:
    parser.add_argument("--model", required=True,
                        help="transformers encoder folder (biofairseq-convert to-hf output), or a Hugging Face Hub id such as "
                        "PlanTL-GOB-ES/bsc-bio-es (offline: from the cache)")
    parser.add_argument("--train", required=True, type=Path, help="training data: BRAT folder or .txt (X.txt + X.ann), CoNLL file (.conll, .tsv, .bio), "
                        "or JSON (.jsonl, .json: an annotation tool's export, token lists)")
    parser.add_argument("--dev", required=True, type=Path, help="development data, for checkpoint selection")
    parser.add_argument("--test", type=Path, default=None, help="test data, scored with the best-on-dev checkpoint (default: none)")
    parser.add_argument("--output-dir", required=True, type=Path, help=output_help)


def _parser():
    from biofairseq.finetune.sweep import PAPER_LRS, PAPER_SEEDS

    parser = OneLineParser(prog="biofairseq-ner", description=__doc__.split("\n")[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = lambda name, text: commands.add_parser(name, help=text, description=text, formatter_class=DefaultsHelp)
    convert = command("convert", "NER data -> BIO CoNLL or an annotation tool's format, with conversion statistics")
    convert.add_argument("input", type=Path, help="a BRAT folder (X.txt + X.ann), a .txt with its .ann, a CoNLL file (.conll, .tsv, .bio) "
                         "or JSON (.jsonl, .json: an annotation tool's export, token lists)")
    convert.add_argument("output", type=Path, help="file to write; its statistics go beside it as OUTPUT.stats.json")
    convert.add_argument("--to", choices=("conll", *WRITTEN), default=None,
                         help="the output's format: conll (for a .conll, .tsv or .bio OUTPUT, the default), doccano or prodigy "
                              "(.jsonl), labelstudio (.json: tasks with the entities as annotations); JSON keeps every "
                              "mention as read, nested and overlapping ones too")
    train = command("train", "fine-tune one configuration; writes metrics.json, predictions, the best model and its card")
    _data_flags(train, "run folder to create (resumed if it holds checkpoints of an unfinished run)")
    train.add_argument("--overwrite", action="store_true", help="replace a finished run in --output-dir")
    _training_flags(train, skip=())
    sweep = command("sweep", "the LR x seed grid, one run folder per configuration, resumable")
    _data_flags(sweep, "sweep folder; runs go to DIR/lr=X/seed=Y/, then the report to DIR")
    sweep.add_argument("--lrs", type=_floats, default=_listed(PAPER_LRS), help="comma-separated learning rates")
    sweep.add_argument("--seeds", type=_ints, default=_listed(PAPER_SEEDS), help="comma-separated seeds")
    sweep.add_argument("--devices", type=_devices, default=None,
                       help="comma-separated GPUs, as 0,1,2,3 (numbers among those CUDA_VISIBLE_DEVICES gives, where it is "
                            "set, as in a Slurm allocation): the runs spread over them, one run a GPU at a time, each with "
                            "the results it has when run alone; none: one run after another")
    _training_flags(sweep, skip=("lr", "seed"))
    predict = command("predict", "tag a folder of .txt notes, a .txt file, BRAT or CoNLL data with a fine-tuned model")
    predict.add_argument("--model", required=True, help="a train output folder, its model/ folder, or a Hub id of a token-classification model")
    predict.add_argument("--input", required=True, type=Path,
                         help="a .txt file or a folder of them (raw text; scored where X.ann is beside X.txt), a CoNLL file (.conll, .tsv, .bio) "
                              "or JSON (.jsonl, .json: an annotation tool's export, scored where annotated)")
    predict.add_argument("--output-dir", required=True, type=Path,
                         help="folder to create: predictions/ (the --formats chosen) and metrics.json")
    _option_flags(predict, prediction_only=True)
    # --max-length left out: the model's own fine-tuning length (its run's metrics.json), else TrainOptions' default
    predict.set_defaults(max_length=None)
    predict.add_argument("--formats", type=_formats, default="brat,jsonl,conll",
                         help="comma-separated: brat (X.txt + X.ann and annotation.conf, for notes), jsonl "
                              "(entities.jsonl: file, start, end, type, text, score per entity), conll (predictions.conll: "
                              "token, character offsets, tag; -DOCSTART- naming each note); pre-annotations to import as "
                              "suggestions: doccano (doccano.jsonl), labelstudio (labelstudio.json: predictions with their "
                              "scores), prodigy (prodigy.jsonl)")
    predict.add_argument("--overwrite", action="store_true", help="replace --output-dir if it exists")
    report = command("report", "the bsc-bio-es Table 2 layout (+ median over seeds, per-type scores) as Markdown, JSON and a plot")
    report.add_argument("runs", nargs="+", type=Path, help="sweep folders (one per model) or run folders")
    report.add_argument("--output-dir", type=Path, default=None, help="where report.md/.json and dev_f1.png go (default: the one RUN_DIR)")
    return parser


def _formats(text: str) -> list[str]:
    from biofairseq.finetune.outputs import FORMATS

    chosen = [f for f in text.split(",") if f]
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"{text}: give some of {', '.join(FORMATS)}, comma-separated")
    return chosen


def _options(args: argparse.Namespace) -> TrainOptions:
    from biofairseq.finetune.training import TrainOptions

    values = {f.name: getattr(args, f.name) for f in fields(TrainOptions) if hasattr(args, f.name)}
    if "adam_betas" in values:
        values["adam_betas"] = tuple(values["adam_betas"])
    return TrainOptions(**values)


def _card(args: argparse.Namespace) -> dict[str, str | None]:
    return {"language": args.language, "license": args.license, "dataset": args.dataset}


def _quiet_libraries() -> None:
    import logging
    import warnings

    for name in ("fairseq", "hydra", "biofairseq", "matplotlib", "PIL"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    import transformers

    transformers.logging.set_verbosity_error()
    if not os.isatty(2):  # as Trainer's own bars (disable_tqdm): no progress bars in a log file or a captured stderr
        transformers.utils.logging.disable_progress_bar()


def _convert(args: argparse.Namespace, log: Callable[[str], None]) -> None:
    from biofairseq.text.tables import markdown_table
    from biofairseq.finetune import NERFormatError, conll, data, json_formats, outputs
    from biofairseq.atomic import write_text

    if args.output.is_dir():
        raise NERFormatError(f"{args.output}: is a folder; give the file to write")
    to = args.to or ("conll" if args.output.suffix.lower() in data.CONLL_SUFFIXES else None)
    if to is None:
        raise NERFormatError(f"{args.output}: name a CoNLL output .conll, .tsv or .bio (biofairseq-ner reads those as CoNLL), "
                             f"or pass --to {'|'.join(json_formats.WRITTEN)} for an annotation tool's JSON")
    wanted = data.CONLL_SUFFIXES if to == "conll" else (Path(json_formats.WRITTEN[to]).suffix,)
    if args.output.suffix.lower() not in wanted:
        raise NERFormatError(f"{args.output}: --to {to} writes a {' or '.join(wanted)} file (biofairseq-ner reads it back by that "
                             "name); rename the output")
    say = lambda line: print(f"biofairseq-ner: {line}", file=sys.stderr)
    dataset = data.annotated_part(data.read(args.input), args.input, "input", say)
    log(f"read {args.input}: {dataset.format_name}")
    for line in dataset.warnings("input")[1:] if dataset.problems else dataset.warnings("input"):  # problems: listed below
        say(line)
    stats = dataset.statistics()
    if args.output.resolve() == Path(args.input).resolve():
        raise NERFormatError(f"{args.output}: is the input; give another file to write")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if to == "conll":
        conll.write_file(args.output, [(s.tokens, s.tags) for s in dataset.sentences])
    else:
        json_formats.write(args.output, to, outputs.tool_documents(dataset), gold=True)
    if to == "labelstudio":  # the project's labelling config, with the data's types
        write_text(args.output.with_suffix(".xml"), json_formats.label_studio_config(dataset.gold_types()))
        log(f"wrote {args.output.with_suffix('.xml')}: the Label Studio project's labelling config for it")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_libraries()
    from biofairseq.finetune import NERFormatError, sweep, training
    from biofairseq.finetune import sweep_report

    log = lambda message: print(f"biofairseq-ner: {message}", flush=True)
    started = time.time()
    try:
        if args.command == "convert":
            _convert(args, log)
        elif args.command == "train":
            training.train(args.model, args.train, args.dev, args.test, args.output_dir, _options(args), args.overwrite, log, card=_card(args))
            log(f"wrote {args.output_dir}/metrics.json in {time.time() - started:.0f} s")
        elif args.command == "predict":
            given = args.max_length is not None
            if not given:
                args.max_length = training.TrainOptions.max_length
            training.predict(args.model, args.input, args.output_dir, _options(args), args.overwrite, log,
                             formats=args.formats, max_length_given=given)
            log(f"wrote {args.output_dir}/predictions in {time.time() - started:.0f} s")
        elif args.command == "sweep":
            folders = sweep.sweep(args.model, args.train, args.dev, args.test, args.output_dir, _options(args), args.lrs, args.seeds, log,
                                  card=_card(args), devices=args.devices or ())
            print(sweep_report.write([args.output_dir], args.output_dir))
            log(f"{len(folders)} runs; wrote {args.output_dir}/report.md, report.json and dev_f1.png in {time.time() - started:.0f} s")
        else:
            if args.output_dir is None and len(args.runs) > 1:
                raise NERFormatError("report: several RUN_DIRs; give --output-dir for the report")
            output = args.output_dir or args.runs[0]
            print(sweep_report.write(args.runs, output))
            log(f"wrote {output}/report.md, report.json and dev_f1.png")
    except NERFormatError as error:
        print(f"biofairseq-ner: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
