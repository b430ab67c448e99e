"""biofairseq-convert: fairseq checkpoints to transformers folders and back, parity-checked, in five families.

RoBERTa, BERT, Megatron-BERT, ELECTRA and ModernBERT (docs/conversion.md).

  biofairseq-convert to-hf CHECKPOINT OUTPUT_DIR [--dict dict.txt] [--vocab VOCAB_DIR] [--generator]
  biofairseq-convert from-hf HF_DIR OUTPUT_DIR [--generator GENERATOR_DIR] [--generator-fraction F]
  biofairseq-convert extend-vocab FROM_HF_DIR OUTPUT_DIR --text TRAIN.txt --size N [--valid VALID.txt]

OUTPUT_DIR appears only when the conversion and its parity check have passed.
"""

import json
import sys
import time
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

from biofairseq.arguments import OneLineParser




def _parser() -> OneLineParser:
    parser = OneLineParser(prog="biofairseq-convert", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    to_hf = commands.add_parser(
        "to-hf", help="fairseq checkpoint -> transformers directory (config, safetensors, tokenizer), as its family",
        description="Converts a fairseq RoBERTa checkpoint (bio_roberta_*, roberta_base/large, pre-LN) into a "
        "transformers directory that AutoModelForMaskedLM, AutoTokenizer and pipeline('fill-mask') load offline: a "
        "RoBERTa-family class, or BertForMaskedLM / MegatronBertForMaskedLM with its own vocab.txt where it was "
        "continued from a BERT or Megatron-BERT (a WordPiece vocabulary); an ELECTRA checkpoint (electra_*, "
        "bio_electra_base) into its discriminator (ElectraForPreTraining, which AutoModelForTokenClassification "
        "fine-tunes) and, with --generator, its generator (ElectraForMaskedLM); a ModernBERT checkpoint "
        "(bio_modernbert_*) into ModernBertForMaskedLM.",
    )
    to_hf.add_argument("checkpoint", type=Path, help="fairseq checkpoint (.pt)")
    to_hf.add_argument("output", type=Path, metavar="OUTPUT_DIR", help="transformers directory to create")
    to_hf.add_argument("--dict", type=Path, dest="dict_path", default=None,
                       help="dict.txt the model was trained with (default: the data-bin named in the checkpoint)")
    to_hf.add_argument("--generator", action="store_true",
                       help="ELECTRA: also write the generator, as ElectraForMaskedLM, in OUTPUT_DIR/generator "
                       "(OUTPUT_DIR holds the discriminator, as ElectraForPreTraining)")
    to_hf.add_argument("--vocab", type=Path, default=None,
                       help="vocabulary folder (preprocess/train_vocab.py's, or encoder.json + vocab.bpe) or "
                       "SentencePiece .model (default: the checkpoint's --bpe files, then the data-bin's)")
    card = to_hf.add_argument_group("model card (OUTPUT_DIR/README.md, Hugging Face Hub metadata)")
    card.add_argument("--language", action="append", default=None, metavar="CODE",
                      help="language of the training text, ISO 639-1 (es, en); repeat for several")
    card.add_argument("--license", default=None, help="the model's license, a Hub identifier (default: other)")
    card.add_argument("--dataset", action="append", dest="datasets", default=None, metavar="NAME",
                      help="a training corpus, by name or Hub dataset id; repeat for several")
    from_hf = commands.add_parser(
        "from-hf", help="transformers RoBERTa, BERT, Megatron-BERT, ELECTRA or ModernBERT directory -> fairseq "
        "checkpoint, dict.txt and vocabulary",
        description="Converts a transformers RoBERTa-family, BERT (BertForMaskedLM, BertForPreTraining), Megatron-BERT "
        "or ModernBERT masked LM, or an ELECTRA discriminator with its generator, into OUTPUT_DIR/model.pt, dict.txt "
        "and the vocabulary files (ids renumbered for fairseq's dictionary where the special tokens are not at 0-3; a "
        "WordPiece vocab.txt kept), so that fairseq-train --task document_mlm (or electra) continues pretraining "
        "from it, as a recipe's INIT_FROM does.",
    )
    from_hf.add_argument("hf_dir", type=Path, help="transformers model directory")
    from_hf.add_argument("output", type=Path, metavar="OUTPUT_DIR", help="folder to create")
    from_hf.add_argument("--generator", type=Path, default=None,
                         help="ELECTRA: the generator's folder (ElectraForMaskedLM; default: HF_DIR/generator, as to-hf "
                         "--generator writes it)")
    from_hf.add_argument("--generator-fraction", type=float, default=None,
                         help="ELECTRA without a generator: a fresh one this fraction of the discriminator's width "
                         "(default 1/3, ELECTRA-base's)")
    extend = commands.add_parser(
        "extend-vocab", help="a from-hf folder with its vocabulary extended by the words of your text it cuts most",
        description="Adds up to --size new tokens to the vocabulary of a folder of from-hf (WordPiece: whole words; "
        "byte-level BPE: merges after the existing ones), the words of --text that the vocabulary cuts into several "
        "pieces and that shorten the text most, each new row of the model the mean of its old pieces' rows; every old "
        "id keeps its row. With --valid, checks that lines without a new token give the original's logits and "
        "measures the new tokens' masked-LM loss before any training.",
    )
    extend.add_argument("init", type=Path, metavar="FROM_HF_DIR", help="a folder of biofairseq-convert from-hf (model.pt, dict.txt, vocabulary)")
    extend.add_argument("output", type=Path, metavar="OUTPUT_DIR", help="folder to create")
    extend.add_argument("--text", type=Path, required=True, help="the training text the new words are counted in")
    extend.add_argument("--size", type=int, required=True, help="the most new tokens to add")
    extend.add_argument("--valid", type=Path, default=None, help="held-out text for the checks (default: none)")
    extend.add_argument("--min-count", type=int, default=2, help="a new word's fewest occurrences in --text (default 2)")
    extend.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")
    for command in (to_hf, from_hf):
        command.add_argument("--no-verify", action="store_true",
                             help="skip the parity check (same ids, logits and hidden states within 1e-4)")
        command.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR if it exists")
    return parser


def _quiet_libraries() -> None:
    """fairseq, hydra and transformers log at INFO/DEBUG while loading; the command prints its own summary."""
    import logging
    import warnings

    for name in ("fairseq", "hydra", "biofairseq"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_arguments(args: Namespace) -> str | None:
    """Mistakes found from the arguments alone, before torch, fairseq and transformers load: one line, or None."""
    source = {"to-hf": "checkpoint", "from-hf": "hf_dir", "extend-vocab": "init"}[args.command]
    source = getattr(args, source)
    output = args.output.resolve()
    if args.command == "extend-vocab":
        for name in ("model.pt", "dict.txt", "conversion.json"):
            if not (args.init / name).is_file():
                return f"{args.init}: no {name}; give a folder of biofairseq-convert from-hf"
        for flag, path in (("--text", args.text), ("--valid", args.valid)):
            if path is not None and not path.is_file():
                return f"{flag} {path}: no such file; give a text file, a document a line (clean_corpus.py's train.txt)"
        if args.size < 1:
            return f"--size {args.size}: give the most new tokens to add, at least 1"
        if args.min_count < 1:
            return f"--min-count {args.min_count}: give at least 1"
    elif args.command == "to-hf":
        if args.checkpoint.is_dir():
            return f"{args.checkpoint}: a folder; give the checkpoint file in it (for example checkpoint_best.pt)"
        if not args.checkpoint.is_file():
            return f"{args.checkpoint}: no such checkpoint file; give the path of a fairseq .pt checkpoint"
        with open(args.checkpoint, "rb") as f:
            head = f.read(4)
        if head != b"PK\x03\x04" and not head.startswith(b"\x80"):  # torch.save's zip, or an old pickle
            return (f"{args.checkpoint}: not a PyTorch checkpoint (neither torch.save's zip nor a pickle); give the "
                    ".pt file fairseq-train wrote (SAVE_DIR/checkpoint_best.pt)")
        if args.dict_path is not None and not args.dict_path.is_file():
            return f"{args.dict_path}: no such dictionary file; --dict takes the dict.txt the model was trained with"
        if args.vocab is not None and not args.vocab.exists():
            return f"{args.vocab}: no such file or folder; --vocab takes the vocabulary folder or a SentencePiece .model"
    else:
        if not args.hf_dir.is_dir():
            return f"{args.hf_dir}: no such folder; give a transformers model folder (config.json and weights: save_pretrained's output)"
        if not (args.hf_dir / "config.json").is_file():
            return f"{args.hf_dir}: no config.json; give a transformers model folder (save_pretrained's output)"
        if args.generator is not None and not (args.generator / "config.json").is_file():
            return (f"{args.generator}: no config.json; --generator takes the ELECTRA generator's transformers folder "
                    "(ElectraForMaskedLM)")
        if args.generator_fraction is not None and not 0 < args.generator_fraction <= 1:
            return f"--generator-fraction {args.generator_fraction}: give a fraction above 0 and at most 1, e.g. 0.333"
    if output.exists() and not args.overwrite:
        return f"{output}: already exists; choose another output or pass --overwrite"
    if output.exists() and not output.is_dir():
        return f"{output}: a file; the output is a folder to create: choose another path"
    if _inside(source.resolve(), output) or (args.command != "to-hf" and _inside(output, source.resolve())):
        return f"{args.output}: holds (or is inside) the input {source}; choose an output folder elsewhere"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = check_arguments(args)
    if problem:
        print(f"biofairseq-convert: error: {problem}", file=sys.stderr)
        return 1
    _quiet_libraries()
    from biofairseq.atomic import staged_folder
    from biofairseq.checkpoints import CheckpointError
    from biofairseq.convert import ConvertError, from_hf, to_hf

    log = lambda message: print(f"biofairseq-convert: {message}", flush=True)
    start = time.time()
    try:
        with staged_folder(args.output, args.overwrite, ConvertError) as staging:
            if args.command == "to-hf":
                card = {"name": args.output.resolve().name, "language": args.language, "license": args.license,
                        "datasets": args.datasets}
                report = to_hf.convert(args.checkpoint, staging, args.dict_path, args.vocab, not args.no_verify, log,
                                       args.generator, card)
            elif args.command == "extend-vocab":
                from biofairseq.convert import extend

                report = extend.extend(args.init, staging, args.output.resolve(), args.text, args.size, args.valid,
                                       args.min_count, log)
            else:
                report = from_hf.convert(args.hf_dir, staging, args.output.resolve(), not args.no_verify, log,
                                         args.generator, args.generator_fraction)
            report["seconds"] = round(time.time() - start, 1)
            if args.command != "extend-vocab":  # it writes its own: the from-hf record it extends
                (staging / "conversion.json").write_text(json.dumps(report, indent=1) + "\n")
    except (ConvertError, CheckpointError) as error:
        print(f"biofairseq-convert: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a file that cannot be read or written (permissions, a full disk)
        where = error.filename or args.output
        print(f"biofairseq-convert: error: {where}: {error.strerror or error}; check the path and its permissions "
              "(the output goes to a folder beside OUTPUT_DIR, renamed at the end)", file=sys.stderr)
        return 1
    log(f"wrote {args.output} in {time.time() - start:.1f} s")
    if args.command in ("from-hf", "extend-vocab"):
        out = args.output
        from biofairseq.convert import families

        if args.command == "extend-vocab":  # the from-hf record it extends: the family and its flags
            report = json.loads((out / "conversion.json").read_text())

        task = families.named(report["family"]).continue_task
        package = Path(__file__).resolve().parents[1]  # biofairseq/, the user dir; preprocess/ beside it in a clone
        binarize = package.parent / "preprocess" / "binarize.sh"
        binarize = f"bash {binarize}" if binarize.is_file() else "bash preprocess/binarize.sh (in a clone of biofairseq)"
        log(
            f"continue pretraining with: {binarize} CLEAN_DIR {out.resolve()} DATA_BIN && biofairseq-train DATA_BIN "
            f"--task {task} {' '.join(report['fairseq_flags'])} --restore-file {out.resolve()}/model.pt "
            "--reset-optimizer --reset-dataloader --reset-meters --reset-lr-scheduler plus your batch, optimizer and "
            "schedule flags (docs/conversion.md has a whole command); or give the transformers folder to a recipe as "
            "INIT_FROM, which does all of this"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
