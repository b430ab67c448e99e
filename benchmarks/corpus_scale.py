"""Corpus preparation at growing sizes: does any stage's memory grow with the corpus?

Synthetic corpora of --gb sizes are made from the real clinical cases (the bundled sample, or the full release under
$BIOFAIRSEQ_SHARED): copy 0 is the cases as they are; in every further copy, each sentence of each case has two of its
words (at seeded random places) replaced by words drawn at random from the cases' own words, so that the copies stay
Spanish clinical text but neither document nor sentence deduplication removes them (a sentence of n >= 5 words has
about n^2 x 10^9 variants). Each size goes through clean (preprocess/clean_corpus.py), vocabulary
(preprocess/train_vocab.py, byte-level BPE on a sample of --max-sentences lines) and binarize (preprocess/binarize.sh,
shards of --shard-mb), each as its own process as a user runs it. Memory: every process of the stage's tree is
read every 0.2 s (the kernel's high-water mark of its resident set, VmHWM; results before 2026-11-25 sampled the
resident set itself, which misses short peaks), and the table gives each kind of process's peak (the stage's main
process, its worker processes, fairseq-preprocess).

With --before TREE (an earlier tree, e.g. `git archive`d), TREE's clean_corpus.py cleans the same corpus first, and
with --reference-binarize, binarize.sh --reference (encode.py + fairseq-preprocess) binarizes it beside the default:
before and after in the same run, on the same machine, their outputs compared file by file.

    .venv/bin/python benchmarks/corpus_scale.py --gb 0.25,0.5,1,2 --output benchmarks/results/corpus_scale.md
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from measure import BIN, case_lines, corpora

REPO = Path(__file__).resolve().parents[1]
CASES, _ = corpora()


def perturbed_corpus(path, gb, seed=1):
    """Writes at least ``gb`` GB of JSON lines to path: the cases, then perturbed copies (see the module docstring)."""
    from biofairseq.text.sentences import split_sentences

    cases = [json.loads(line)["text"] for line in case_lines(CASES)]
    words = sorted({w for text in cases for w in text.split()})
    parsed = [[split_sentences(paragraph) for paragraph in text.split("\n") if paragraph.strip()] for text in cases]
    rng, written, copy = random.Random(seed), 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < gb * 1e9:
            for paragraphs in parsed:
                out = []
                for sentences in paragraphs:
                    changed = []
                    for sentence in sentences:
                        tokens = sentence.split()
                        if copy and len(tokens) >= 2:
                            for place in rng.sample(range(len(tokens)), 2):
                                tokens[place] = rng.choice(words)
                        changed.append(" ".join(tokens))
                    out.append(" ".join(changed))
                line = json.dumps({"id": f"{copy}", "text": "\n".join(out)}, ensure_ascii=False) + "\n"
                written += f.write(line)
            copy += 1
    return written, copy


def high_water_mark(pid):
    """The kernel's peak resident set of a process so far (Linux: VmHWM), in MiB; None elsewhere. Unlike a sample of
    the resident set, it misses no peak shorter than the sampling interval."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")), None)
    except FileNotFoundError:
        if Path("/proc/self/status").exists():
            raise  # the process has ended
        return None


class PeakMemory:
    """Peak resident set of each process kind in a process tree: each process's high-water mark (or, without /proc,
    its resident set), read every 0.2 s; a process that ends within 0.2 s of its peak may still be missed."""

    def __init__(self, pid, kind_of):
        import psutil

        self.root, self.kind_of, self.peaks, self.stop = psutil.Process(pid), kind_of, {}, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import psutil

        while not self.stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in processes:
                try:
                    kind = self.kind_of(p.cmdline(), p is self.root)
                    self.peaks[kind] = max(self.peaks.get(kind, 0), high_water_mark(p.pid) or p.memory_info().rss / 2**20)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, FileNotFoundError, ProcessLookupError):
                    pass
            time.sleep(0.2)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.peaks


def kind_of(cmdline, is_root):
    text = " ".join(cmdline)
    for needle, kind in (("fairseq-preprocess", "fairseq-preprocess"), ("encode.py", "encode.py"),
                         ("write_counts", "token counts"), ("biofairseq.data_bin", "shard split"),
                         ("copy_vocab", "copy vocabulary"), ("biofairseq.corpus.binarize", "binarizer")):
        if needle in text:
            return kind
    return "main" if is_root else "workers"


