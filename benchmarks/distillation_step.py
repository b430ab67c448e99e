"""A distillation step (--criterion mlm_distillation) against the student's masked-LM step, same student, data and batch.

The distillation step adds the teacher's forward pass (no backward) and the KL and cosine terms; its cost over the
student's own step should be about teacher forward FLOPs / (3 x student forward FLOPs), the 3 counting the student's
forward and backward. Both train with fairseq-train on the same real clinical cases, interleaved (MLM, distil, MLM,
...) so that machine noise hits both alike. Speed is fairseq's own updates/s over the logged intervals after the
first; peak memory is each process's maximum resident set size. The teacher is a checkpoint of the teacher's shape
written as fairseq-train writes one (its weights do not change the cost).

    .venv/bin/python benchmarks/distillation_step.py --rounds 3 --updates 40 \
        --output benchmarks/results/distillation_step.md                 # CPU: 4 x 192 student, 8 x 256 teacher
    python benchmarks/distillation_step.py --student bio_roberta_base --teacher bio_roberta_large --tokens 512 \
        --batch 16 --gpu --bf16                                            # bio-lm's shapes, on a GPU
"""

import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from measure import cases_data_bin, compare, device_label, per_run, precision_flags, publish, ratio_line  # noqa: E402
from measure import parser as measure_parser  # noqa: E402
from measure import speed_table, step_and_memory_ratios, vocabulary  # noqa: E402


SHAPES = {  # name -> (layers, width); FFN 4 x width, width / 64 heads
    "cpu_student": (4, 192), "cpu_teacher": (8, 256),  # bio-lm's depth x 2 and width x 4/3, base -> large
    "bio_roberta_tiny": (2, 128), "bio_roberta_small": (4, 256),
    "bio_roberta_base": (12, 768), "bio_roberta_large": (24, 1024),
}


def shape_flags(name):
    layers, width = SHAPES[name]
    return ["--arch", "bio_roberta_base", "--encoder-layers", layers, "--encoder-embed-dim", width,
            "--encoder-ffn-embed-dim", 4 * width, "--encoder-attention-heads", max(width // 64, 1)]


def forward_flops(name, tokens, vocab, mask_prob=0.15):
    """Matmul FLOPs per token of one forward: each layer's projections and FFN (12 d^2) and attention (2 T d), and the
    LM head over the masked tokens (d^2 + d V). Embedding lookups count 0."""
    layers, d = SHAPES[name]
    return layers * (12 * d * d + 2 * tokens * d) + mask_prob * (d * d + d * vocab)


def parameters(name, vocab, positions=514):
    layers, d = SHAPES[name]
    return vocab * d + positions * d + layers * (12 * d * d + 13 * d) + d * d + 4 * d + vocab


def write_teacher(folder, data_bin, name, dictionary):
    """A checkpoint of the teacher's shape, in fairseq-train's format, on the benchmark's dictionary."""
    from biofairseq.checkpoints import load_dictionary, new_model, save

    model, cfg = new_model([*map(str, shape_flags(name)), "--tokens-per-sample", "512"], data_bin,
                           load_dictionary(dictionary))
    folder.mkdir(parents=True, exist_ok=True)
    save(folder / "teacher.pt", model, cfg)
    return folder / "teacher.pt"


def main():
    parser = measure_parser(__doc__, rounds=3, updates=40, data_bin=None, gpu=None)
    parser.add_argument("--student", default="cpu_student", choices=sorted(SHAPES))
    parser.add_argument("--teacher", default="cpu_teacher", choices=sorted(SHAPES))
    parser.add_argument("--tokens", type=int, default=128, help="--tokens-per-sample")
    parser.add_argument("--batch", type=int, default=16, help="sequences per update")
    args = parser.parse_args()
    with cases_data_bin(args) as data_bin, tempfile.TemporaryDirectory() as tmp:
        vocab = vocabulary(data_bin, specials=5)  # + <s> <pad> </s> <unk> <mask>
        teacher = write_teacher(Path(tmp) / "teacher", data_bin, args.teacher, data_bin / "dict.txt")
        common = [
            "--user-dir", REPO / "biofairseq", "--task", "document_mlm", *shape_flags(args.student),
            "--tokens-per-sample", args.tokens, "--batch-size", args.batch, "--optimizer", "adam",
            "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-6", "--weight-decay", "0.01", "--lr", "5e-4",
            "--lr-scheduler", "polynomial_decay", "--warmup-updates", "10", "--num-workers", "2", "--seed", "1",
            "--log-format", "json", "--log-interval", "10", "--disable-validation", "--no-save",
            *precision_flags(args),
        ]
        systems = {
            f"student masked LM ({args.student})": [*common, "--criterion", "masked_lm_accuracy"],
            f"distillation from {args.teacher}": [*common, "--criterion", "mlm_distillation", "--teacher-path", teacher],
        }
        results, _ = compare(args, systems, data_bin)
    names = list(systems)
    step, memory = step_and_memory_ratios(results, names[0], names[1])
    size = parameters(args.teacher, vocab) / parameters(args.student, vocab)
    expected = 1 + forward_flops(args.teacher, args.tokens, vocab) / (3 * forward_flops(args.student, args.tokens, vocab))
    device = device_label(args)
    describe = lambda name: "{} x {}".format(*SHAPES[name])
    lines = [
        "# Distillation step time vs the student's masked-LM step time",
        "",
        f"Command: `python benchmarks/distillation_step.py {' '.join(sys.argv[1:])}`",
        "",
        f"{args.rounds} interleaved rounds of {args.updates} updates each; student {describe(args.student)}, teacher "
        f"{describe(args.teacher)} (FFN 4 x width, width / 64 heads); {args.tokens} tokens per sample, {args.batch} "
        f"sequences per update, 400 real clinical cases (document blocks), vocabulary {vocab:,}; {device}. Medians over "
        "rounds; alignment on (the teacher is wider, so a projection is trained too).",
        "",
        *speed_table(results),
        "",
        ratio_line("distillation step time / student MLM step time", step),
        f"- teacher / student parameters: {size:.2f} (bio-lm, large / base: {parameters('bio_roberta_large', 50265) / parameters('bio_roberta_base', 50265):.2f})",
        f"- expected from matmul FLOPs (1 + teacher forward / (3 x student forward)): {expected:.3f} (bio-lm's shapes at "
        f"512 tokens: {1 + forward_flops('bio_roberta_large', 512, 50265) / (3 * forward_flops('bio_roberta_base', 512, 50265)):.3f})",
        f"- peak memory (RSS) ratio: {statistics.median(memory):.3f}",
        "",
        per_run(results),
    ]
    publish(lines, args.output)


if __name__ == "__main__":
    main()
