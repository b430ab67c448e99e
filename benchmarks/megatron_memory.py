"""Peak memory of bio_megatron_345m training steps with and without activation checkpointing (--checkpoint-activations).

Each configuration is its own fairseq-train process on real clinical cases (SentencePiece data-bin, 512-token
samples), a few updates of Adam; its peak resident set size (os.wait4) holds the weights, gradients, Adam's two
moments, the activations of one step and the process's fixed cost (Python, torch, fairseq, data). Running the
same configuration at two batch sizes separates the activations per sequence from the rest. On a GPU,
--gpu measures torch.cuda.max_memory_allocated instead (not wired here: the CPU numbers are what this issue had).

    .venv/bin/python benchmarks/megatron_memory.py --output benchmarks/results/megatron_memory.md   # CPU, ~10 min
"""

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from corpus import build_corpus  # noqa: E402  (the tests' real-data corpus builder)
from measure import fairseq_train_speed, publish  # noqa: E402
from test_presets import expected_parameters  # noqa: E402  (the preset's count from its shape)

FLAGS = ["--user-dir", str(REPO / "biofairseq"), "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
         "--arch", "bio_megatron_345m", "--tokens-per-sample", "512", "--sample-break-mode", "doc",
         "--optimizer", "adam", "--lr", "1e-4", "--lr-scheduler", "polynomial_decay", "--warmup-updates", "1",
         "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
         "--disable-validation", "--no-save", "--required-batch-size-multiple", "1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="1,2", help="two batch sizes (sequences of 512 tokens)")
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    small, large = map(int, args.batches.split(","))
    work = Path(tempfile.mkdtemp(prefix="megatron_memory."))
    corpus = build_corpus(work / "corpus", "sentencepiece", train_docs=200, valid_docs=10, vocab_size=6000)
    results = {}
    for checkpointing in (False, True):
        for batch in (small, large):
            flags = [*FLAGS, "--batch-size", batch, *(["--checkpoint-activations"] if checkpointing else [])]
            r = fairseq_train_speed(corpus.data_bin, flags, args.updates, work / "save")
            results[checkpointing, batch] = r
            print(f"checkpointing {checkpointing}, batch {batch}: {r}", flush=True)
    from biofairseq.convert.fairseq_side import load_dictionary

    vocabulary = len(load_dictionary(corpus.data_bin / "dict.txt"))
    layers, width, ffn = 24, 1024, 4096
    params = expected_parameters(vocabulary, layers, width, ffn, pre_ln=True)
    mib = 2 ** 20
    static = params * 4 * 4 / mib  # fp32 weights, gradients, Adam's two moments
    lines = [
        "# bio_megatron_345m: peak memory of a training step, activation checkpointing off and on",
        "",
        f"`.venv/bin/python benchmarks/megatron_memory.py --batches {args.batches} --updates {args.updates}` on CPU (fp32, "
        f"{layers} x {width}, FFN {ffn}, pre-LN, a {vocabulary:,}-entry SentencePiece vocabulary: {params / 1e6:.1f}M "
        f"parameters; 512-token samples of real clinical cases; fairseq-train with Adam). Peak RSS of each process "
        f"(os.wait4). Weights + gradients + Adam moments in fp32 = {static:,.0f} MiB of it.",
        "",
        "| activation checkpointing | sequences of 512 | peak RSS (MiB) | s/update |",
        "|---|---|---|---|",
    ]
    for (checkpointing, batch), r in results.items():
        lines.append(f"| {'on' if checkpointing else 'off'} | {batch} | {r['peak_rss_mb']:,.0f} | {1 / r['ups']:.1f} |")
    per_sequence = {c: (results[c, large]["peak_rss_mb"] - results[c, small]["peak_rss_mb"]) / (large - small) for c in (False, True)}
    lines += [
        "",
        f"Activations per 512-token sequence (the peak's growth from {small} to {large} sequences): "
        f"**{per_sequence[False]:,.0f} MiB** without checkpointing, **{per_sequence[True]:,.0f} MiB** with it "
        f"({per_sequence[False] / max(per_sequence[True], 1):.1f}x less).",
    ]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
