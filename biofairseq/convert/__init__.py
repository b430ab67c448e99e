"""fairseq checkpoints <-> Hugging Face transformers directories, weights and tokenizer, checked for parity, for the
model families of ``biofairseq.convert.families``.

Imported only by ``biofairseq-convert`` (it pulls in transformers); the ``--user-dir`` import stays cheap.
"""


class ConvertError(Exception):
    """A conversion the user asked for cannot be done; the message names the file and the fix."""
