"""The report of a recipe run: corpus, vocabulary, pretraining and NER, as Markdown, JSON and one figure.

    python -m biofairseq.recipe.report RUN_DIR [--data-bin NAME=DIR ...] [--breakout NAME=JSON ...] [--pretrain NAME=DIR ...]
        --ner NAME=SWEEP_DIR [--ner NAME=SWEEP_DIR ...]

Every number is read from a file that a stage wrote in RUN_DIR: recipe.env, clean/stats.json,
the .idx and dict.txt of data-bin/ (or of each --data-bin, for recipes that learn several vocabularies), the entity break-out
rates of preprocess/vocab_stats.py (--breakout, per NER data set), the train.log and best.json of pretrain/ (or of
each --pretrain folder, for recipes that pretrain several models), and the NER runs of each sweep folder (one per
model, or per model and labelling; several models may share a data set NAME). Each data set's NER table is also written beside its sweeps (report.md, report.json, dev_f1.png in the
sweeps' parent folder).
"""

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional

from biofairseq.atomic import write_text
from biofairseq.recipe.best_checkpoint import records
from biofairseq.recipe.objectives import Electra, objective_of, percent
from biofairseq.recipe.record import changes_of
from biofairseq.recipe.record import read as recorded_settings
from biofairseq.recipe.table import SettingsError
from biofairseq.text.phrases import with_article
from biofairseq.text.tables import markdown_table


class ReportError(Exception):
    pass


def _read(path, what):
    if not path.is_file():
        raise ReportError(f"{path}: missing; {what}")
    return path.read_text(encoding="utf-8")


def settings_changes(run_dir: Path) -> list:
    return changes_of(run_dir)


def changes_lines(run_dir: Path) -> list:
    """The settings changed between runs into run_dir (only ever those of stages that had not run), with when."""
    changes = settings_changes(run_dir)
    if not changes:
        return []
    return ["Settings changed between runs (each before any stage it shapes had run):", "",
            markdown_table(["when", "setting", "before", "after"], [list(change) for change in changes]), ""]


def settings(run_dir: Path) -> dict:
    try:
        return recorded_settings(run_dir)
    except SettingsError as error:
        raise ReportError(str(error)) from None


def corpus(run_dir: Path) -> dict:
    stats = json.loads(_read(run_dir / "clean" / "stats.json", "the cleaning stage (preprocess/clean_corpus.py) did not finish"))
    keys = ("docs_in", "docs_out", "sentences_out", "tokens_out")
    return {"sources": {name: {k: c.get(k, 0) for k in keys} for name, c in stats["sources"].items()},
            "total": {k: stats["total"].get(k, 0) for k in keys}, "train_docs": stats["train_docs"], "valid_docs": stats["valid_docs"]}


def data_bin(folder: Path) -> dict:
    """Dictionary size, lines and tokens per split (over every shard), and shards, from the data-bin's own files."""
    from biofairseq.corpus.vocab import FAIRSEQ_SPECIALS, read_dict
    from biofairseq.data_bin import shards, split_size

    try:
        folders = shards(folder)
        out = {"shards": len(folders), "dictionary": len(read_dict(folders[0] / "dict.txt")[0]) + FAIRSEQ_SPECIALS}
        for shard in folders:
            for split in ("train", "valid"):
                if (shard / f"{split}.idx").is_file():
                    lines, tokens = split_size(shard, split)
                    counts = out.setdefault(split, {"lines": 0, "tokens": 0})
                    counts["lines"] += lines
                    counts["tokens"] += tokens
    except (FileNotFoundError, ValueError):
        raise ReportError(f"{folder}: missing or incomplete; the binarizing stage (preprocess/binarize.sh) did not finish") from None
    info = folders[0] / "vocab_info.json"
    if info.is_file():
        kind = json.loads(info.read_text()).get("type")
        out["vocabulary"] = {"bytelevel-bpe": "Byte-level BPE", "sentencepiece": "SentencePiece", "wordpiece": "WordPiece"}.get(kind, kind)
    return out


