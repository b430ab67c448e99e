"""ModernBERT's block against RoBERTa's: training step time, tokens/s and model FLOP utilisation at 128, 512 and 2,048 tokens.

``--size tiny`` (CPU): ``bio_modernbert_tiny`` (3 x 128, GeGLU 176: a global layer and two with a 128-token window,
rotary positions) against ``bio_roberta_tiny`` (2 x 128, FFN 512, learned positions: 0.7% fewer parameters in its
layers, and a position table besides). ``--size base`` (GPU): ModernBERT-base's shape (``bio_modernbert_base``,
22 x 768, GeGLU 1152: 110.3 M in its layers) against RoBERTa-base's (``bio_roberta_base``, 12 x 768, FFN 3072:
85.0 M), the two a team chooses between; model FLOPs per token put their tokens/s on one scale.

Both train ``document_mlm`` on the same real clinical cases with the same rows, packed with whole documents
(--pack-documents: each attends to itself alone) up to the length, and the same tokens per update (the batch
shrinks as the rows grow), under biofairseq-train with fused AdamW, interleaved (each system at a length, then the
next round). Both attend through torch's scaled_dot_product_attention with a boolean mask: RoBERTa's the
documents', ModernBERT's the documents' and, in its local layers, the window's. RoBERTa gets a position table as
long as the rows (--max-positions). RoBERTa runs twice, with its dropout (0.1) and without it (ModernBERT pretrains
without): on a CPU, attention with dropout cannot take SDPA's fused kernel. With --compile, both once more with
their layers compiled (biofairseq-train --compile; RoBERTa without dropout). Speed is fairseq's own updates/s and
tokens/s (real tokens) over the logged intervals after the first.

Model FLOPs per trained token (forward and backward = 3 x forward; as benchmarks/pretrain_speed.py counts them):
6 x the weights of each layer's matmuls (RoBERTa: 4 d^2 + 2 d f; ModernBERT: 4 d^2 + 3 d f, GeGLU's input
projection being 2f wide), attention 12 x d x the keys a query attends to (every key of its document block in a
global layer, token-weighted; at most 64 either side in a local one), and the output layer over the 15% masked
tokens, 6 x (d^2 + vocabulary x d). MFU = FLOPs per token x tokens/s / peak: a bf16 (GPU) or fp32 (CPU) matmul
measured in the run, and the GPU's dense bf16 figure where its name is known.

    .venv/bin/python benchmarks/modernbert_step.py --output benchmarks/results/modernbert_step.md     # CPU
    python benchmarks/modernbert_step.py --size base --gpu --bf16 --lengths 512 --compile inductor \\
        --output benchmarks/results/modernbert_step_gpu_512.md                                          # GPU
"""

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import cases_data_bin, chosen, compare, device_label, failure_lines, memory_key, per_run  # noqa: E402
from measure import parser as measure_parser  # noqa: E402
from measure import precision_flags, publish, vocabulary  # noqa: E402
from pretrain_speed import flops_per_token as roberta_flops_per_token  # noqa: E402
from pretrain_speed import measured_peak, spec_peak, training_set  # noqa: E402

from biofairseq.model_shapes import BIO_MODERNBERT  # noqa: E402
from biofairseq.models.compiled_layers import COMPILE_CHOICES  # noqa: E402

ARCHS = {"tiny": ("bio_roberta_tiny", "bio_modernbert_tiny"), "base": ("bio_roberta_base", "bio_modernbert_base")}
MASK_PROB, HALF_WINDOW, GLOBAL_EVERY = 0.15, 64, 3


def names(roberta, modernbert, tokens):
    """The systems at one length, the baseline first."""
    return {"roberta": f"{roberta}, {tokens} tokens", "plain": f"{roberta} without dropout, {tokens} tokens",
            "modern": f"{modernbert}, {tokens} tokens", "plain compiled": f"{roberta} without dropout, compiled, {tokens} tokens",
            "modern compiled": f"{modernbert}, compiled, {tokens} tokens"}


def systems(args):
    roberta, modernbert = ARCHS[args.size]
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
        name = names(roberta, modernbert, tokens)
        out[name["roberta"]] = [*common, "--arch", roberta, "--attention", "sdpa", "--max-positions", max(512, tokens)]
        # RoBERTa's dropout (0.1 on the attention weights, the sublayers' outputs) off, as ModernBERT pretrains: on a
        # CPU, attention with dropout cannot take SDPA's fused kernel
        out[name["plain"]] = [*out[name["roberta"]], "--dropout", "0", "--attention-dropout", "0"]
        out[name["modern"]] = [*common, "--arch", modernbert, "--mask-prob", str(MASK_PROB)]
        if args.compile != "none":
            out[name["plain compiled"]] = [*out[name["plain"]], "--compile", args.compile]
            out[name["modern compiled"]] = [*out[name["modern"]], "--compile", args.compile]
    return out


def keys_per_query(sizes):
    """(global, local): the keys a token attends to, averaged over the tokens of the document blocks of these
    sizes: its whole block in a global layer; at most HALF_WINDOW either side, within the block, in a local one."""
    import numpy as np

    n, h = sizes, HALF_WINDOW
    # sum over a block's positions i of min(i, h): the keys on one side
    one_side = np.where(n <= h + 1, n * (n - 1) / 2, h * (h + 1) / 2 + (n - 1 - h) * h)
    return float((n * n).sum() / n.sum()), float((n + 2 * one_side).sum() / n.sum())


