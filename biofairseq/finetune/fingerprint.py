"""Which model a fine-tuning run read: sha256 of its weight files (``*.safetensors``, ``*.bin``) in name order.

Runs and sweeps record it; the recipes compare a sweep's with the model's current one to redo out-of-date sweeps:

    python -m biofairseq.finetune.fingerprint MODEL_DIR
"""

import hashlib
import sys
from pathlib import Path


def weights_sha256(model_dir):
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(model_dir).iterdir() if p.suffix in (".safetensors", ".bin")):
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


if __name__ == "__main__":
    print(weights_sha256(sys.argv[1]))
