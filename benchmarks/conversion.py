"""Conversion cost for a bio_roberta_base-sized checkpoint: wall time and peak memory of biofairseq-convert.

A random bio_roberta_base checkpoint (12 x 768, in the form fairseq-train saves it) with a byte-level BPE learned
on the bundled clinical cases goes through `to-hf` and `from-hf`, with and without the parity check. Each command
runs as its own process, as a user runs it; peak memory is the largest resident set (os.wait4). The baseline,
in the same run, is the least any converter does: load the fairseq checkpoint with torch and write its tensors
with safetensors (and, separately, the imports a converter needs).

    .venv/bin/python benchmarks/conversion.py --rounds 3
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from measure import case_lines, corpora, run

REPO = Path(__file__).resolve().parents[1]
CASES, _ = corpora()  # the bundled sample, or the full release under BIOFAIRSEQ_SHARED

FLOOR = """
import sys, torch
from safetensors.torch import save_file
import biofairseq.models.safe_checkpoints  # fairseq's Namespace, allowed
weights = torch.load(sys.argv[1])["model"]
save_file({k: v.float().clone().contiguous() for k, v in weights.items()}, sys.argv[2])
"""
IMPORTS = "import fairseq.models.roberta, transformers, biofairseq.convert.cli; transformers.RobertaForMaskedLM"


def make_checkpoint(tmp, vocab_size):
    from biofairseq import checkpoints

    text = tmp / "cases.txt"
    with open(text, "w", encoding="utf-8") as out:
        for line in case_lines(CASES):
            out.write(json.loads(line)["text"].strip() + "\n\n")
    seconds, _, _ = run([sys.executable, REPO / "preprocess/train_vocab.py", "--input", text, "--vocab-size", vocab_size,
                         "--min-frequency", 1, "--output-dir", tmp / "vocab", "--workers", 2])
    dictionary = checkpoints.load_dictionary(tmp / "vocab" / "dict.txt")
    model, cfg = checkpoints.new_model(["--arch", "bio_roberta_base"], tmp / "vocab", dictionary)
    checkpoints.save(tmp / "checkpoint.pt", model, cfg)
    parameters = sum(p.numel() for p in model.parameters())
    return tmp / "checkpoint.pt", len(dictionary), parameters


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="runs of each command; the median is reported")
    p.add_argument("--vocab-size", type=int, default=50262)
    p.add_argument("--output", default=REPO / "benchmarks/results/conversion.md")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-convert-"))
    convert = [Path(sys.executable).parent / "biofairseq-convert"]
    try:
        checkpoint, entries, parameters = make_checkpoint(tmp, args.vocab_size)
        size = checkpoint.stat().st_size / 2**20
        commands = {
            "imports only (fairseq, transformers, biofairseq.convert)": lambda r: [sys.executable, "-c", IMPORTS],
            "baseline: torch.load + safetensors save_file": lambda r: [sys.executable, "-c", FLOOR, checkpoint, tmp / f"floor{r}.safetensors"],
            "to-hf --no-verify": lambda r: [*convert, "to-hf", checkpoint, tmp / f"hf-nv{r}", "--no-verify"],
            "to-hf (with parity check)": lambda r: [*convert, "to-hf", checkpoint, tmp / f"hf{r}"],
            "from-hf --no-verify": lambda r: [*convert, "from-hf", tmp / "hf0", tmp / f"fs-nv{r}", "--no-verify"],
            "from-hf (with parity check)": lambda r: [*convert, "from-hf", tmp / "hf0", tmp / f"fs{r}"],
        }
        results, parity = {}, {}
        for r in range(args.rounds):  # interleaved, so that machine noise spreads over every command
            for name, command in commands.items():
                seconds, rss, out = run(command(r))
                results.setdefault(name, []).append((seconds, rss))
                parity.update({name: line for line in out.splitlines() if "parity on" in line})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = statistics.median(s for s, _ in results["baseline: torch.load + safetensors save_file"])
    table = ["| command | median seconds | vs baseline | peak RSS (MiB) | peak RSS / checkpoint size |",
             "|---|---:|---:|---:|---:|"]
    for name, runs in results.items():
        seconds = statistics.median(s for s, _ in runs)
        rss = max(m for _, m in runs)
        table.append(f"| {name} | {seconds:.1f} | {seconds / floor:.2f}x | {rss:,.0f} | {rss / size:.2f} |")
    report = "\n".join([
        "# Conversion cost, bio_roberta_base", "",
        f"Command: `.venv/bin/python benchmarks/conversion.py --rounds {args.rounds}` ({os.cpu_count()} cores, CPU; "
        f"median of {args.rounds} interleaved rounds; peak RSS is the largest of the rounds).", "",
        f"Checkpoint: random `bio_roberta_base`, {parameters / 1e6:.1f} M parameters, dictionary of {entries:,} entries "
        f"(byte-level BPE learned on the clinical cases with `--vocab-size {args.vocab_size} --min-frequency 1`), "
        f"{size:,.0f} MiB on disk.", "",
        *table, "",
        "Parity reported by the checked runs (last round):", "",
        *[f"- {name}: `{line.removeprefix('biofairseq-convert: ')}`" for name, line in parity.items()], "",
    ])
    Path(args.output).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
