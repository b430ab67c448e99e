#!/usr/bin/env python
"""Entity break-out rate of one or more vocabularies on an NER corpus (BioMegatron's Table 3).

The rate is #subword tokens / #words over entity mentions, per entity type and over all mentions, and the
same over all text of the corpus; words are Moses tokens (sacremoses) for --lang. A lower rate means the
vocabulary keeps the domain's entities whole. Vocabularies are folders from train_vocab.py (or data-bins
from binarize.sh), named NAME=DIR or by their folder name.
"""

import argparse
import json
import sys
from pathlib import Path

try:  # run by a Python without the project (the venv not active): one line, not a traceback
    import biofairseq  # noqa: F401
except ModuleNotFoundError as missing:
    sys.exit(f"{sys.argv[0]}: error: {missing.name} not found; run 'make install' and 'source .venv/bin/activate', "
             "then run this again")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", nargs="+", required=True, metavar="[NAME=]DIR", help="vocabularies to compare")
    p.add_argument("--ner", required=True, help="a BRAT folder (.txt + .ann) or a CoNLL file (token<TAB>BIO tag)")
    p.add_argument("--lang", required=True, help="language of the Moses word tokenizer (es, en, ...)")
    p.add_argument("--output", help="also write the table here (.md) and the numbers beside it (.json)")
    args = p.parse_args(argv)
    vocabs = [tuple(v.split("=", 1)) if "=" in v else (Path(v).name, v) for v in args.vocab]
    if not Path(args.ner).exists():
        sys.exit(f"error: {args.ner}: no such file or folder; give a BRAT folder or a CoNLL file")
    from biofairseq.recipe.breakout import NERFormatError, breakout_rates, format_rates
    from biofairseq.corpus.vocab import VocabError

    try:
        rows = breakout_rates(vocabs, args.ner, args.lang)
    except (NERFormatError, VocabError) as e:
        sys.exit(f"error: {e}")
    table = format_rates(rows, [n for n, _ in vocabs])
    print(table)
    if args.output:
        from biofairseq.atomic import write_text

        out = Path(args.output)
        write_text(out.with_suffix(".md"), f"Entity break-out rate (subword tokens per Moses word), {args.ner}\n\n{table}\n")
        write_text(out.with_suffix(".json"), json.dumps(rows, indent=1) + "\n")  # last: its presence means done


if __name__ == "__main__":
    from biofairseq.interrupts import ends_in_one_line

    with ends_in_one_line("vocab_stats.py", "nothing was written; run the same command again"):
        main()
