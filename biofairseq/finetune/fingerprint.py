"""Which model a fine-tuning run read: sha256 of its weight files (``*.safetensors``, ``*.bin``) in name order.

Runs and sweeps record it (a run's metrics.json, a sweep's model.sha256); a sweep folder is finished for a model when
its report is whole and model.sha256 is that model's. The recipes ask before stage 7:

    python -m biofairseq.finetune.fingerprint MODEL_DIR                the fingerprint
    python -m biofairseq.finetune.fingerprint check-sweep SWEEP MODEL [LRS SEEDS]
        a sweep of another model, one whose report was cut short, or one of another grid (LRS and SEEDS
        comma-separated): its report.json goes (the sweep runs again, keeping its finished runs)
"""

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

from biofairseq.finetune.sweep_folder import asked, grid

# a sweep's report, in the order biofairseq.finetune.sweep_report writes it: report.json alone is a report cut short
REPORT = ("report.json", "report.md", "dev_f1.png")


def weights_sha256(model_dir: str | Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).iterdir() if p.suffix in (".safetensors", ".bin")):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def is_hub_id(source: str | Path) -> bool:
    """A model given by its Hub id (biofairseq.finetune.training.resolve_model gives local folders as Paths)."""
    return not isinstance(source, Path)


def model_fingerprint(source: str | Path) -> str:
    """What runs record of their model: sha256 of a local folder's weights, or a Hub model's id and commit."""
    if not is_hub_id(source):
        return weights_sha256(source)
    from transformers.utils import cached_file

    return f"{source}@{Path(cached_file(source, 'config.json')).parent.name}"


def stale_sweep(sweep_dir: str | Path, model_dir: str | Path, lrs: Sequence[float | str] | None = None,
                seeds: Sequence[int | str] | None = None) -> str | None:
    """Why sweep_dir's report is not model_dir's finished sweep of the grid lrs x seeds (when given), or None (no
    report yet, or a current one)."""
    sweep_dir = Path(sweep_dir)
    if not (sweep_dir / REPORT[0]).is_file():
        return None
    recorded = sweep_dir / "model.sha256"
    if not recorded.is_file() or recorded.read_text().strip() != weights_sha256(model_dir):
        return f"{model_dir} changed since {sweep_dir} was run; its runs are redone"
    if not all((sweep_dir / name).is_file() for name in REPORT[1:]):
        return f"{sweep_dir}: its report was cut short; the sweep writes it again"
    ran = asked(sweep_dir)  # None: a sweep of an older version, which did not record its grid
    if lrs is not None and ran is not None and ran != [sweep_dir / name for name in grid(lrs, seeds)]:
        return f"{sweep_dir}: another grid of learning rates and seeds is asked for; its finished runs are kept"
    return None


def check_sweep(sweep_dir: str | Path, model_dir: str | Path, lrs: Sequence[float | str] | None = None,
                seeds: Sequence[int | str] | None = None) -> None:
    why = stale_sweep(sweep_dir, model_dir, lrs, seeds)
    if why:
        print(f"note: {why}", file=sys.stderr)
        (Path(sweep_dir) / REPORT[0]).unlink()


if __name__ == "__main__":
    if sys.argv[1:2] == ["check-sweep"] and len(sys.argv) in (4, 6):
        check_sweep(sys.argv[2], sys.argv[3], *([w.strip() for w in a.split(",") if w.strip()] for a in sys.argv[4:]))
    elif len(sys.argv) == 2:
        print(weights_sha256(sys.argv[1]))
    else:
        sys.exit(__doc__)
