"""python -m biofairseq.convert.families: docs/conversion.md's table of the families, as Markdown."""

import sys

from biofairseq.convert.families import docs_table

sys.stdout.write(docs_table())
