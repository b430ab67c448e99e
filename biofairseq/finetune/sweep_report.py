"""The NER table of the bsc-bio-es paper (Carrino et al. 2022, Table 2) and bio-lm's median, from finished runs.

Each run's scores are those of its best-on-dev checkpoint. Per model (a sweep folder):
- mean ± sample standard deviation of the test F1, P and R over every run (all LRs and seeds);
- the run that is best on dev (ties: the earlier LR, then seed), with its test F1, LR and epoch;
- the median of the test F1 over the seeds of the LR whose median dev F1 is highest (bio-lm's statistic);
- per entity type, the mean ± std of the test P, R and F1 over every run, by the same scorer as the overall scores;
- the types never seen in training (runs with --allow-unseen-types): no label for them, so their mentions count as missed.

Runs are grouped by the value of their learning rate, not its spelling (1e-3 and 0.001 are one).

For BRAT data the scores are the shared tasks' official ones: the BRAT predictions against every gold
mention of the .ann files, nested and overlapping ones included (PharmaCoNER, CANTEMIST). Where seqeval's
score of the flattened BIO files differs, its mean is shown beside them: bsc-bio-es (Carrino et al. 2022)
fine-tuned with transformers' token-classification defaults, whose F1 is seqeval's on the BIO files, so its
Table 2 compares with that column; the shared tasks' leaderboards compare with the official one.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biofairseq.atomic import write_text
from biofairseq.finetune import NERFormatError
from biofairseq.finetune.metrics import SCORERS
from biofairseq.finetune.sweep_folder import asked
from biofairseq.text.tables import markdown_table

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def runs(folder: str | Path) -> list[dict[str, Any]]:
    """metrics.json of every finished run under ``folder`` (one run, or a sweep folder: the runs it was last asked
    for), with LR and seed."""
    folder = Path(folder)
    grid = asked(folder)
    found = (sorted(p / "metrics.json" for p in grid if (p / "metrics.json").is_file()) if grid is not None
             else sorted(folder.rglob("metrics.json")) if folder.is_dir() else [])
    if not found:
        raise NERFormatError(f"{folder}: no finished run (metrics.json from biofairseq-ner train or sweep) below it; give a sweep or run folder")
    out = []
    for path in found:
        try:
            m = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise NERFormatError(f"{path}: not a JSON file biofairseq-ner wrote (damaged?); rerun that training run or remove its folder") from None
        if not isinstance(m, dict) or "history" not in m or "options" not in m:  # biofairseq-ner predict's, not a training run's
            continue
        out.append({"path": str(path.parent), "lr": setting(m["options"]["lr"]), "seed": int(m["options"]["seed"]), "best": m["best"],
                    "dev": m["dev"], "test": m.get("test"), "history": m["history"], "unseen": m.get("unseen_types") or {}})
    if not out:
        raise NERFormatError(f"{folder}: no finished training run below it (only biofairseq-ner predict outputs); give a sweep or run folder")
    return out


def setting(value: float | str) -> float:
    """A numeric setting as runs are grouped by it: 1e-3, "1e-3", 0.001 and 0.1 * 0.01 are one learning rate."""
    return float(f"{float(value):.12g}")


def per_type(model_runs: Iterable[Mapping[str, Any]], split: str) -> dict[str, dict[str, Any]]:
    """{type: {"precision", "recall", "f1": mean and std over the runs that score the type, "support", "runs"}}, from each
    run's per-type scores (the official scorer's for BRAT data, seqeval's for CoNLL)."""
    found = defaultdict(list)
    for r in model_runs:
        for kind, v in r[split].get("per_type", {}).items():
            found[kind].append(v)
    stat = lambda v: {"mean": statistics.fmean(v), "std": statistics.stdev(v) if len(v) > 1 else 0.0}
    return {kind: {**{k: stat([v[k] for v in vs]) for k in ("precision", "recall", "f1")}, "support": max(v["support"] for v in vs), "runs": len(vs)}
            for kind, vs in sorted(found.items())}


