"""Corpus preparation throughput: cleaning with 1 and 2 workers, then encoding + binarization.

The Spanish clinical cases (the bundled sample, or the full release under $BIOFAIRSEQ_SHARED) are repeated to at least --mb MB of raw JSON lines, with
each copy's ids changed. Each stage runs as its own process, as a user runs it; peak memory is the largest
resident set of that process tree (os.wait4). Deduplication drops the copies after cleaning, so encoding
and binarization run on train.txt repeated the same number of times, to measure them at that size too.

    .venv/bin/python benchmarks/corpus_preparation.py --mb 100
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

from measure import case_lines, corpora, run

from biofairseq.data_bin import split_size

REPO = Path(__file__).resolve().parents[1]
CASES, _ = corpora()  # the bundled sample, or the full release under BIOFAIRSEQ_SHARED


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=100, help="raw input size (default: 100 MB)")
    p.add_argument("--vocab-size", type=int, default=50262)
    p.add_argument("--output", default=REPO / "benchmarks/results/corpus_preparation.md")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    try:
        lines = case_lines(CASES)
        valid_docs = 2000 if len(lines) > 4000 else len(lines) // 10  # clean_corpus.py's default, or a tenth of the sample
        copies = math.ceil(args.mb * 1e6 / sum(len(line.encode("utf-8")) for line in lines))
        raw = tmp / "raw.jsonl"
        with open(raw, "w", encoding="utf-8") as f:
            for c in range(copies):
                for line in lines:
                    record = json.loads(line)
                    record["id"] = f"{record['id']}-{c}"
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
        mb = raw.stat().st_size / 1e6
        rows = []
        clean, phases = {}, {}
        for workers in (1, 2):
            clean[workers] = tmp / f"clean{workers}"
            seconds, rss, _ = run([sys.executable, REPO / "preprocess/clean_corpus.py", "--source", f"cases={raw}",
                                   "--output-dir", clean[workers], "--lang", "es", "--workers", workers, "--quiet",
                                   "--shard-size", 8 << 20, "--valid-docs", valid_docs])
            rows.append((f"clean_corpus.py --workers {workers}", f"{mb:.1f} MB raw", seconds, f"{mb / seconds:.2f} MB/s", rss))
            phases[workers] = {"process": seconds, **json.loads((clean[workers] / "timing.json").read_text())}
        assert (clean[1] / "train.txt").read_bytes() == (clean[2] / "train.txt").read_bytes()
        scaling = rows[0][2] / rows[1][2]
        # encoding and binarization at the same size: the cleaned text repeated as often as the raw text was
        big = tmp / "big"
        big.mkdir()
        for split in ("train", "valid"):
            text = (clean[2] / f"{split}.txt").read_text(encoding="utf-8")
            (big / f"{split}.txt").write_text(text * (copies if split == "train" else 1), encoding="utf-8")
        seconds, rss, _ = run([sys.executable, REPO / "preprocess/train_vocab.py", "--input", clean[2] / "train.txt",
                               "--vocab-size", args.vocab_size, "--output-dir", tmp / "vocab", "--workers", 2])
        rows.append((f"train_vocab.py (bytelevel-bpe {args.vocab_size})", "cleaned train.txt (1 copy)", seconds, "", rss))
        seconds, rss, _ = run(["bash", REPO / "preprocess/binarize.sh", big, tmp / "vocab", tmp / "data-bin", 2])
        tokens = sum(split_size(tmp / "data-bin", split)[1] for split in ("train", "valid"))
        size = sum((big / f"{s}.txt").stat().st_size for s in ("train", "valid")) / 1e6
        rows.append(("binarize.sh, 2 workers", f"{size:.1f} MB, {tokens:,} tokens", seconds,
                     f"{tokens / seconds:,.0f} tokens/s", rss))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table = ["| stage | input | seconds | throughput | peak RSS (MiB) |", "|---|---|---:|---:|---:|"]
    table += [f"| {a} | {b} | {c:.1f} | {d} | {e:,.0f} |" for a, b, c, d, e in rows]
    report = "\n".join([
        "# Corpus preparation throughput", "",
        f"Command: `.venv/bin/python benchmarks/corpus_preparation.py --mb {args.mb:g}` "
        f"({os.cpu_count()} cores, {copies} copies of clinical_cases.jsonl)", "", *table, "",
        f"Cleaning scaling, 2 workers vs 1: **{scaling:.2f}x** (wall-time ratio; 2.0 would be perfect).", "",
        "Where the time goes (`clean/timing.json`; start-up = the process's time outside the four phases):", "",
        "| workers | process | start-up | plan | clean shards (parallel) | deduplicate (serial) | split (serial) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {w} | {p['process']:.1f} | {p['process'] - sum(v for k, v in p.items() if k != 'process'):.1f} | {p['plan']:.1f} | "
          f"{p['clean_shards']:.1f} | {p['deduplicate']:.1f} | {p['split']:.1f} |" for w, p in phases.items()],
        "", f"The shard phase alone scales {phases[1]['clean_shards'] / phases[2]['clean_shards']:.2f}x.", "",
    ])
    Path(args.output).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
