#!/usr/bin/env python
"""Raw sources -> cleaned documents: train.txt, valid.txt and stats.json, as fairseq-lm text.

Each --source NAME=PATH is a file or a folder (searched recursively) of JSON lines (.jsonl/.json/.ndjson, the
text in --text-field), plain text (.txt: documents separated by blank lines, or one a line with --text-docs line,
or one a file with --text-docs file) or BRAT (.txt beside .ann: the .txt side), optionally compressed (.gz/.bz2/.xz/.zst).
Each document is repaired (ftfy, NFC), split into sentences, checked for its language, filtered for noisy
sentences and deduplicated, per source and then across sources. The output has one sentence per line and a
blank line between documents; the --valid-docs documents of smallest hash (seeded with --seed) go to valid.txt,
so that cleaning again with one more source keeps most of them.

Every stage (decompressing large compressed files into shards, cleaning the shards, deduplication, filtering the
shards of their repeats, the split) runs as independent jobs in parallel (--workers) or as Slurm job arrays
(--launcher slurm, through submitit), the submitting host reading none of the corpus; a run restarted with the same
arguments redoes only unfinished jobs, and the outputs appear atomically.
"""

import argparse
import sys

try:  # run by a Python without the project (the venv not active): one line, not a traceback
    import biofairseq  # noqa: F401
except ModuleNotFoundError as missing:
    sys.exit(f"{sys.argv[0]}: error: {missing.name} not found; run 'make install' and 'source .venv/bin/activate', "
             "then run this again")

from biofairseq.arguments import OneLineParser
from biofairseq.corpus import options
from biofairseq.corpus.checks import language_problem, launcher_problem, output_problem, source_problem
from biofairseq.corpus.cleaning import add_arguments, config_from_args
from biofairseq.corpus.sources import InputError


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_arguments(p)
    add_arguments(p)
    args = p.parse_args(argv)
    names = [n for n, _ in args.sources]
    if len(set(names)) != len(names):
        p.error(f"--source names must be unique: {names}")
    for name, level in args.source_langid or ():
        if name not in names:
            p.error(f"--source-langid {name}={level}: no --source is named {name}; use one of: {', '.join(names)}")
    # every setting before any work: a wrong one would otherwise surface as "0 documents left" at the end
    problems = [source_problem(name, path, args.text_docs, args.text_field) for name, path in args.sources]
    problems += [launcher_problem(args.launcher), output_problem(args.output_dir, args.sources),
                 args.langid != "off" and language_problem(args.lang, args.min_words)]
    problem = next((x for x in problems if x), None)
    if problem:
        p.error(problem)
    return args


def main(argv=None):
    args = parse_args(argv)
    from biofairseq.corpus.pipeline import clean_corpus, format_table

    try:
        stats = clean_corpus(options.options_from_args(args), config_from_args(args))
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
