"""NER fine-tuning and evaluation throughput: biofairseq-ner's Trainer set-up against transformers' Trainer as
`run_ner.py` configures it, with the same model, data, batch and precision, in one process.

Both train on the same windows of PharmaCoNER train (real tokens counted, padding not) and predict the same
windows of PharmaCoNER dev. The baseline samples batches at random and predicts in data order, as `run_ner.py`
does; ours groups training batches by length (``train_sampling_strategy="group_by_length"``) and predicts
windows sorted by length. Rounds alternate baseline and ours; the table gives medians.

    .venv/bin/python benchmarks/ner_finetuning.py --size tiny --docs 200 --rounds 3      # CPU
    python benchmarks/ner_finetuning.py --size base --rounds 2                          # GPU (bf16 where supported)
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

REPO = Path(__file__).resolve().parents[1]
_, PHARMACONER = corpora()  # the bundled sample, or the full release under BIOFAIRSEQ_SHARED
SIZES = {  # hidden, layers, heads, FFN
    "tiny": (128, 2, 2, 512),
    "base": (768, 12, 12, 3072),
}


def subset(split, docs, out):
    out.mkdir(parents=True)
    for txt in sorted((PHARMACONER / split).glob("*.txt"))[:docs]:
        (out / txt.name).write_bytes(txt.read_bytes())
        (out / txt.with_suffix(".ann").name).write_bytes(txt.with_suffix(".ann").read_bytes())
    return out


def make_model(tmp, size, vocab_size):
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizer

    from biofairseq.corpus.vocab import train_bytelevel_bpe

    vocab = tmp / "vocab"
    vocab.mkdir()
    train_bytelevel_bpe(sorted((PHARMACONER / "train").glob("*.txt")), vocab, vocab_size)
    tokenizer = RobertaTokenizer(str(vocab / "vocab.json"), str(vocab / "merges.txt"), model_max_length=512)
    hidden, layers, heads, ffn = SIZES[size]
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=ffn, max_position_embeddings=514, pad_token_id=1, layer_norm_eps=1e-5)
    RobertaForMaskedLM(config).save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    return tmp / "model"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=SIZES, default="tiny")
    parser.add_argument("--docs", type=int, default=500, help="PharmaCoNER train documents (dev: half as many)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--output", type=Path, default=None, help="append the result to this Markdown file")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification, Trainer, TrainingArguments

    from biofairseq.finetune import data, iob2
    from biofairseq.finetune.training import Predictor, TrainOptions, load_tokenizer, make_trainer, precision_flags

    transformers.logging.set_verbosity_error()
    tmp = Path(tempfile.mkdtemp(prefix="ner-bench-"))
    model_dir = make_model(tmp, args.size, args.vocab_size)
    print(f"model: {model_dir}", flush=True)
    train_set = data.read(subset("train", args.docs, tmp / "train"))
    dev_set = data.read(subset("valid", max(args.docs // 2, 1), tmp / "dev"))
    labels = iob2.label_list(train_set.types() | dev_set.types())
    tokenizer = load_tokenizer(model_dir)
    options = TrainOptions(epochs=1, logging_steps=10**9)
    precision, precision_args = precision_flags(options.precision)
    train_p = Predictor(train_set, tokenizer, labels, 512, options)
    dev_p = Predictor(dev_set, tokenizer, labels, 512, options)
    train_tokens = sum(len(x["input_ids"]) for x in train_p.inputs)
    dev_tokens = sum(len(x["input_ids"]) for x in dev_p.inputs)
    # the baseline sees the windows in data order, as a data set built by run_ner.py would be
    dev_in_order = [dev_p.inputs[i] for i in sorted(range(len(dev_p.windows)), key=lambda i: (dev_p.windows[i].sentence, i))]

    def fresh_model():
        transformers.set_seed(1)
        return AutoModelForTokenClassification.from_pretrained(model_dir, num_labels=len(labels))

    def baseline(out):
        training_args = TrainingArguments(
            output_dir=str(out), learning_rate=options.lr, seed=1, num_train_epochs=1, per_device_train_batch_size=options.batch_size,
            gradient_accumulation_steps=options.gradient_accumulation, per_device_eval_batch_size=options.eval_batch_size,
            lr_scheduler_type="linear", max_grad_norm=1.0, save_strategy="no", report_to="none", disable_tqdm=True,
            logging_steps=10**9, **precision_args)
        collator = DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=8 if precision != "fp32" else None)
        return Trainer(model=fresh_model(), args=training_args, train_dataset=train_p.inputs, processing_class=tokenizer,
                       data_collator=collator)

    def ours(out):
        return make_trainer(fresh_model(), tokenizer, options, out, train_p.inputs)

    def timed(fn):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter() - start

    results = {"baseline": {"train": [], "eval": []}, "ours": {"train": [], "eval": []}}
    for r in range(args.rounds):
        for name, build, dev_inputs in (("baseline", baseline, dev_in_order), ("ours", ours, dev_p.inputs)):
            trainer = build(tmp / f"{name}-{r}")
            results[name]["train"].append(train_tokens / timed(trainer.train))
            results[name]["eval"].append(dev_tokens / timed(lambda: trainer.predict(dev_inputs)))
            print(f"round {r + 1} {name}: train {results[name]['train'][-1]:,.0f} tokens/s, eval {results[name]['eval'][-1]:,.0f} tokens/s", flush=True)
            trainer = None  # its memory back before the next build
    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in results.items()}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {os.cpu_count()} cores"
    n_params = sum(p.numel() for p in fresh_model().parameters())
    lines = [
        f"### {args.size} model ({n_params / 1e6:.1f} M parameters), {device}, {precision}",
        "",
        f"`{' '.join(['python', 'benchmarks/ner_finetuning.py', *sys.argv[1:]])}`: PharmaCoNER train {args.docs} documents "
        f"({len(train_p.inputs):,} windows, {train_tokens:,} real tokens), dev {len(dev_p.inputs):,} windows ({dev_tokens:,} tokens); "
        f"batch {options.batch_size} x accumulation {options.gradient_accumulation}, 1 epoch, max length 512; median of {args.rounds} rounds; "
        f"torch {torch.__version__}, transformers {transformers.__version__}, Python {platform.python_version()}.",
        "",
        "| | training tokens/s | vs baseline | evaluation tokens/s | vs baseline |",
        "|---|---:|---:|---:|---:|",
        f"| baseline: transformers Trainer as run_ner.py sets it up | {med['baseline']['train']:,.0f} | 1.00x | {med['baseline']['eval']:,.0f} | 1.00x |",
        f"| biofairseq-ner | {med['ours']['train']:,.0f} | {med['ours']['train'] / med['baseline']['train']:.2f}x | "
        f"{med['ours']['eval']:,.0f} | {med['ours']['eval'] / med['baseline']['eval']:.2f}x |",
        "",
    ]
    print("\n".join(lines))
    print(json.dumps(results))
    if args.output:
        with open(args.output, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