def flops_per_token(size, modern, keys, vocab):
    """Model FLOPs of one trained token, as the module docstring counts them: RoBERTa's as pretrain_speed.py's
    (whose tiny and base shapes are bio_roberta_tiny's and _base's), ModernBERT's with its local layers' keys."""
    global_keys, local_keys = keys
    if not modern:
        return roberta_flops_per_token("roberta", size, global_keys, vocab)
    shape = BIO_MODERNBERT[ARCHS[size][1]]
    d, f, layers = shape["width"], shape["ffn"], shape["layers"]
    spans = [global_keys if i % GLOBAL_EVERY == 0 else local_keys for i in range(layers)]
    return sum(6 * (4 * d * d + 3 * d * f) + 12 * d * span for span in spans) + 6 * MASK_PROB * (d * d + vocab * d)


def main():
    parser = measure_parser(__doc__, rounds=3, updates=40, log_interval=10, only=None, keep_going=None, data_bin=None,
                            gpu=None)
    parser.add_argument("--size", choices=ARCHS, default="tiny", help="tiny: 3 x 128 against 2 x 128 (CPU); base: "
                        "22 x 768 against 12 x 768")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048], help="--tokens-per-sample values")
    parser.add_argument("--tokens-per-update", type=int, default=8192, help="row tokens per update (batch x length)")
    parser.add_argument("--compile", choices=COMPILE_CHOICES, default="none",
                        help="also run RoBERTa without dropout and ModernBERT with their layers compiled by this backend")
    args = parser.parse_args()
    runs = chosen(args, systems(args))
    with cases_data_bin(args) as data_bin:
        vocab = vocabulary(data_bin)
        keys = {t: keys_per_query(training_set(data_bin, t, 1)[2]) for t in args.lengths}
        peak = measured_peak(args.gpu)
        results, failures = compare(args, runs, data_bin)
    publish(report(args, results, keys, vocab, peak, failures), args.output)


def report(args, results, keys, vocab, peak, failures):
    roberta, modernbert = ARCHS[args.size]
    ups = lambda runs: statistics.median(r["ups"] for r in runs)
    cell = lambda xs: f"{statistics.median(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
    ratio_rows = []
    for tokens in args.lengths:
        name = names(roberta, modernbert, tokens)
        got = {k: results[n] for k, n in name.items() if n in results}
        ratio = lambda base, other: cell([b["ups"] / m["ups"] for b, m in zip(got[base], got[other])]) \
            if base in got and other in got else "-"
        speed = lambda k: f"{ups(got[k]):.2f}" if k in got else "-"
        ratio_rows.append(f"| {tokens:,} | {max(1, args.tokens_per_update // tokens)} | {speed('roberta')} | "
                          f"{speed('plain')} | {speed('modern')} | {ratio('roberta', 'modern')} | "
                          f"{ratio('plain', 'modern')} | {ratio('plain compiled', 'modern compiled')} |")
    device = next((r.get("device") for runs in results.values() for r in runs if r.get("device")), None)
    spec = spec_peak(device) if args.gpu else None
    memory = memory_key(results)
    system_rows = []
    for tokens in args.lengths:
        for kind, n in names(roberta, modernbert, tokens).items():
            if n in results:
                system_rows.append(system_row(n, results[n], flops_per_token(args.size, kind.startswith("modern"),
                                                                               keys[tokens], vocab), peak, spec, memory))
    spans = "; ".join(f"{t:,} tokens: {g:.0f} and {l:.0f}" for t, (g, l) in keys.items())
    return [
        "# ModernBERT's block against RoBERTa's: step time, tokens/s and MFU by length",
        "",
        f"Command: `python benchmarks/modernbert_step.py {' '.join(sys.argv[1:])}`",
        "",
        f"{args.rounds} interleaved rounds of {args.updates} updates each; {args.tokens_per_update:,} row tokens per "
        f"update (rows packed with whole documents), 400 real clinical cases, byte-level BPE of 8,000; "
        f"{device or device_label(args)}{', ' + device_label(args) if device else ''}. Medians over rounds. "
        f"Keys a token attends to in a global and a local layer (token-weighted): {spans}. Matmul peak measured "
        f"here: {peak / 1e12:.2f} TFLOP/s.",
        "",
        "| tokens per row | rows per update | RoBERTa updates/s | RoBERTa without dropout | ModernBERT updates/s | "
        "ModernBERT step / RoBERTa's (per round) | ModernBERT step / RoBERTa's without dropout | the same, both compiled |",
        "|---|---|---|---|---|---|---|---|",
        *ratio_rows,
        "",
        "| system | updates/s | tokens/s | model MFLOPs per token | MFU vs measured matmul | "
        + ("MFU vs spec peak | " if spec else "")
        + ("peak GPU memory allocated (MiB) |" if args.gpu else "peak RSS (MiB) |"),
        "|---|---|---|---|---|" + ("---|" if spec else "") + "---|",
        *system_rows,
        "",
        *failure_lines(failures),
        per_run(results),
    ]



def system_row(name, runs, flops, peak, spec, memory):
    """A system's medians: updates/s, tokens/s, FLOPs per token, MFU (against the measured and the spec peak), memory."""
    wps = statistics.median(r["wps"] for r in runs)
    return (f"| {name} | {statistics.median(r['ups'] for r in runs):.2f} | {wps:,.0f} | {flops / 1e6:,.1f} | "
            f"{100 * flops * wps / peak:.1f}% | " + (f"{100 * flops * wps / spec:.1f}% | " if spec else "")
            + f"{statistics.median(r[memory] for r in runs):,.0f} |")


if __name__ == "__main__":
    main()