def run(cmd, env):
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    memory = PeakMemory(proc.pid, kind_of)
    out, err = proc.communicate()
    peaks = memory.finish()
    if proc.returncode != 0:
        sys.exit(f"{cmd[1]} failed:\n{err.decode()[-3000:]}")
    return time.perf_counter() - start, peaks


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gb", default="0.25,0.5,1,2", help="comma-separated corpus sizes in GB of raw JSON lines")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--vocab-size", type=int, default=50262)
    p.add_argument("--max-sentences", type=int, default=1_000_000, help="train_vocab.py's sample (default: 1M lines)")
    p.add_argument("--shard-mb", type=float, default=256, help="binarize.sh's shards (default: 256 MB)")
    p.add_argument("--dedup-bucket-hashes", type=int, default=1 << 24, help="clean_corpus.py's bucket bound")
    p.add_argument("--stages", default="clean,vocabulary,binarize", help="the stages to run, in this order, from clean")
    p.add_argument("--work", type=Path, help="a folder for the corpora (default: a temporary one)")
    p.add_argument("--output", type=Path)
    p.add_argument("--with-runs", type=Path, help="an earlier result file whose runs (at other sizes) join the tables")
    p.add_argument("--before", type=Path, help="a copy of an earlier tree (git archive): its clean_corpus.py runs as "
                   "'clean (before)' beside this tree's, on the same corpus, and must write the same files")
    p.add_argument("--reference-binarize", action="store_true", help="also binarize with binarize.sh --reference "
                   "(encode.py + fairseq-preprocess) beside the default, and check the data-bins are the same")
    args = p.parse_args()
    sizes = [float(g) for g in args.gb.split(",")]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHON": sys.executable,
           "PYTHONWARNINGS": "ignore"}
    work = Path(args.work or tempfile.mkdtemp(prefix="corpus_scale."))
    work.mkdir(parents=True, exist_ok=True)
    results = [r for r in earlier_runs(args.with_runs) if r["gb"] not in sizes] if args.with_runs else []
    try:
        for gb in sizes:
            folder = work / f"{gb}gb"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            raw = folder / "raw.jsonl"
            size, copies = perturbed_corpus(raw, gb)
            stages, same = {}, {}
            clean = lambda tree, out: [sys.executable, tree / "preprocess/clean_corpus.py", "--source", f"cases={raw}",
                                       "--output-dir", out, "--lang", "es", "--valid-docs", 2000, "--workers",
                                       args.workers, "--dedup-bucket-hashes", args.dedup_bucket_hashes, "--quiet"]
            if args.before:
                stages["clean (before)"] = run(clean(args.before, folder / "clean-before"),
                                               {**env, "PYTHONPATH": str(args.before)})
            stages["clean"] = run(clean(REPO, folder / "clean"), env)
            if args.before:
                same["clean"] = same_files(folder / "clean-before", folder / "clean", {"timing.json"})
                shutil.rmtree(folder / "clean-before")
            raw.unlink()
            stats = json.loads((folder / "clean" / "stats.json").read_text())
            timing = json.loads((folder / "clean" / "timing.json").read_text())
            text = (folder / "clean" / "train.txt").stat().st_size
            if "vocabulary" in args.stages.split(","):
                    stages["vocabulary"] = run([sys.executable, REPO / "preprocess/train_vocab.py", "--input",
                                            folder / "clean" / "train.txt", "--vocab-size", args.vocab_size,
                                            "--max-sentences", args.max_sentences, "--output-dir", folder / "vocab",
                                            "--workers", args.workers], env)
            if "binarize" in args.stages.split(","):
                binarize = lambda *flag: ["bash", REPO / "preprocess/binarize.sh", *flag, folder / "clean",
                                          folder / "vocab", folder / ("data-bin-reference" if flag else "data-bin"),
                                          args.workers, args.shard_mb]
                if args.reference_binarize:
                    stages["binarize (encode.py + fairseq-preprocess)"] = run(binarize("--reference"), env)
                stages["binarize"] = run(binarize(), env)
                if args.reference_binarize:
                    same["binarize"] = same_files(folder / "data-bin-reference", folder / "data-bin", {"preprocess.log"})
            shards = len(list((folder / "data-bin").glob("shard*"))) or 1
            results.append({"gb": gb, "raw_bytes": size, "copies": copies, "text_bytes": text, "shards": shards,
                            "docs_in": stats["total"]["docs_in"], "docs_out": stats["total"]["docs_out"],
                            "duplicate_docs": stats["total"].get("duplicate_docs_source", 0),
                            "duplicate_sentences": stats["total"].get("duplicate_sentences_source", 0),
                            "clean_phases": timing, "identical": same,
                            "stages": {k: {"seconds": s, "peaks": m} for k, (s, m) in stages.items()}})
            print(json.dumps(results[-1]), flush=True)
            shutil.rmtree(folder)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    report = markdown(sorted(results, key=lambda r: r["gb"]), args)
    print(report)
    if args.output:
        args.output.write_text(report)