def wall_seconds(steps: list) -> Optional[float]:
    """Seconds spent in training steps: fairseq's train_wall of each logged interval, summed. (Its ``wall`` clock
    starts again at a resume or a second length phase, where it can stay at 0.)"""
    return sum(float(step.get("train_wall") or 0) for step in steps) or None


def pretrained_arch(settings: dict, init: Optional[dict] = None) -> Optional[str]:
    """The architecture pretrained where its folder does not record one: a continued model's is INIT_FROM's (its
    conversion's --arch), not the preset's ARCH."""
    flags = (init or {}).get("fairseq_flags") or []
    return flags[flags.index("--arch") + 1] if "--arch" in flags else settings.get("ARCH")


def pretraining(folder: Path, arch: Optional[str] = None) -> dict:
    best = json.loads(_read(folder / "best.json", "the checkpoint-picking stage did not finish"))
    objective = objective_of(best)
    # one record per update: fairseq writes each line to --log-file once more per epoch, and a resume logs again
    steps = list({int(s["num_updates"]): s for s in records(folder / "train.log", "train_inner")}.values())
    check, original = folder / "check.json", folder / "original.json"
    arch_file = folder / "arch"
    return {"objective": objective.name, "arch": arch_file.read_text().strip() if arch_file.is_file() else arch,
            "check": json.loads(check.read_text()) if check.is_file() else None,
            "original": json.loads(original.read_text()) if original.is_file() else None,
            # a run shorter than --log-interval logs no training step: its last validation says how far it went
            "updates": int(steps[-1]["num_updates"]) if steps else max(v["update"] for v in best["validations"]),
            "wall_seconds": wall_seconds(steps),
            "best": {k: v for k, v in best.items() if k != "validations"},
            "validations": best["validations"],
            "train": [{"update": int(s["num_updates"]), "ppl": s[objective.curve]} for s in steps]}


def ner(pairs: list) -> dict:
    """NAME -> (runs per model, summaries); each data set's table is written beside its sweeps."""
    from biofairseq.finetune import sweep_report

    folders = defaultdict(list)
    for name, folder in pairs:
        folders[name].append(Path(folder))
    out = {}
    for name, sweeps in folders.items():
        out[name] = sweep_report.collect(sweeps)
        sweep_report.save(*out[name], sweeps[0].parent)
    return out


