"""A randomly initialised copy of a transformers model folder: the same shape and tokenizer, no pretraining.

    python -m biofairseq.recipe.random_init MODEL_DIR OUTPUT_DIR [--seed 1]

Fine-tuned beside the pretrained model with the same settings, it shows what the pretraining adds.
"""

import argparse
import sys
from pathlib import Path
from typing import Optional

from biofairseq.atomic import staged_folder


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m biofairseq.recipe.random_init", description=__doc__.split("\n")[0])
    parser.add_argument("model_dir", type=Path, help="transformers folder (biofairseq-convert to-hf output)")
    parser.add_argument("output_dir", type=Path, help="folder to create")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not (args.model_dir / "config.json").is_file():
        print(f"random_init: error: {args.model_dir}: no config.json; give a transformers model folder", file=sys.stderr)
        return 1
    import transformers
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    transformers.logging.set_verbosity_error()
    transformers.set_seed(args.seed)
    config = AutoConfig.from_pretrained(args.model_dir)
    # the class the folder holds (ElectraForPreTraining for an ELECTRA discriminator), else a masked LM
    model_class = getattr(transformers, (config.architectures or [""])[0], None)
    model = model_class(config) if model_class is not None else AutoModelForMaskedLM.from_config(config)
    with staged_folder(args.output_dir, False, FileExistsError) as staging:
        model.save_pretrained(staging)
        AutoTokenizer.from_pretrained(args.model_dir).save_pretrained(staging)
    print(f"{args.output_dir}: {type(model).__name__} with random weights (seed {args.seed}) and the tokenizer of {args.model_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
