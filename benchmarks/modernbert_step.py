"""ModernBERT's block against RoBERTa's at equal parameters: training step time at 128, 512 and 2,048 tokens.

``bio_modernbert_tiny`` (3 x 128, GeGLU 176: a global layer and two with a 128-token window, rotary positions) and
``bio_roberta_tiny`` (2 x 128, FFN 512, learned positions: 0.7% fewer parameters in its layers, and a position table
besides) train ``document_mlm`` on the same real clinical cases with the same rows, packed with whole documents
(--pack-documents: each attends to itself alone) up to the length, and the same tokens per update (the batch shrinks as the
rows grow), under biofairseq-train with fused AdamW, interleaved (RoBERTa, ModernBERT at each length, then the next
round). Both attend through torch's scaled_dot_product_attention with a boolean mask: RoBERTa's the documents',
ModernBERT's the documents' and, in its local layers, the window's. RoBERTa gets a position table as long as the
rows (--max-positions). RoBERTa runs twice, with its dropout (0.1) and without it (ModernBERT pretrains without):
on a CPU, attention with dropout cannot take SDPA's fused kernel. Speed is fairseq's own updates/s over the logged
intervals after the first.

    .venv/bin/python benchmarks/modernbert_step.py --output benchmarks/results/modernbert_step.md     # CPU
    python benchmarks/modernbert_step.py --gpu --bf16 --output benchmarks/results/modernbert_step_gpu.md
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import corpora, device_label, interleaved, per_run, precision_flags, publish, speed_table  # noqa: E402

from biofairseq.samples import build_corpus  # noqa: E402

ROBERTA, MODERNBERT = "bio_roberta_tiny", "bio_modernbert_tiny"


def systems(args):
    out = {}
    for tokens in args.lengths:
        batch = max(1, args.tokens_per_update // tokens)
        common = [
            "biofairseq-train", "--user-dir", REPO / "biofairseq", "--task", "document_mlm", "--criterion",
            "masked_lm_accuracy", "--tokens-per-sample", tokens, "--batch-size", batch, "--pack-documents",
            "--optimizer", "fused_adamw", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--lr", "1e-3",
            "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10", "--num-workers", "2", "--seed", "1",
            "--log-format", "json", "--log-interval", args.log_interval, "--disable-validation", "--no-save",
            *precision_flags(args),
        ]
        roberta = [*common, "--arch", ROBERTA, "--attention", "sdpa", "--max-positions", max(512, tokens)]
        out[f"{ROBERTA}, {tokens} tokens"] = roberta
        # RoBERTa's dropout (0.1 on the attention weights, the sublayers' outputs) off, as ModernBERT pretrains: on a
        # CPU, attention with dropout cannot take SDPA's fused kernel
        out[f"{ROBERTA} without dropout, {tokens} tokens"] = [*roberta, "--dropout", "0", "--attention-dropout", "0"]
        out[f"{MODERNBERT}, {tokens} tokens"] = [*common, "--arch", MODERNBERT, "--mask-prob", "0.15"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs of each")
    parser.add_argument("--updates", type=int, default=40, help="updates per run")
    parser.add_argument("--log-interval", type=int, default=10, help="updates per logged interval; the first is not counted")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048], help="--tokens-per-sample values")
    parser.add_argument("--tokens-per-update", type=int, default=8192, help="row tokens per update (batch x length)")
    parser.add_argument("--gpu", action="store_true", help="train on the GPU (fp16, or --bf16)")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--output", type=Path, help="also write the Markdown result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(Path(tmp) / "corpus", "bytebpe", train_docs=400, valid_docs=20, vocab_size=8000,
                              cases=corpora()[0])
        results = interleaved(systems(args), corpus.data_bin, args.rounds, args.updates, Path(tmp) / "save", cwd=REPO)
    publish(report(args, results), args.output)


def report(args, results):
    rows = []
    ups = lambda runs: statistics.median(r["ups"] for r in runs)
    ratio = lambda base, modern: [b["ups"] / m["ups"] for b, m in zip(base, modern)]
    cell = lambda xs: f"{statistics.median(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
    for tokens in args.lengths:
        roberta, plain = results[f"{ROBERTA}, {tokens} tokens"], results[f"{ROBERTA} without dropout, {tokens} tokens"]
        modern = results[f"{MODERNBERT}, {tokens} tokens"]
        rows.append(f"| {tokens:,} | {max(1, args.tokens_per_update // tokens)} | {ups(roberta):.2f} | {ups(plain):.2f} | "
                    f"{ups(modern):.2f} | {cell(ratio(roberta, modern))} | {cell(ratio(plain, modern))} |")
    return [
        "# ModernBERT's block against RoBERTa's at equal parameters: step time by length",
        "",
        f"Command: `python benchmarks/modernbert_step.py {' '.join(sys.argv[1:])}`",
        "",
        f"{args.rounds} interleaved rounds of {args.updates} updates each; {args.tokens_per_update:,} row tokens per "
        f"update (rows packed with whole documents), 400 real clinical cases, byte-level BPE of 8,000; "
        f"{device_label(args)}. Medians over rounds.",
        "",
        "| tokens per row | rows per update | RoBERTa updates/s | RoBERTa without dropout | ModernBERT updates/s | "
        "ModernBERT step / RoBERTa's (per round) | ModernBERT step / RoBERTa's without dropout |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        *speed_table(results),
        "",
        per_run(results),
    ]


if __name__ == "__main__":
    main()
