"""How long should an NER window be? One transformers encoder fine-tuned by `biofairseq-ner train` on PharmaCoNER train
and scored on dev (no test: a choice is made on dev), with the pilots' NER setting (LR 1e-3, 10 epochs, 10% warm-up),
in four windowings:

- sentences of up to 128 sub-tokens, 32 a batch: what every pilot's NER uses;
- whole documents cut into windows of 128, 512 and up to 8,192 sub-tokens (the last: whole documents, which a
  long-context encoder such as ModernBERT reads in one window), with batches of 23, 4 and 2 windows.

The batches are chosen so that each windowing makes about as many updates an epoch on PharmaCoNER train (249-268
with the ModernBERT pilot's byte-level BPE of 8,000: its sentences average 33 sub-tokens, its documents 543, and
consecutive windows of a document overlap, `--window-overlap`), one update a step (no accumulation): what differs is
how much of its document a word sees. --batches changes them. Each run is a real `biofairseq-ner train` process (`$PYTHON -m
biofairseq.finetune.cli train`, this Python if PYTHON is unset); --parallel of them run at once (on one GPU they share it). A run folder that holds
metrics.json is kept, so running the command again resumes.

    python benchmarks/ner_windows.py --model runs/pilot_modernbert/hf/modernbert --data path/to/pharmaconer --work runs/ner_windows \
        --seeds 1,2,3 --parallel 4 --output benchmarks/results/ner_windows.md
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from biofairseq.finetune import splits  # noqa: E402
from biofairseq.text.tables import markdown_table  # noqa: E402

WINDOWINGS = {  # name: (context, max length, batch)
    "sentences, 128": ("sentence", 128, 32),
    "documents, windows of 128": ("document", 128, 23),
    "documents, windows of 512": ("document", 512, 4),
    "whole documents (up to 8,192)": ("document", 8192, 2),
}


def command(args, context, max_length, batch, seed, out):
    # $PYTHON as in the recipes (this Python if unset)
    return [os.environ.get("PYTHON") or sys.executable, "-m", "biofairseq.finetune.cli", "train", "--model", str(args.model), "--train", str(args.train), "--dev", str(args.dev),
            "--output-dir", str(out), "--lr", "1e-3", "--seed", str(seed), "--epochs", str(args.epochs),
            "--warmup-ratio", "0.1", "--batch-size", str(batch), "--gradient-accumulation", "1", "--max-length", str(max_length), "--context", context,
            "--no-save-model", *args.extra]


def run(args, name, seed):
    context, max_length, batch = WINDOWINGS[name]
    out = args.work / f"{context}-{max_length}-batch{batch}" / f"seed{seed}"
    if not (out / "metrics.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / f"seed{seed}.log", "w") as log:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
            proc = subprocess.run(command(args, context, max_length, batch, seed, out), stdout=log, stderr=subprocess.STDOUT, env=env)
        if proc.returncode:
            return name, seed, f"failed ({proc.returncode}): see {out.parent / f'seed{seed}.log'}"
    with open(out / "metrics.json") as f:
        return name, seed, json.load(f)


def table(results):
    rows = []
    for name, (context, max_length, batch) in WINDOWINGS.items():
        runs = {seed: m for (n, seed), m in results.items() if n == name}
        if not runs:  # left out by --only
            continue
        done = {s: m for s, m in runs.items() if isinstance(m, dict)}
        f1 = [100 * m["dev"]["f1"] for _, m in sorted(done.items())]
        cells = [f"{100 * m['dev']['f1']:.2f}" if isinstance(m, dict) else m for _, m in sorted(runs.items())]
        spread = f"{statistics.mean(f1):.2f} ± {statistics.stdev(f1):.2f}" if len(f1) > 1 else (f"{f1[0]:.2f}" if f1 else "-")
        some = next(iter(done.values()), None)
        updates = max(h["step"] for h in some["history"]) if some else None
        tokens = some["train_tokens_per_epoch"] if some else None
        seconds = statistics.median(m["train_seconds"] for m in done.values()) if done else None
        rows.append([name, str(batch), f"{tokens / (updates / some['options']['epochs']):,.0f}" if some else "-",
                     f"{updates:,}" if some else "-", ", ".join(cells), f"**{spread}**", f"{seconds:.0f}" if seconds else "-"])
    return markdown_table(["windowing", "windows a batch", "sub-tokens an update", "updates", "dev F1 by seed",
                           "dev F1 mean ± std", "training seconds (median)"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 1)[1])
    parser.add_argument("--model", type=Path, required=True, help="a transformers token-classification-ready encoder folder")
    parser.add_argument("--data", type=Path, required=True, help="PharmaCoNER (or any BRAT set) with train/ and valid/ (or dev/)")
    parser.add_argument("--work", type=Path, required=True, help="where the runs go (kept, so that a rerun resumes)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--epochs", default="10")
    parser.add_argument("--only", default="", help="comma-separated words: run only the windowings whose name holds one")
    parser.add_argument("--batches", default="", help="comma-separated windowing=batch overrides, as 'windows of 128=23'")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--output", type=Path, help="also write the Markdown table here")
    parser.add_argument("extra", nargs="*", help="more biofairseq-ner train flags, after --")
    args = parser.parse_args()
    if not (args.model / "config.json").is_file():
        sys.exit(f"{args.model}: no config.json; give --model a transformers encoder folder (biofairseq-convert to-hf output, "
                 "a recipe's RUN_DIR/hf/RECIPE)")
    args.train = args.data / "train"
    args.dev = next((args.data / s for s in splits.ROLES["dev"] if (args.data / s).is_dir()), None)
    if not args.train.is_dir() or args.dev is None:
        sys.exit(f"{args.data}: give a folder holding BRAT folders train/ and valid/ (or dev/, devel/): whole documents need BRAT")
    for override in filter(None, args.batches.split(",")):
        words, _, batch = override.rpartition("=")
        matched = [n for n in WINDOWINGS if words and words in n]
        if len(matched) != 1 or not batch.isdigit():
            sys.exit(f"--batches {override!r}: give WORDS=BATCH, WORDS naming one of: {', '.join(WINDOWINGS)}")
        WINDOWINGS[matched[0]] = (*WINDOWINGS[matched[0]][:2], int(batch))
    seeds = [int(s) for s in args.seeds.split(",")]
    names = [n for n in WINDOWINGS if not args.only or any(w in n for w in args.only.split(","))]
    jobs = [(n, s) for s in seeds for n in names]  # every windowing's first seed first, so a cut-short run still compares
    started = time.time()
    with ThreadPoolExecutor(args.parallel) as pool:
        results = {(n, s): m for n, s, m in pool.map(lambda job: run(args, *job), jobs)}
    text = (f"Command: `python benchmarks/ner_windows.py {shlex.join(sys.argv[1:])}`\n\n"
            f"Model `{args.model.name}` ({args.model}); {len(seeds)} seed(s); {args.parallel} run(s) at once; "
            f"{time.time() - started:.0f} s in all. Dev F1: the BRAT scorer's entity F1 of the best-on-dev epoch (metrics.json's `dev`, as the recipes' reports read it).\n\n"
            + table(results) + "\n")
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
