"""NER data in the annotation tools' formats against BRAT: PharmaCoNER converted from BRAT to doccano, Label Studio
and Prodigy by `biofairseq-ner convert --to`, read back (the same mentions, sentences and tags?), the time each read
takes against BRAT's, and one seed of fine-tuning on each (the same F1 to the digit?).

    .venv/bin/python benchmarks/ner_formats.py --output benchmarks/results/ner_formats.md   # the bundled sample (CPU: 6 min)
    BIOFAIRSEQ_SHARED=<shared> python benchmarks/ner_formats.py --output ...               # the full release
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import corpora
from ner_finetuning import make_model

REPO = Path(__file__).resolve().parents[1]
_, PHARMACONER = corpora()
SPLITS = {"train": "train", "dev": "valid", "test": "test"}
FORMATS = {"doccano": "doccano.jsonl", "labelstudio": "labelstudio.json", "prodigy": "prodigy.jsonl"}


def ner(*args):
    from biofairseq.finetune import cli

    status = cli.main([str(a) for a in args])
    if status:
        sys.exit(f"biofairseq-ner {' '.join(map(str, args))}: exit {status}")


def timed_read(path, rounds):
    from biofairseq.finetune import data

    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        dataset = data.read(path)
        seconds.append(time.perf_counter() - start)
    return dataset, statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="reads of each file; the median is kept")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None, help="write the result to this Markdown file")
    args = parser.parse_args()

    import torch
    import transformers

    from biofairseq.finetune import brat

    torch.set_num_threads(min(torch.get_num_threads(), os.cpu_count() or 1))
    tmp = Path(tempfile.mkdtemp(prefix="ner-formats-"))
    paths = {"brat": {role: PHARMACONER / split for role, split in SPLITS.items()}}
    for fmt, name in FORMATS.items():
        paths[fmt] = {}
        for role, split in SPLITS.items():
            out = tmp / fmt / role / name
            out.parent.mkdir(parents=True)
            ner("convert", PHARMACONER / split, out, "--to", fmt)
            paths[fmt][role] = out
    rows, same = [], True
    for role in SPLITS:
        gold, base = timed_read(paths["brat"][role], args.rounds)
        tagged = [(s.doc, s.tokens, s.tags) for s in gold.sentences]
        rows.append([role, "brat", f"{len(gold.documents):,}", f"{len(brat.mentions(gold.documents)):,}", f"{base * 1000:.1f}", "1.00x", "-"])
        for fmt in FORMATS:
            back, seconds = timed_read(paths[fmt][role], args.rounds)
            equal = (brat.mentions(back.documents) == brat.mentions(gold.documents)
                     and [(s.doc, s.tokens, s.tags) for s in back.sentences] == tagged)
            same &= equal
            rows.append([role, fmt, f"{len(back.documents):,}", f"{len(brat.mentions(back.documents)):,}",
                         f"{seconds * 1000:.1f}", f"{seconds / base:.2f}x", "yes" if equal else "**no**"])
        print(f"{role}: read and compared", flush=True)

    model = make_model(tmp, "tiny", 4000)
    scores = {}
    for fmt in ("brat", *FORMATS):
        out = tmp / "runs" / fmt
        start = time.perf_counter()
        ner("train", "--model", model, "--train", paths[fmt]["train"], "--dev", paths[fmt]["dev"], "--test",
            paths[fmt]["test"], "--output-dir", out, "--epochs", args.epochs, "--seed", args.seed, "--lr", args.lr,
            "--batch-size", 8, "--gradient-accumulation", 1, "--max-length", 128)
        metrics = json.loads((out / "metrics.json").read_text())
        scores[fmt] = (metrics["test"]["f1"], metrics["dev"]["f1"], metrics["train_loss"], time.perf_counter() - start)
        print(f"{fmt}: test F1 {scores[fmt][0]!r}", flush=True)
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {os.cpu_count()} cores"
    lines = [
        "# NER data in the annotation tools' formats against BRAT",
        "",
        f"Made by `python benchmarks/ner_formats.py {' '.join(sys.argv[1:])}` on {device}; PharmaCoNER "
        f"({'the full release' if os.environ.get('BIOFAIRSEQ_SHARED') else 'the sample the repository ships'}), each "
        "split converted from BRAT by `biofairseq-ner convert SPLIT OUT --to FORMAT` (gold mentions as read, nested and "
        f"overlapping ones included) and read back; torch {torch.__version__}, transformers {transformers.__version__}, "
        f"Python {platform.python_version()}.",
        "",
        f"## Reading (median of {args.rounds} reads)",
        "",
        "| split | format | documents | mentions | read ms | vs BRAT | mentions, sentences and tags equal to BRAT's |",
        "|---|---|---:|---:|---:|---:|---|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        f"## Fine-tuning on each (a random 2 x 128 RoBERTa, seed {args.seed}, {args.epochs} epochs, lr {args.lr:g}, "
        "batch 8, 128 sub-tokens)",
        "",
        "| trained and scored on | test F1 (BRAT scorer) | dev F1 | training loss | minutes |",
        "|---|---:|---:|---:|---:|",
        *(f"| {fmt} | {t!r} | {d!r} | {loss!r} | {s / 60:.1f} |" for fmt, (t, d, loss, s) in scores.items()),
        "",
        f"Every format reads back BRAT's mentions, sentences and tags: **{'yes' if same else 'no'}**. "
        f"The same test F1 and training loss to the last digit: "
        f"**{'yes' if len({(t, loss) for t, _, loss, _ in scores.values()}) == 1 else 'no'}**.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.output:
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
