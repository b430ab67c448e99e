"""Binarizing with a published model's WordPiece vocabulary: preprocess/binarize.sh against fairseq's own path.

fairseq's path is its --bpe bert encoder (transformers' BertTokenizer over the model's vocab.txt), run over the text
in --workers processes as fairseq's examples run their BPE encoders, then fairseq-preprocess --only-source --srcdict.
binarize.sh goes from the tokenizer's ids to fairseq's format in one pass (biofairseq.corpus.binarize). Both make the
same train and valid .bin and .idx files, checked byte for byte every round. The text: the bundled clinical cases
(or the full release under BIOFAIRSEQ_SHARED), one paragraph a line, repeated to at least --mb MB; the vocabulary: a
cased WordPiece vocab.txt of --vocab-size learned on it, in a BERT's layout, through biofairseq-convert from-hf of a
tiny BERT, as a recipe's INIT_FROM gets it. Each command runs as its own process; interleaved rounds.

    python benchmarks/wordpiece_binarize.py --mb 20 --rounds 3 --output benchmarks/results/wordpiece_binarize.md
"""

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from measure import BIN, REPO, case_lines, corpora, parser, publish, run

ENCODE = """
import sys
from argparse import Namespace
from multiprocessing import Pool

def start(vocab):
    global bpe
    from fairseq.data import encoders
    bpe = encoders.build_bpe(Namespace(bpe="bert", bpe_vocab_file=vocab, bpe_cased=True))

def encode(lines):
    from biofairseq.text.documents import is_blank
    out = []
    for line in lines:
        blank = is_blank(line)
        symbols = "" if blank else bpe.encode(line)
        if symbols or blank:
            out.append(symbols + "\\n")
    return "".join(out)

vocab, src, dest, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lines = open(src, encoding="utf-8", newline="\\n").read().split("\\n")[:-1]
chunks = [lines[i:i + 2000] for i in range(0, len(lines), 2000)]
with Pool(workers, start, (vocab,)) as pool, open(dest, "w", encoding="utf-8") as f:
    for text in pool.imap(encode, chunks):
        f.write(text)
"""


def texts(root, mb):
    """clean/{train,valid}.txt: the cases, a paragraph a line and documents apart, train repeated to mb MB."""
    docs = ["\n".join(p.strip() for p in json.loads(line)["text"].split("\n") if p.strip()) for line in case_lines(corpora()[0])]
    clean = root / "clean"
    clean.mkdir()
    train = "".join(d + "\n\n" for d in docs[len(docs) // 10:])
    copies = max(1, round(mb * 1e6 / len(train.encode("utf-8"))))
    (clean / "train.txt").write_text(train * copies, encoding="utf-8")
    (clean / "valid.txt").write_text("".join(d + "\n\n" for d in docs[: len(docs) // 10]), encoding="utf-8")
    return clean, [p for d in docs for p in d.split("\n")]


def main():
    p = parser(__doc__, rounds=3)
    p.add_argument("--mb", type=float, default=20, help="training text to binarize (MB)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="processes of either path")
    args = p.parse_args()
    from biofairseq.dev.samples import standin, wordpiece_vocab

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clean, paragraphs = texts(root, args.mb)
        mb = sum((clean / f"{s}.txt").stat().st_size for s in ("train", "valid")) / 1e6
        vocab_txt = wordpiece_vocab(root / "vocab.txt", paragraphs, args.vocab_size)
        run([BIN / "biofairseq-convert", "from-hf", standin("bert", root / "bert", vocab_txt), root / "vocab"])
        times = {"binarize.sh": [], "fairseq --bpe bert + fairseq-preprocess": []}
        for r in range(args.rounds):
            ours = root / f"ours{r}"
            times["binarize.sh"].append(run(["bash", REPO / "preprocess/binarize.sh", clean, root / "vocab", ours,
                                             args.workers])[0])
            theirs = root / f"theirs{r}"
            theirs.mkdir()
            seconds = 0.0
            for split in ("train", "valid"):
                seconds += run([sys.executable, "-c", ENCODE, root / "vocab" / "vocab.txt", clean / f"{split}.txt",
                                theirs / f"{split}.bert", args.workers])[0]
            seconds += run([BIN / "fairseq-preprocess", "--only-source", "--srcdict", root / "vocab" / "dict.txt",
                            "--trainpref", theirs / "train.bert", "--validpref", theirs / "valid.bert",
                            "--destdir", theirs, "--workers", args.workers])[0]
            times["fairseq --bpe bert + fairseq-preprocess"].append(seconds)
            for name in ("train.bin", "train.idx", "valid.bin", "valid.idx"):
                if (ours / name).read_bytes() != (theirs / name).read_bytes():
                    sys.exit(f"round {r + 1}: {name} differs between the two paths")
            print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.1f} s" for n, t in times.items()) + "; same files", flush=True)
    base, ours = times["fairseq --bpe bert + fairseq-preprocess"], times["binarize.sh"]
    ratios = [b / o for b, o in zip(base, ours)]
    lines = [
        "# WordPiece binarizing: binarize.sh against fairseq's --bpe bert path",
        "",
        f"Command: `python benchmarks/wordpiece_binarize.py {' '.join(sys.argv[1:])}`",
        "",
        f"{mb:.1f} MB of cleaned clinical cases ({corpora()[0].name}, train repeated), a cased WordPiece vocabulary of "
        f"{args.vocab_size} entries (BERT's layout, through from-hf), {args.workers} processes for each path, "
        f"{os.cpu_count()} CPU cores, {args.rounds} interleaved rounds; every round both made the same train and valid "
        ".bin and .idx files, byte for byte. Medians (range).",
        "",
        "| path | seconds | MB/s |",
        "|---|---|---|",
        *(f"| {n} | {statistics.median(t):.1f} ({min(t):.1f} to {max(t):.1f}) | {mb / statistics.median(t):.2f} |"
          for n, t in times.items()),
        "",
        f"binarize.sh's speed over fairseq's path: **{statistics.median(ratios):.2f}x** (rounds {min(ratios):.2f} to "
        f"{max(ratios):.2f}).",
        "",
        "Per round (s): " + json.dumps(times),
    ]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
