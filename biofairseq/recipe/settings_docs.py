"""docs/recipes.md's tables, generated from the settings' list and the presets (a test holds the two equal):
python -m biofairseq.recipe docs."""

from biofairseq.recipe.presets import RECIPES, SHARED, Derived, Fixed, Required, continuation, source_of, value_of
from biofairseq.recipe.table import SETTINGS, names

RUN_CONTROL = ("RUN_DIR", "STOP_AFTER", "FORCE", "NUM_GPUS", "NUM_NODES", "WORKERS", "NER_GPU", "DISTRIBUTED_PORT")


def _cell(entry):
    if isinstance(entry, Fixed):
        return f"{_cell(entry.value)}, fixed"
    if isinstance(entry, Derived):
        return entry.described if entry.described[0].islower() else f"= `{entry.described}`"
    if isinstance(entry, Required):
        return "**yours**"
    value, source = value_of(entry), source_of(entry)
    shown = f"`{value}`" if value else "*empty*"
    return f"{shown} ({source})" if source else shown


def docs() -> str:
    """The settings' table (what each means, which recipes take it) and one table per recipe of its presets' values."""
    lines = ["| setting | recipes | what it is |", "|---|---|---|"]
    for s in SETTINGS:
        takers = [r for r in RECIPES if s.name in names(r)]
        lines.append(f"| `{s.name}` | {'all' if len(takers) == len(RECIPES) else ', '.join(takers)} | {s.help} |")
    for recipe, r in RECIPES.items():
        continues = "CONTINUE_EPOCHS" in names(recipe)
        layer = continuation(recipe) if continues else {}
        heads = [f"`{p}`" for p in r.presets] + (["with `INIT_FROM`, any preset"] if continues else [])
        lines += ["", f"#### `{recipe}.sh`", "", "| setting | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
        for s in SETTINGS:
            if s.name in RUN_CONTROL or s.name == "PRESET" or (s.name not in names(recipe) and s.name not in r.fixed):
                continue
            cells = [_cell(r.fixed[s.name]) if s.name in r.fixed
                     else _cell({**SHARED, **r.defaults, **table}[s.name]) for table in r.presets.values()]
            if continues:
                cells.append(_cell(layer[s.name]) if s.name in layer else "as the preset")
            lines.append(f"| `{s.name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