def summarize(name: str, model_runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    split = "test" if all(r["test"] for r in model_runs) else "dev"
    values = {k: [r[split][k] for r in model_runs] for k in ("f1", "precision", "recall")}
    stat = lambda v: {"mean": statistics.fmean(v), "std": statistics.stdev(v) if len(v) > 1 else 0.0}
    best = max(sorted(model_runs, key=lambda r: (r["lr"], r["seed"])), key=lambda r: r["dev"]["f1"])
    by_lr = defaultdict(list)
    for r in model_runs:
        by_lr[r["lr"]].append(r)
    median_lr = max(sorted(by_lr), key=lambda lr: statistics.median(r["dev"]["f1"] for r in by_lr[lr]))
    seqeval = [r[split]["seqeval"]["f1"] for r in model_runs if "seqeval" in r[split]]
    return {
        "model": name, "split": split,
        "seqeval_f1": stat(seqeval) if len(seqeval) == len(model_runs) else None, "runs": len(model_runs), "lrs": sorted(by_lr), "seeds": sorted({r["seed"] for r in model_runs}),
        **{k: stat(v) for k, v in values.items()},
        "dev_f1": stat([r["dev"]["f1"] for r in model_runs]),  # what settings are chosen on, beside what is reported
        "best_on_dev": {"f1": best[split]["f1"], "precision": best[split]["precision"], "recall": best[split]["recall"],
                        "dev_f1": best["dev"]["f1"], "lr": best["lr"], "seed": best["seed"], "epoch": best["best"]["epoch"] if best["best"] else None,
                        "path": best["path"]},
        "median_over_seeds": {"f1": statistics.median(r[split]["f1"] for r in by_lr[median_lr]), "lr": median_lr, "seeds": len(by_lr[median_lr])},
        "scorer": model_runs[0][split].get("scorer", "seqeval"),
        "per_type": per_type(model_runs, split),
        "unseen_types": sorted({t for r in model_runs for t in r["unseen"].get(split, [])}),  # never learned: all missed
    }


def markdown(summaries: Sequence[Mapping[str, Any]]) -> str:
    pct = lambda s: f"{100 * s['mean']:.2f} ± {100 * s['std']:.2f}"
    split = summaries[0]["split"]
    epoch = lambda e: "-" if e is None else f"{e:g}"  # a run selected without a recorded epoch
    rows = [[s["model"], str(s["runs"]), pct(s["f1"]), pct(s["precision"]), pct(s["recall"]),
             f"{100 * s['best_on_dev']['f1']:.2f}", f"{s['best_on_dev']['lr']:g}", epoch(s["best_on_dev"]["epoch"]),
             f"{100 * s['median_over_seeds']['f1']:.2f} (lr {s['median_over_seeds']['lr']:g})"] for s in summaries]
    header = ["model", "runs", f"{split} F1 mean ± std", "P mean ± std", "R mean ± std", f"best-on-dev {split} F1", "its LR",
              "its epoch", f"median {split} F1 over seeds"]
    if split == "test":
        header.insert(5, "dev F1 mean ± std")
        for row, s in zip(rows, summaries):
            row.insert(5, pct(s["dev_f1"]))
    differ = [s for s in summaries if s["seqeval_f1"] and abs(s["seqeval_f1"]["mean"] - s["f1"]["mean"]) > 5e-5]
    if differ:
        header[2] = f"{split} F1 mean ± std (BRAT scorer)"
        header.append(f"{split} F1, seqeval on BIO")
        for row, s in zip(rows, summaries):
            row.append(pct(s["seqeval_f1"]) if s["seqeval_f1"] else "-")
    unseen = [s for s in summaries if s.get("unseen_types")]
    return markdown_table(header, rows) + "".join(
        f"\n\n{s['model']}: {split} entity types never seen in training: {', '.join(s['unseen_types'])}; the model has no "
        "label for them, so their gold mentions count as missed in these scores (trained with --allow-unseen-types)." for s in unseen)


def best_lines(summaries: Iterable[Mapping[str, Any]], root: str | Path | None = None) -> list[str]:
    """Where each model's run best on dev is, its seed, and the model to take from it (a folder relative to ``root``
    where it is inside)."""
    lines = []
    for s in summaries:
        best, path = s["best_on_dev"], Path(s["best_on_dev"]["path"])
        if root is not None and Path(root).resolve() in path.resolve().parents:
            path = path.resolve().relative_to(Path(root).resolve())
        lines.append(f"- {s['model']}: best on dev, lr {best['lr']:g}, seed {best['seed']}: `{path}/` (its fine-tuned "
                     f"model: `{path}/model/`)")
    return lines


def per_type_markdown(summaries: Sequence[Mapping[str, Any]]) -> str:
    """Per entity type, mean ± std of P, R and F1 over each model's runs, with the scorer named."""
    pct = lambda s: f"{100 * s['mean']:.2f} ± {100 * s['std']:.2f}"
    unseen = lambda s, kind: " (never seen in training)" if kind in s.get("unseen_types", ()) else ""
    rows = [[s["model"], kind + unseen(s, kind), f"{v['support']:,}", pct(v["precision"]), pct(v["recall"]), pct(v["f1"])]
            for s in summaries for kind, v in s.get("per_type", {}).items()]
    if not rows:
        return ""
    split = summaries[0]["split"]
    scorers = "; ".join(f"{s['model']}: {s['scorer']}" for s in summaries) if len({s["scorer"] for s in summaries}) > 1 else summaries[0]["scorer"]
    header = ["model", "type", f"{split} entities", "P mean ± std", "R mean ± std", "F1 mean ± std"]
    named = "; ".join(SCORERS.get(k, k) for k in sorted({s["scorer"] for s in summaries}))
    return f"Per entity type, {split} set, mean ± std over the runs (scorer: {scorers}; {named}):\n\n{markdown_table(header, rows)}"


def plot_dev_f1(ax: Axes, title: str, groups: Mapping[str, Iterable[Mapping[str, Any]]]) -> None:
    """Dev F1 per epoch of every model on one axis, so that a model and its random-init twin compare at a glance:
    one colour per model, one line style per LR, each line the mean over its seeds."""
    styles = ("-", "--", ":", "-.")
    for name, model_runs in groups.items():
        by_lr = defaultdict(lambda: defaultdict(list))
        for r in model_runs:
            for h in r["history"]:
                by_lr[r["lr"]][h["epoch"]].append(100 * h["f1"])
        color = None
        for i, lr in enumerate(sorted(by_lr)):
            epochs = sorted(by_lr[lr])
            line, = ax.plot(epochs, [statistics.fmean(by_lr[lr][e]) for e in epochs], marker="o", markersize=3,
                            linestyle=styles[i % len(styles)], color=color, label=f"{name}, lr {lr:g}")
            color = line.get_color()
    ax.set(title=title, xlabel="epoch", ylabel="dev F1 (%), seqeval, mean over seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def figure(panels: int) -> tuple[Figure, np.ndarray]:
    """A row of ``len(panels)`` axes; returns (figure, axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6), squeeze=False)
    return fig, axes[0]


def save_figure(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def plot(groups: Mapping[str, Iterable[Mapping[str, Any]]], path: Path) -> None:
    """Dev F1 per epoch of every model, on one axis."""
    fig, axes = figure(1)
    plot_dev_f1(axes[0], "NER: dev F1 per epoch, one line per LR", groups)
    save_figure(fig, path)


def collect(run_folders: Sequence[str | Path]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """(finished runs per model, their summaries); a model is named by its folder (sweep folders of models)."""
    groups = {}
    for folder in run_folders:
        name = Path(folder).resolve().name
        while name in groups:
            name += "'"
        groups[name] = runs(folder)
    summaries = [summarize(name, r) for name, r in groups.items()]
    if len({s["split"] for s in summaries}) > 1:
        raise NERFormatError(f"{', '.join(map(str, run_folders))}: some runs have a test set and some do not; report them separately")
    return groups, summaries


def write(run_folders: Sequence[str | Path], output_dir: str | Path) -> str:
    """Writes report.md, report.json and dev_f1.png into ``output_dir`` and returns the Markdown table."""
    return save(*collect(run_folders), output_dir)


def save(groups: Mapping[str, Iterable[Mapping[str, Any]]], summaries: list[dict[str, Any]],
         output_dir: str | Path) -> str:
    """``write`` for runs already collected."""
    table = markdown(summaries)
    types = per_type_markdown(summaries)
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise NERFormatError(f"--output-dir {output_dir}: a file; give a folder for report.md, report.json and dev_f1.png")
    output_dir.mkdir(parents=True, exist_ok=True)
    write_text(output_dir / "report.json", json.dumps(summaries, indent=1) + "\n")
    write_text(output_dir / "report.md", f"{table}\n\n{types + chr(10) + chr(10) if types else ''}{__doc__.split(chr(10), 1)[1].strip()}\n")
    plot(groups, output_dir / "dev_f1.png")
    return table