def markdown(run_dir: Path, found: dict) -> str:
    from biofairseq.finetune import sweep_report

    s, c, d, models = found["settings"], found["corpus"], found["data_bins"], found["pretrainings"]
    lines = [f"# {s.get('RECIPE', 'bsc_bio_es')}, PRESET={s.get('PRESET', '?')}", "",
             f"Run folder `{run_dir}`; its settings are in `recipe.env`. Every number below is read from the files the stages wrote.", "",
             *changes_lines(run_dir), "## Corpus (`clean/stats.json`)", ""]
    rows = [[name, f"{v['docs_in']:,}", f"{v['docs_out']:,}", f"{v['sentences_out']:,}", f"{v['tokens_out']:,}"]
            for name, v in [*c["sources"].items(), ("total", c["total"])]]
    lines += [markdown_table(["source", "documents in", "documents kept", "sentences", "words"], rows), "",
              f"{c['train_docs']:,} documents for training, {c['valid_docs']:,} held out for validation.", "",
              "## Vocabulary and data-bin", ""]
    for name, v in d.items():
        where = f"vocab/{name}/" if name else ("init_extended/" if found.get("extension") else "init/") \
            if s.get("INIT_FROM") else "vocab/"
        lines += [f"{f'`{name}`: ' if name else ''}{v.get('vocabulary', 'Byte-level BPE')} of {v['dictionary']:,} entries (`{where}`). "
                  f"`data-bin/{name + '/' if name else ''}`: "
                  + ", ".join(f"{split} {t['tokens']:,} tokens in {t['lines']:,} lines" for split, t in v.items() if isinstance(t, dict))
                  + (f", in {v['shards']} shards (one an epoch)" if v["shards"] > 1 else "") + ".", ""]
    if s.get("INIT_FROM"):
        start = found.get("init") or {}
        what = f", {with_article(start['family'])} model (`{start['transformers_class']}`)" if start.get("family") else ""
        lines += [f"Continual pretraining: the weights and the vocabulary are those of `INIT_FROM={s['INIT_FROM']}`{what} "
                  "(converted to fairseq in `init/`, parity-checked: `init/conversion.json`); no vocabulary was learned on "
                  "the corpus" + ("; VOCAB_EXTEND added words of it to INIT_FROM's (below)." if found.get("extension") else "."), ""]
    lines += extension_lines(found.get("extension"), s)
    for name, rows in found["breakout"].items():
        from biofairseq.recipe.breakout import format_rates

        vocabs = [k for k in next(iter(rows.values())) if k not in ("mentions", "words")]
        lines += [f"### Entity break-out rate on {name} (`breakout/{name}.md`)", "",
                  "Sub-tokens per word (Moses) of each vocabulary, over the entity mentions of the NER training set, per type "
                  "and in all, and over all its text (BioMegatron's Table 3; lower keeps more entities whole):", "",
                  format_rates(rows, vocabs), ""]
    if list(models) == [""]:
        lines += ["## Pretraining (`pretrain/`)", "", *_pretraining_lines(models[""], "pretrain")]
    else:
        lines += ["## Pretraining", "", "Each model's kept checkpoint, on the same held-out documents:", "",
                  markdown_table(*_side_by_side(models)), ""]
        for name, p in models.items():
            lines += [f"### {name} (`pretrain/{name}/`)", "", *_pretraining_lines(p, f"pretrain/{name}")]
    if s.get("INIT_FROM"):
        lines += continuation_lines(models, found["ner"], bool(found.get("extension")))
    for name, (_, summaries) in found["ner"].items():
        lines += [f"## NER: {name} (`ner/{name}/`)", "", sweep_report.markdown(summaries), "", *sweep_report.best_lines(summaries, run_dir), ""]
        lines += _labelling_lines(summaries)
    if found["ner"]:
        lines += ["Scores are exact-span, exact-type micro averages, in %; for BRAT data, the official scorers' (every gold mention of "
                  "the .ann files, nested ones included), with seqeval's score of the flattened BIO beside them where it differs "
                  "(the bsc-bio-es paper's Table 2 is seqeval's). Each run is scored with its best-on-dev checkpoint; "
                  "mean ± sample std over all LRs and seeds, then the run best on dev with its LR and epoch (the paper's Table 2), "
                  "and the median over seeds of the LR with the best median dev F1 (bio-lm's statistic).", ""]
    lines += ["![pretraining perplexity and NER dev F1](report.png)", ""]
    return "\n".join(lines)


def continuation_rows(models: dict, ner: dict) -> tuple:
    """The original model beside the continued one: validation perplexity on the run's held-out documents, and each
    NER set's F1 (mean ± std over the runs); the difference, and whether it is larger than the seeds' spread (the
    larger of the two standard deviations). Returns (headers, rows, [(set, difference, beyond the spread)])."""
    p = next(iter(models.values()))
    original, best = p.get("original"), p["best"]
    headers, ppl = ["model", "valid ppl"], [original and original.get("ppl"), best.get("ppl")]
    rows = [["original (INIT_FROM, as given)" + (f", its LM head warmed {original['head_warmup_updates']:,} updates"
                                                 if original and original.get("head_warmup_updates") else ""),
             f"{ppl[0]:.2f}" if ppl[0] else "-"], ["continued", f"{ppl[1]:.2f}" if ppl[1] else "-"]]
    verdicts = []
    for name, (_, summaries) in ner.items():
        by_model = {s["model"].removeprefix("model="): s for s in summaries}
        mine = by_model.get("original"), next((s for m, s in by_model.items() if m not in ("original", "random_init")), None)
        if not all(mine):
            continue
        split = mine[0]["split"]
        headers.append(f"{name} {split} F1 %")
        for row, summary in zip(rows, mine):
            row.append(f"{100 * summary['f1']['mean']:.2f} ± {100 * summary['f1']['std']:.2f}")
        difference = 100 * (mine[1]["f1"]["mean"] - mine[0]["f1"]["mean"])
        spread = 100 * max(mine[0]["f1"]["std"], mine[1]["f1"]["std"])
        verdicts.append((f"{name} {split} F1", difference, abs(difference) > spread, spread))
    if ppl[0] and ppl[1]:
        verdicts.insert(0, ("validation perplexity", ppl[1] - ppl[0], None, None))
    return headers, rows, verdicts


