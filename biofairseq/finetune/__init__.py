"""Token classification (NER): BRAT/CoNLL data, fine-tuning with transformers, seqeval metrics, sweeps, reports.

Imported only by ``biofairseq-ner`` and the scripts that need it; the ``--user-dir`` import stays cheap.
"""


class NERFormatError(Exception):
    """A data file the user gave cannot be read; the message names the file (and line) and the fix."""