def same_files(a, b, skip):
    """Whether folders a and b hold the same files with the same bytes (but those named in skip)."""
    files = lambda root: {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() and p.name not in skip}
    left, right = files(a), files(b)
    return left.keys() == right.keys() and all(left[k].read_bytes() == right[k].read_bytes() for k in left)


def earlier_runs(path):
    """The runs of an earlier result file (its first "Per run:" line), so that one size can be added later."""
    for line in path.read_text().splitlines():
        if line.startswith("Per run: "):
            return json.loads(line[len("Per run: "):])
    sys.exit(f"{path}: no 'Per run:' line; pass a result file written by this script")


def markdown(results, args):
    lines = ["# Corpus preparation at growing sizes", "",
             f"Command: `.venv/bin/python benchmarks/corpus_scale.py --gb {args.gb}"
             f"{' --dedup-bucket-hashes ' + str(args.dedup_bucket_hashes) if args.dedup_bucket_hashes != 1 << 24 else ''}"
             f"{' --stages ' + args.stages if args.stages != 'clean,vocabulary,binarize' else ''}"
             f"{' --with-runs ' + str(args.with_runs) if args.with_runs else ''}"
             f"{' --before ' + str(args.before) if args.before else ''}"
             f"{' --reference-binarize' if args.reference_binarize else ''}"
             f"{' --output ' + str(args.output) if args.output else ''}` ({os.cpu_count()} cores, --workers "
             f"{args.workers}, byte-level BPE {args.vocab_size:,} on a sample of {args.max_sentences:,} lines, shards of "
             f"{args.shard_mb:g} MB, dedup buckets of {args.dedup_bucket_hashes:,} hashes; stages {args.stages}).", "",
             "| corpus | stage | seconds | MB/s | peak RSS by process (MiB) |", "|---|---|---:|---:|---|"]
    for r in results:
        name = f"{r['raw_bytes'] / 1e9:.2f} GB raw ({r['copies']} copies), {r['text_bytes'] / 1e9:.2f} GB cleaned"
        for stage, m in r["stages"].items():
            megabytes = (r["raw_bytes"] if stage.startswith("clean") else r["text_bytes"]) / 1e6
            peaks = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(m["peaks"].items(), key=lambda kv: -kv[1]))
            lines.append(f"| {name} | {stage} | {m['seconds']:.1f} | {megabytes / m['seconds']:.2f} | {peaks} |")
    pairs = [("clean (before)", "clean"), ("binarize (encode.py + fairseq-preprocess)", "binarize")]
    if any(before in r["stages"] for r in results for before, _ in pairs):
        lines += ["", "The same stage before and after, in the same run (seconds before / seconds after; output identical: "
                  "the same bytes in every file, but timing.json and fairseq-preprocess's log):", "",
                  "| corpus | stage | before (s) | after (s) | speed-up | output identical |", "|---|---|---:|---:|---:|---|"]
        for r in results:
            for before, after in pairs:
                if before in r["stages"] and after in r["stages"]:
                    a, b = r["stages"][before]["seconds"], r["stages"][after]["seconds"]
                    lines.append(f"| {r['gb']:g} GB | {after} | {a:.1f} | {b:.1f} | {a / b:.2f}x | "
                                 f"{r.get('identical', {}).get(after.split()[0], '?')} |")
    lines += ["", "Documents in, kept, and what deduplication removed (a perturbed copy should lose none):", "",
              "| corpus | documents in | kept | duplicate documents | duplicate sentences | shards | cleaning phases (s) |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        lines.append(f"| {r['gb']:g} GB | {r['docs_in']:,} | {r['docs_out']:,} | {r['duplicate_docs']:,} | "
                     f"{r['duplicate_sentences']:,} | {r['shards']} | {json.dumps(r['clean_phases'])} |")
    if len(results) >= 2:
        small = next((r for r in results if r["gb"] >= 0.5), results[0])
        big = results[-1]
        lines += ["", f"Peak growth from {small['gb']:g} GB to {big['gb']:g} GB, per stage and process (largest first):", ""]
        for stage in big["stages"]:
            growth = [f"{k} {v / small['stages'][stage]['peaks'].get(k, v):.2f}x"
                      for k, v in sorted(big["stages"][stage]["peaks"].items(), key=lambda kv: -kv[1])]
            lines.append(f"- {stage}: {', '.join(growth)}")
    lines += ["", f"Per run: {json.dumps(results)}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