def continuation_lines(models: dict, ner: dict, extended: bool = False) -> list:
    """The section that says, in words, whether continuing INIT_FROM helped (extended: by VOCAB_EXTEND too)."""
    if len(models) != 1:
        return []
    headers, rows, verdicts = continuation_rows(models, ner)
    if not verdicts:
        return []
    lines = ["## The original model against the continued one", "",
             "The model of `INIT_FROM` as given and after the continued pretraining, on the same held-out documents "
             "(the same masks) and NER data:", "", markdown_table(headers, rows), ""]
    if extended:
        lines += ["With `VOCAB_EXTEND` the original's perplexity is INIT_FROM's with the new tokens' rows (their pieces' "
                  "means), on the same tokens as the continued model; its NER is INIT_FROM's as given, with its own "
                  "vocabulary.", ""]
    said = []
    for what, difference, beyond, spread in verdicts:
        if beyond is None:
            said.append(f"validation perplexity {'fell' if difference < 0 else 'rose'} by {abs(difference):.2f}")
        elif difference > 0 and beyond:
            said.append(f"{what} rose by {difference:.2f} points, more than the seeds' spread ({spread:.2f})")
        else:
            said.append(f"{what} {'rose' if difference > 0 else 'fell'} by {abs(difference):.2f} points, "
                        f"{'more' if beyond else 'no more'} than the seeds' spread ({spread:.2f})")
    helped = any(beyond and difference > 0 for _, difference, beyond, _ in verdicts if beyond is not None)
    tried = any(beyond is not None for _, _, beyond, _ in verdicts)
    verdict = ("The continuation helped on NER" if helped else "The continuation did not help on NER" if tried
               else "No NER compares the two")
    lines += [f"{verdict}: {'; '.join(said)}.", ""]
    return lines


def _labelling_lines(summaries):
    """BioMegatron's comparison of whole-word and sub-token labelling, one row per model (sweeps model=X,labels=Y)."""
    by_model = defaultdict(dict)
    for summary in summaries:
        model, _, labelling = summary["model"].partition(",labels=")
        if labelling:
            by_model[model][labelling] = summary
    pairs = {m: v for m, v in by_model.items() if {"whole-word", "sub-token"} <= v.keys()}
    if not pairs:
        return []
    split = next(iter(pairs.values()))["whole-word"]["split"]
    f1 = lambda s: f"{100 * s['f1']['mean']:.2f} ± {100 * s['f1']['std']:.2f}"
    rows = [[m, f1(v["whole-word"]), f1(v["sub-token"]), f"{100 * (v['sub-token']['f1']['mean'] - v['whole-word']['f1']['mean']):+.2f}"]
            for m, v in pairs.items()]
    return [f"Labelling (BioMegatron's Figure 1): whole-word labels each word's first sub-token only; sub-token labels every "
            f"sub-token (B-X, then I-X). Both are scored on the same words ({split} F1 %, mean ± std):", "",
            markdown_table(["model", "whole-word", "sub-token", "sub-token − whole-word"], rows), ""]


