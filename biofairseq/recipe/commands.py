"""The arguments a stage's command takes from the settings, built here, once: the settings step hands them to bash
finished, so that a flag and the setting it comes from are written in one place and one language."""

# biofairseq-ner sweep's flags that a setting gives, in the command's order
NER_SWEEP = (("--lrs", "NER_LRS"), ("--seeds", "NER_SEEDS"), ("--epochs", "NER_EPOCHS"),
             ("--max-length", "NER_MAX_LENGTH"), ("--batch-size", "NER_BATCH"),
             ("--gradient-accumulation", "NER_ACCUMULATION"), ("--warmup-ratio", "NER_WARMUP_RATIO"),
             ("--layerwise-lr-decay", "NER_LAYERWISE_DECAY"), ("--devices", "NER_GPU"))
# and those each sweep gives from its data set, model and run folder (biofairseq.recipe.plan), by where they come from
NER_SWEEP_PER_RUN = {"--model": "the pretrained model", "--train": "NER_DATA", "--dev": "NER_DATA",
                     "--test": "NER_DATA", "--output-dir": "RUN_DIR", "--label-scheme": "NER_LABELLINGS"}


def ner_sweep_flags():
    """{flag: the setting or path it comes from} of every biofairseq-ner sweep flag the recipes give."""
    return {**dict(NER_SWEEP), **NER_SWEEP_PER_RUN}


def ner_sweep_args(values):
    """The sweep's flags from the settings, as the recipe passes them: the layer-wise decay where it is not 1 (none),
    the GPUs where the run has any."""
    args = []
    for flag, name in NER_SWEEP:
        if (name == "NER_LAYERWISE_DECAY" and float(values[name]) == 1) or (name == "NER_GPU" and values["NUM_GPUS"] == "0"):
            continue
        args += [flag, values[name]]
    return args
