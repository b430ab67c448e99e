"""Parity of every family's conversion, both ways: from-hf of a transformers folder, then to-hf of what it wrote.

Random stand-ins of the published families at their defaults (LayerNorm epsilon 1e-12, two token types, 512
positions, a cased WordPiece vocab.txt in BERT's layout learned on the bundled clinical cases; biofairseq.dev.samples),
every weight moved off its initial value, at a shape (--shape tiny: 2 x 128; base: 12 x 768 with 12 heads, ELECTRA's
generator 256 wide). Each conversion's own parity check (7 sentences, one masked, a padded batch, fp32) gives the
largest absolute difference of the logits and of the last hidden states over real tokens; the table holds them.

    python benchmarks/family_parity.py --shape base --output benchmarks/results/family_parity.md
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from measure import BIN, corpora, parser, publish, run

FAMILIES = ("bert", "bert-pretraining", "megatron-bert", "electra")
SHAPES = {"tiny": {}, "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)}


def main():
    p = parser(__doc__)
    p.add_argument("--shape", choices=SHAPES, default="tiny")
    p.add_argument("--vocab-size", type=int, default=8000)
    args = p.parse_args()
    from biofairseq.dev.samples import read_documents, standin, wordpiece_vocab

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        vocab = wordpiece_vocab(root / "vocab.txt", [p for doc in read_documents(0, 1000, corpora()[0]) for p in doc],
                                args.vocab_size)
        for family in FAMILIES:
            folder = standin(family, root / family, vocab, **SHAPES[args.shape])
            generator = ["--generator"] if family == "electra" else []
            for direction, command in (("from-hf", ["from-hf", folder, root / f"{family}-fairseq"]),
                                       ("to-hf", ["to-hf", root / f"{family}-fairseq" / "model.pt", root / f"{family}-hf",
                                                  *generator])):
                start = time.perf_counter()
                run([BIN / "biofairseq-convert", *command])
                seconds = time.perf_counter() - start
                made = json.loads((Path(command[2]) / "conversion.json").read_text())
                towers = [("", made["parity"])]
                if made.get("generator_parity"):
                    towers.append((" generator", made["generator_parity"]))
                if made.get("generator"):
                    towers.append((" generator", made["generator"]["parity"]))
                for tower, parity in towers:
                    rows.append((f"{family}{tower}", direction, made.get("transformers_class"), made.get("fairseq_flags"),
                                 parity, seconds))
                print(rows[-1], flush=True)
    lines = [f"# Conversion parity of the published families, both ways ({args.shape} shape)", "",
             f"Command: `python benchmarks/family_parity.py {' '.join(sys.argv[1:])}`", "",
             f"Random stand-ins at the families' defaults, {args.shape} shape, a cased WordPiece of {args.vocab_size} "
             f"entries; from-hf of each folder, then to-hf of its model.pt; {os.cpu_count()} CPU cores. Each row: the "
             "conversion's own parity check, tolerance 1e-4.", "",
             "| stand-in | direction | ids | max abs. logit difference | max abs. hidden-state difference | seconds |",
             "|---|---|---|---|---|---|"]
    for name, direction, _, _, parity, seconds in rows:
        lines.append(f"| {name} | {direction} | {'identical' if parity['ids_identical'] else 'differ'} | "
                     f"{parity['max_abs_diff_logits']:.2e} | {parity['max_abs_diff_hidden']:.2e} | {seconds:.1f} |")
    flags = {name: made_flags for name, direction, _, made_flags, _, _ in rows if direction == "from-hf" and made_flags}
    lines += ["", "fairseq flags from-hf gave: " + "; ".join(f"{n}: `{' '.join(f)}`" for n, f in flags.items())]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