def _pretraining_lines(p, folder):
    b = p["best"]
    objective = objective_of(b)
    wall = f" in {p['wall_seconds'] / 60:.1f} minutes of training steps (fairseq's train_wall)" if p["wall_seconds"] else ""
    kept = "the final checkpoint" if b.get("metric") == "last" else f"the best validation {b.get('metric', 'ppl')}"
    lines = [f"`{p.get('arch') or '?'}`, {objective.name}, {p['updates']:,} updates{wall}. Kept: {kept}, update "
             f"{b['update']:,} ({objective.summary(b)}): `{b['checkpoint']}`, converted to transformers in `hf/`.", ""]
    warmed = (p.get("original") or {}).get("head_warmup_updates")
    if warmed:
        lines += [f"`INIT_FROM` has no trained LM head: the head was trained alone first, for {warmed:,} updates with the "
                  f"encoder held fixed (`{folder}/head/`), then the whole model from there.", ""]
    headers, rows = objective.table(p["validations"])
    lines += [markdown_table(headers, rows), ""]
    findings = objective.findings(p["validations"])
    lines += findings + ([""] if findings else [])
    if p["check"]:
        from biofairseq.recipe.pretraining_check import sentence

        verdict = sentence(p["check"])
        lines += [f"Check against word frequencies (`{folder}/check.json`): {verdict[0].upper()}{verdict[1:]}.", ""]
    return lines


def _side_by_side(models):
    rows = []
    for name, p in models.items():
        b = p["best"]
        objective = objective_of(b)
        rows.append([name, f"`{p.get('arch') or '?'}`", objective.name, f"{p['updates']:,}",
                     f"{p['wall_seconds'] / 60:.1f}" if p["wall_seconds"] else "-", f"{b['update']:,}",
                     f"{b[objective.ppl]:.2f}", percent(b.get(objective.accuracy))])
    return ["model", "architecture", "objective", "updates", "minutes", "kept update", "valid ppl", "masked acc. %"], rows


def plot(found: dict, path: Path) -> None:
    import logging

    from biofairseq.finetune import sweep_report

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq's import leaves the root logger verbose

    fig, axes = sweep_report.figure(1 + len(found["ner"]))  # pretraining, then one panel per NER data set
    models = found["pretrainings"]
    for label, p in models.items():
        line, = axes[0].plot([t["update"] for t in p["train"]], [t["ppl"] for t in p["train"]], label=f"{label} train".strip())
        key = objective_of(p["best"]).curve
        axes[0].plot([v["update"] for v in p["validations"]], [v[key] for v in p["validations"]], marker="o", markersize=3,
                     color=line.get_color(), linestyle="--", label=f"{label} valid".strip())
    electra = any(p.get("objective") == Electra.name for p in models.values())
    axes[0].set(title="pretraining", xlabel="update", ylabel="generator perplexity" if electra else "perplexity", yscale="log")
    axes[0].grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    for ax, (name, (groups, _)) in zip(axes[1:], found["ner"].items()):
        sweep_report.plot_dev_f1(ax, f"{name}: dev F1", groups)
    sweep_report.save_figure(fig, path)


def extension_lines(record: Optional[dict], s: dict) -> list:
    """What VOCAB_EXTEND added (``init_extended/conversion.json``), and its two checks."""
    if not record:
        return []
    lines = ["### Vocabulary extension (`init_extended/`)", "",
             f"`VOCAB_EXTEND={s.get('VOCAB_EXTEND')}`: {record['added']:,} new tokens "
             + (f"({record['words']:,} of them words, the rest steps of byte-level BPE merges) "
                if record["words"] != record["added"] else "")
             + f"after INIT_FROM's own, chosen from the {record['candidates']:,} "
             f"words of the training text it cut into several pieces and seen at least {record['min_count']} times, by "
             f"{record['selection']}; they save {record['tokens_saved']:,} tokens of the training text. Each new row is "
             "the mean of the rows of the pieces INIT_FROM's vocabulary cut the token into; every old id keeps its row.", ""]
    same, loss = record.get("unchanged_text"), record.get("update_0")
    if same:
        lines += [f"On {same['lines']} validation lines holding no new token the ids are "
                  f"{'the same' if same['ids_identical'] else 'not the same'} and the logits over the old vocabulary differ "
                  f"by at most {same['max_abs_diff_logits']:.1e} from the original's.", ""]
    if loss and loss["new_tokens"]["masked"]:
        new, old = loss["new_tokens"], loss["old_tokens"]
        lines += [f"Before any training (update 0), on {loss['lines']} validation lines that hold new tokens: masked-LM "
                  f"loss {new['loss']:.2f} (base 2) on the {new['masked']:,} new tokens masked, accuracy "
                  f"{new['accuracy']:.1%}; {old['loss']:.2f}, accuracy {old['accuracy']:.1%}, on as many old tokens of the "
                  "same lines, masked with them.", ""]
    return lines


