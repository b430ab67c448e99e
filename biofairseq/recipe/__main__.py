"""The recipes' command line (recipes/lib/recipe.sh calls it first):

    python -m biofairseq.recipe render RECIPE SCRIPT REPO    RUN_DIR/run.sh written and its path printed (under
                                                             STOP_AFTER=settings: the script printed), or one line
    python -m biofairseq.recipe names RECIPE                 the settings the recipe takes
    python -m biofairseq.recipe docs                         docs/recipes.md's tables of the settings
"""

import os
import sys
from typing import Optional

from biofairseq.recipe.settings import render
from biofairseq.recipe.table import SettingsError, names

def main(argv: Optional[list] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["docs"]:
        from biofairseq.recipe.settings_docs import docs

        sys.stdout.write(docs())
        return
    if len(argv) < 2 or argv[0] not in ("names", "render") or (argv[0] == "render" and len(argv) != 4):
        sys.exit(__doc__)
    verb, recipe = argv[0], argv[1]
    try:
        if verb == "names":
            print("\n".join(names(recipe)))
            return
        print(render(recipe, dict(os.environ), argv[3], argv[2]))
    except SettingsError as e:
        sys.exit(f"{recipe}.sh: error: {e}")


if __name__ == "__main__":
    main()
