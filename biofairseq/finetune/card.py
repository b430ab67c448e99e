"""The model card of a fine-tuned NER model: the Hub's metadata and the figures its run knows, in ``model/README.md``.

So that the saved folder says what it is wherever it is copied or pushed: the base model, the data, the labels,
the dev and test P/R/F1 overall and per type with the scorer that counted them, and the settings that made it.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biofairseq.finetune import splits
from biofairseq.finetune.fingerprint import is_hub_id
from biofairseq.finetune.metrics import SCORERS
from biofairseq.model_card import read_metadata, write_model_card
from biofairseq.text.tables import markdown_table



def scorer(scores: Mapping[str, Any]) -> str:
    return scores.get("scorer", "seqeval")


def dataset_name(path: str | Path) -> str:
    """A data set's name from its path: the folder that holds the split (pharmaconer/train, ncbi/train.tsv)."""
    path = Path(path).resolve()
    if path.stem.lower() in (*splits.NAMES, "training", "validation") or path.is_file():
        return path.parent.name
    return path.name


def base_metadata(source: str | Path) -> dict[str, Any]:
    """The base model's card metadata (language, license) where it has a card: a local folder's README.md, or a Hub
    model's card if the cache holds it."""
    if not is_hub_id(source):
        return read_metadata(source)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source, "README.md")
    return read_metadata(Path(found).parent) if isinstance(found, str) else {}


def metadata(report: Mapping[str, Any], source: str | Path, given: Mapping[str, str | None],
             train_path: str | Path) -> dict[str, Any]:
    """The Hub's metadata: language and license (given, else the base model's), tags, base_model (a Hub id),
    datasets (given), and a model-index with the dev and test P/R/F1."""
    base = base_metadata(source)
    name = given.get("dataset") or dataset_name(train_path)
    results = []
    for split in ("test", "dev"):
        scores = report.get(split)
        if not scores:
            continue
        results.append({
            "task": {"type": "token-classification", "name": "Named Entity Recognition"},
            "dataset": {"type": name, "name": name, "split": split},
            "metrics": [{"type": key, "value": round(float(scores[key]), 4), "name": f"{split} {label} ({scorer(scores)})"}
                        for key, label in (("f1", "F1"), ("precision", "precision"), ("recall", "recall"))],
        })
    return {
        "language": given.get("language") or base.get("language"),
        "license": given.get("license") or base.get("license") or "unknown",
        "library_name": "transformers",
        "pipeline_tag": "token-classification",
        "tags": ["token-classification", "ner", "biofairseq"],
        "base_model": str(source) if is_hub_id(source) else None,
        "datasets": [given["dataset"]] if given.get("dataset") else None,
        "metrics": ["f1", "precision", "recall"],
        "model-index": [{"name": model_name(source, name), "results": results}],
    }


def model_name(source: str | Path, dataset: str) -> str:
    """base-ner-dataset, from the base model's name (its folder's; a train output's model/: the run's) and the data set's."""
    path = Path(str(source)).resolve() if not is_hub_id(source) else Path(str(source))
    base = path.parent.name if path.name == "model" and not is_hub_id(source) else path.name
    return f"{base}-ner-{dataset.rstrip('/').split('/')[-1]}"


def body(report: Mapping[str, Any], source: str | Path, name: str, paths: Mapping[str, str | Path | None]) -> str:
    pct = lambda x: f"{100 * x:.2f}"
    o, best = report["options"], report["best"] or {}
    splits = [s for s in ("dev", "test") if report.get(s)]
    used = scorer(report[splits[0]])
    test = f", test: `{paths['test']}`" if paths.get("test") else ""
    rows = [[s, pct(report[s]["precision"]), pct(report[s]["recall"]), pct(report[s]["f1"]), f"{report[s]['support']:,}"] for s in splits]
    header = ["split", "P", "R", "F1", "gold entities"]
    if used == "brat":
        header.append("F1, seqeval on the BIO files")
        for row, s in zip(rows, splits):
            row.append(pct(report[s]["seqeval"]["f1"]))
    lines = [
        f"# {name}", "",
        f"A named-entity recognition model: `{source}` with a token-classification head fine-tuned by `biofairseq-ner train` "
        f"on `{paths['train']}` (dev: `{paths['dev']}`{test}). "
        f"Labels: {', '.join(f'`{l}`' for l in report['labels'])}.", "",
        "## Results", "",
        f"Scores (%) of the best-on-dev checkpoint (epoch {best.get('epoch', '-')}, update {best.get('step', '-')}), "
        f"by {SCORERS[used]}.", "",
        markdown_table(header, rows), "",
    ]
    for s in splits:
        per_type = report[s].get("per_type", {})
        unseen = report.get("unseen_types", {}).get(s, [])  # --allow-unseen-types: no label for them, all missed
        if per_type:
            lines += [f"{s} per entity type ({used}):", "",
                      markdown_table(["type", "P", "R", "F1", "support"],
                                     [[t + (" (never seen in training)" if t in unseen else ""), pct(v["precision"]), pct(v["recall"]),
                                       pct(v["f1"]), f"{v['support']:,}"] for t, v in per_type.items()]), ""]
    head = "linear (transformers')" if o["num_fc_layers"] == 1 else f"Linear + ReLU + Linear, {o['fc_hidden_size'] or 'encoder'} wide (BioMegatron's)"
    settings = [
        ["learning rate", f"{o['lr']:g}"], ["seed", str(o["seed"])], ["epochs", f"{o['epochs']:g}"],
        ["batch size x gradient accumulation", f"{o['batch_size']} x {o['gradient_accumulation']}"],
        ["weight decay", f"{o['weight_decay']:g}"], ["warm-up ratio", f"{o['warmup_ratio']:g}"],
        ["layer-wise LR decay", f"{o['layerwise_lr_decay']:g}"], ["max length (sub-tokens per window)", str(report["max_length"])],
        ["window overlap", str(report.get("window_overlap", o["window_overlap"]))], ["label scheme", o["label_scheme"]], ["head", head],
        ["precision", report["precision"]], ["training time", f"{report['train_seconds']:g} s"],
    ]
    lines += ["## Training", "", markdown_table(["setting", "value"], settings), ""]
    problems = {s: p for s, p in report.get("data_problems", {}).items() if p.get("count")}
    if problems:
        lines += ["Reading the data changed some entities (`data_problems` in the run's metrics.json): "
                  + "; ".join(f"{s}: {p['count']} ({p['dropped']} dropped)" for s, p in problems.items()) + ".", ""]
    lines += [
        "## Use", "",
        "`biofairseq-ner predict --model THIS_FOLDER --input notes/ --output-dir tagged/` tags a folder of .txt files, a .txt "
        "file, BRAT or CoNLL data as the run was scored (sentences, words, long sentences in overlapping windows)."
        + (" transformers' `pipeline(\"token-classification\", model=THIS_FOLDER)` loads it too." if o["num_fc_layers"] == 1 else
           " Its two-layer head is biofairseq's: load it with `biofairseq.finetune.head.load`, not `AutoModelForTokenClassification` alone."),
        "",
    ]
    return "\n".join(lines)


def write(folder: str | Path, report: Mapping[str, Any], source: str | Path, given: Mapping[str, str | None],
          paths: Mapping[str, str | Path | None]) -> Path:
    """Writes ``folder/README.md`` for a run's ``metrics.json`` content ``report``; ``given``: the user's language,
    license and dataset (Hub id or name), each optional; ``paths``: the train, dev and test data."""
    meta = metadata(report, source, given, paths["train"])
    return write_model_card(folder, meta, body(report, source, meta["model-index"][0]["name"], paths))