def write(run_dir: Path, ner_pairs: list, pretrain_pairs: tuple = (), data_bin_pairs: tuple = (),
          breakout_pairs: tuple = ()) -> str:
    """pretrain_pairs: (name, folder) of each model a recipe pretrained; none: the one model in RUN_DIR/pretrain.
    data_bin_pairs: (name, folder) of each vocabulary's data-bin; none: RUN_DIR/data-bin."""
    run_dir = Path(run_dir)
    found = {"settings": settings(run_dir), "settings_changes": settings_changes(run_dir), "corpus": corpus(run_dir),
             "data_bins": ({name: data_bin(Path(folder)) for name, folder in data_bin_pairs} if data_bin_pairs
                           else {"": data_bin(run_dir / "data-bin")}),
             "breakout": {name: json.loads(_read(Path(path), "the break-out stage (preprocess/vocab_stats.py) did not finish"))
                          for name, path in breakout_pairs}}
    conversion = run_dir / "init" / "conversion.json"  # INIT_FROM's: what the pretraining continued
    if conversion.is_file():
        found["init"] = {k: json.loads(conversion.read_text()).get(k) for k in ("family", "transformers_class", "fairseq_flags")}
    extended = run_dir / "init_extended" / "conversion.json"  # VOCAB_EXTEND's
    if extended.is_file():
        found["extension"] = json.loads(extended.read_text()).get("vocabulary_extension")
    arch = pretrained_arch(found["settings"], found.get("init"))
    found["pretrainings"] = ({name: pretraining(Path(folder), arch) for name, folder in pretrain_pairs} if pretrain_pairs
                             else {"": pretraining(run_dir / "pretrain", arch)})
    found["ner"] = ner(ner_pairs)
    text = markdown(run_dir, found)
    plot(found, run_dir / "report.png")
    as_json = {**found, "ner": {name: summaries for name, (_, summaries) in found["ner"].items()}}
    if list(found["pretrainings"]) == [""]:  # one model: "pretraining"; several: "pretrainings", by name
        as_json["pretraining"] = as_json.pop("pretrainings")[""]
    if list(found["data_bins"]) == [""]:  # the same for vocabularies: "data_bin", or "data_bins" by name
        as_json["data_bin"] = as_json.pop("data_bins")[""]
    write_text(run_dir / "report.json", json.dumps(as_json, indent=1, ensure_ascii=False) + "\n")
    write_text(run_dir / "report.md", text)
    return text


def _pair(text):
    name, sep, folder = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text}: give NAME=FOLDER")
    return name, folder


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biofairseq.recipe.report", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--pretrain", type=_pair, action="append", default=[], metavar="NAME=DIR",
                        help="a pretrained model's folder (train.log, best.json), for recipes that pretrain several; repeat")
    parser.add_argument("--data-bin", type=_pair, action="append", default=[], metavar="NAME=DIR",
                        help="a vocabulary's data-bin, for recipes that learn several (vocabulary in vocab/NAME); repeat")
    parser.add_argument("--breakout", type=_pair, action="append", default=[], metavar="NAME=JSON",
                        help="entity break-out rates on NER data set NAME (preprocess/vocab_stats.py --output); repeat")
    parser.add_argument("--ner", type=_pair, action="append", default=[], metavar="NAME=SWEEP_DIR",
                        help="a data set's sweep folder of one model (biofairseq-ner sweep --output-dir); repeat")
    args = parser.parse_args(argv)
    from biofairseq.finetune import NERFormatError

    try:
        write(args.run_dir, args.ner, args.pretrain, args.data_bin, args.breakout)
    except (ReportError, NERFormatError) as error:
        print(f"report: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.run_dir}/report.md, report.json and report.png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
