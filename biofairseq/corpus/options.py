"""What one cleaning run is asked to do, as one typed object: its fields, with their help, make clean_corpus.py's
flags (the cleaning steps' own switches are CleaningConfig's), and the pipeline reads it by name."""

import argparse
from dataclasses import MISSING, dataclass, field

from biofairseq.arguments import add_fields, at_least, fields_from
from biofairseq.corpus.sources import TEXT_DOCS

CLUSTER = "running shards as a job array (submitit)"


def source(value: str) -> tuple[str, str]:
    """--source NAME=PATH, as (name, path)."""
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAME=PATH, e.g. --source scielo=raw/scielo.jsonl.gz")
    return name, path


def source_langid(value: str) -> tuple[str, str]:
    """--source-langid NAME=LEVEL, as (name, level)."""
    from biofairseq.corpus.cleaning import LANGID_LEVELS

    name, sep, level = value.partition("=")
    if not sep or not name or level not in LANGID_LEVELS:
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAME=LEVEL, LEVEL one of {', '.join(LANGID_LEVELS)}, e.g. "
                                         "--source-langid scielo=sentence")
    return name, level


def _option(help, default=MISSING, **flag):
    """A field and how argparse reads it: flag holds add_argument's keywords (and "flag", "group")."""
    return field(default=default, metadata={"help": help, **flag})


@dataclass
class CorpusOptions:
    sources: list = _option("a named input file or folder; repeat for several sources (statistics are kept per source)",
                            flag="--source", action="append", type=source, required=True, metavar="NAME=PATH")
    output_dir: str = _option("where train.txt, valid.txt and stats.json go", required=True)
    lang: str = _option("the target language, a code of fastText's lid.176 (ISO 639-1 where there is one: es, en, ...)",
                        required=True)
    source_langid: list = _option("--langid for one source, as NAME=sentence for a bilingual source (SciELO's abstracts); "
                                  "repeat for several", flag="--source-langid", action="append", type=source_langid,
                                  default=None, metavar="NAME=LEVEL")
    valid_docs: int = _option("documents held out for validation (default: 2000)", 2000, type=at_least(0))
    seed: int = _option("seed of the document hash that picks the --valid-docs of smallest hash for validation: adding "
                        "a source changes the valid set only where one of its documents ranks among them (default: 1)",
                        1, type=int)
    workers: int = _option("jobs at a time: local processes, or under --launcher slurm the tasks of an array that run "
                           "at once (default: 1)", 1, type=at_least(1))
    text_field: str = _option("the text field of JSON lines (default: text)", "text")
    text_docs: str = _option("plain text: documents separated by blank lines (nothing but spaces, tabs, CR; default), "
                             "one document per line, or one per file", "blank-line", choices=TEXT_DOCS)
    shard_size: int = _option("bytes of raw input per shard (default: 64 MiB, or with several --workers less where "
                              "the input is smaller than 4 shards a worker, so that every worker has work; the outputs "
                              "do not depend on it)",
                              None, type=at_least(1))
    strict: bool = _option("stop at the first unreadable file or record (default: skip it and count it in the stats)",
                           False, action="store_true")
    overwrite: bool = _option("start again, discarding earlier outputs in --output-dir", False, action="store_true")
    keep_work: bool = _option("keep the cleaned shards in OUTPUT_DIR/work", False, action="store_true")
    quiet: bool = _option("no progress bar and no table", False, action="store_true")
    dedup_bucket_hashes: int = _option(
        "most hashes a deduplicating worker holds at once, however often a sentence repeats, about 55 bytes each "
        "(default: 2^24, about 0.9 GiB a worker); the results do not depend on it", 1 << 24, type=at_least(1))
    launcher: str = _option(
        "local processes (default), Slurm job arrays, or submitit's local executor: for every stage, the decompression "
        "of each large compressed file, the cleaning of the shards, deduplication, the filtering of the shards and the "
        "split (under slurm none of them on the submitting host)", "local", choices=("local", "slurm", "submitit-local"),
        group=CLUSTER)
    slurm_partition: str = _option("Slurm partition", None, group=CLUSTER)
    slurm_time: int = _option("minutes per array task: a shard's cleaning, a large compressed file's decompression, "
                              "a deduplication bucket, or the split (default: 240)", 240, type=at_least(1), group=CLUSTER)
    slurm_mem_gb: int = _option("memory per array task", None, type=int, group=CLUSTER)
    slurm_array_size: int = _option("jobs per array (shards, deduplication buckets, files to decompress), below the "
                                    "cluster's MaxArraySize (Slurm's default: 1001); more are submitted as several "
                                    "arrays (default: 1000)", 1000,
                                    type=at_least(1), group=CLUSTER)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag for every CorpusOptions field, in its order: --x-y (or its own "flag"), in its argument group."""
    add_fields(parser, CorpusOptions)


def options_from_args(args: argparse.Namespace) -> CorpusOptions:
    return fields_from(CorpusOptions, args)
