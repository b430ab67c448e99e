#!/usr/bin/env python
"""Raw sources -> cleaned documents: train.txt, valid.txt and stats.json, as fairseq-lm text.

Each --source NAME=PATH is a file or a folder (searched recursively) of JSON lines (.jsonl/.json/.ndjson, the
text in --text-field), plain text (.txt: documents separated by blank lines, or one a line with --text-docs line,
or one a file with --text-docs file) or BRAT (.txt beside .ann: the .txt side), optionally compressed (.gz/.bz2/.xz/.zst).
Each document is repaired (ftfy, NFC), split into sentences, checked for its language, filtered for noisy
sentences and deduplicated, per source and then across sources. The output has one sentence per line and a
blank line between documents; the --valid-docs documents of smallest hash (seeded with --seed) go to valid.txt,
so that cleaning again with one more source keeps most of them.

Shards run in parallel (--workers) or as a Slurm job array (--launcher slurm, through submitit), and so does the
decompression of large compressed files into shards; a run restarted with the same arguments redoes only
unfinished shards, and the outputs appear atomically.
"""

import argparse
import sys

try:  # run by a Python without the project (the venv not active): one line, not a traceback
    import biofairseq  # noqa: F401
except ModuleNotFoundError as missing:
    sys.exit(f"{sys.argv[0]}: error: {missing.name} not found; run 'make install' and 'source .venv/bin/activate', "
             "then run this again")

from biofairseq.arguments import OneLineParser, at_least
from biofairseq.corpus.checks import language_problem, output_problem, source_problem
from biofairseq.corpus.cleaning import add_arguments, config_from_args
from biofairseq.corpus.sources import TEXT_DOCS, InputError


def source(value):
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{value!r}: expected NAME=PATH, e.g. --source scielo=raw/scielo.jsonl.gz")
    return name, path


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", dest="sources", action="append", type=source, required=True, metavar="NAME=PATH",
                   help="a named input file or folder; repeat for several sources (statistics are kept per source)")
    p.add_argument("--output-dir", required=True, help="where train.txt, valid.txt and stats.json go")
    p.add_argument("--lang", required=True,
                   help="the target language, a code of fastText's lid.176 (ISO 639-1 where there is one: es, en, ...)")
    p.add_argument("--valid-docs", type=at_least(0), default=2000, help="documents held out for validation (default: 2000)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the document hash that picks the --valid-docs of smallest hash for validation: adding "
                        "a source changes the valid set only where one of its documents ranks among them (default: 1)")
    p.add_argument("--workers", type=at_least(1), default=1, help="parallel shards (local processes or array tasks)")
    p.add_argument("--text-field", default="text", help="the text field of JSON lines (default: text)")
    p.add_argument("--text-docs", choices=TEXT_DOCS, default="blank-line",
                   help="plain text: documents separated by blank lines (nothing but spaces, tabs, CR; default), "
                        "one document per line, or one per file")
    p.add_argument("--shard-size", type=at_least(1), default=64 << 20, help="bytes of raw input per shard (default: 64 MiB)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first unreadable file or record (default: skip it and count it in the stats)")
    p.add_argument("--overwrite", action="store_true", help="start again, discarding earlier outputs in --output-dir")
    p.add_argument("--keep-work", action="store_true", help="keep the cleaned shards in OUTPUT_DIR/work")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    p.add_argument("--dedup-bucket-hashes", type=at_least(1), default=1 << 24,
                   help="most hashes a deduplicating worker holds at once, however often a sentence repeats, about "
                        "55 bytes each (default: 2^24, about 0.9 GiB a worker); the results do not depend on it")
    cluster = p.add_argument_group("running shards as a job array (submitit)")
    cluster.add_argument("--launcher", choices=("local", "slurm", "submitit-local"), default="local",
                         help="local processes (default), a Slurm job array, or submitit's local executor: for the "
                              "cleaning of the shards and, before it, the decompression of each large compressed file "
                              "(a task a file; under slurm none of it on the submitting host)")
    cluster.add_argument("--slurm-partition", help="Slurm partition")
    cluster.add_argument("--slurm-time", type=at_least(1), default=240,
                         help="minutes per array task: a shard's cleaning, or a large compressed file's decompression "
                              "(default: 240)")
    cluster.add_argument("--slurm-mem-gb", type=int, default=None, help="memory per array task")
    cluster.add_argument("--slurm-array-size", type=at_least(1), default=1000,
                         help="shards per job array, below the cluster's MaxArraySize (Slurm's default: 1001); more "
                              "shards are submitted as several arrays (default: 1000)")
    add_arguments(p)
    args = p.parse_args(argv)
    names = [n for n, _ in args.sources]
    if len(set(names)) != len(names):
        p.error(f"--source names must be unique: {names}")
    # every setting before any work: a wrong one would otherwise surface as "0 documents left" at the end
    problems = [source_problem(name, path, args.text_docs, args.text_field) for name, path in args.sources]
    problems += [output_problem(args.output_dir, args.sources),
                 args.langid != "off" and language_problem(args.lang, args.min_words)]
    problem = next((x for x in problems if x), None)
    if problem:
        p.error(problem)
    return args


def main(argv=None):
    args = parse_args(argv)
    from biofairseq.corpus.pipeline import clean_corpus, format_table

    try:
        stats = clean_corpus(args, config_from_args(args))
    except InputError as e:
        sys.exit(f"error: {e}")
    for warning in stats.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print(format_table(stats))
        for name, errors in stats.get("errors", {}).items():
            print(f"{name}: {len(errors)} unreadable input(s) skipped, e.g. {errors[0]}", file=sys.stderr)
        print(f"{args.output_dir}: {stats['train_docs']:,} train and {stats['valid_docs']:,} valid documents")


if __name__ == "__main__":
    from biofairseq.interrupts import ends_in_one_line

    with ends_in_one_line("clean_corpus.py", "finished shards are kept; the same command cleans only the shards left"):
        main()
