"""transformers model folder -> fairseq checkpoint (model.pt), dict.txt and vocabulary files, so that pretraining
continues from a published model with fairseq-train --restore-file (or a recipe's INIT_FROM).

The same steps for every family (``biofairseq.convert.families``): what the folder is and whether it converts, from
config.json alone; its models; the vocabulary in fairseq's order; a fairseq model of the family's settings, its
weights moved over by the family's layouts; the parity check.
"""

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional


from biofairseq import checkpoints
from biofairseq.arguments import first_line
from biofairseq.convert import ConvertError, families, parity, vocabulary
from biofairseq.convert.families.base import Family
from biofairseq.text.phrases import with_article


def _refuse(hf_dir: Path, family: Family, problems: list[str]) -> ConvertError:
    """One line naming every setting no fairseq model of the family computes."""
    return ConvertError(
        f"{hf_dir}: {'; '.join(problems)}: no fairseq {family.fairseq_model} computes this {family.name} model, so it "
        "cannot be converted (its weights were trained with these settings: editing config.json would change the model)"
    )


def convert(hf_dir: str | Path, output: Path, final_output: Path, verify: bool = True,
            log: Callable[[str], None] = print, generator: Optional[Path] = None,
            generator_fraction: Optional[float] = None) -> dict[str, Any]:
    """Writes into ``output``; the checkpoint names ``final_output`` as its data-bin, where dict.txt will be."""
    import transformers
    from transformers.initialization import no_init_weights

    hf_dir = Path(hf_dir)
    source = families.Source(hf_dir, generator, generator_fraction)
    family, config, problems = families.inspect(source)
    if (generator or generator_fraction) and not family.has_generator:
        flag = "--generator" if generator else "--generator-fraction"
        raise ConvertError(f"{hf_dir}: {flag}: {with_article(family.name)} model has no generator (an ELECTRA's); drop the flag")
    if problems:
        raise _refuse(hf_dir, family, problems)
    models, notes = family.read(hf_dir, config, source)
    if not vocabulary.has_tokenizer(hf_dir):
        raise ConvertError(f"{hf_dir}: no tokenizer: looked for {vocabulary.TOKENIZER_FILES}; save the model's "
                           f"tokenizer into the folder too (tokenizer.save_pretrained(\"{hf_dir}\"))")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    except (ValueError, OSError, KeyError, TypeError) as error:
        raise ConvertError(f"{hf_dir}: no tokenizer transformers can load ({first_line(error)}); the folder "
                           "needs the model's tokenizer files (save the tokenizer with save_pretrained too)") from None
    settings = family.settings(config, source, models)
    flags = checkpoints.architecture_flags(settings, family.presets)
    if flags is None:
        raise ConvertError(f"{hf_dir}: no fairseq {family.fairseq_model} architecture has these settings: {settings}")
    order = vocabulary.export_fairseq_vocabulary(tokenizer, config.vocab_size, hf_dir, output, renumber=family.renumber)
    if order[:4] != [0, 1, 2, 3]:
        notes.append(f"token ids renumbered for fairseq's dictionary: ids {order[:4]} are now <s>, <pad>, </s>, <unk> "
                     "(0-3), the others follow in their order")
    dictionary = checkpoints.load_dictionary(output / "dict.txt")
    if len(dictionary) != config.vocab_size:
        raise ConvertError(
            f"{hf_dir}: the mask token's id {tokenizer.mask_token_id} is outside vocab_size {config.vocab_size}"
        )
    complete = family.complete(models)
    # the transformers weights overwrite every fairseq one, unless the folder lacks a part (a fresh ELECTRA generator)
    with no_init_weights() if complete else contextlib.nullcontext():
        fairseq, cfg = checkpoints.new_model(flags, final_output, dictionary)
    weights = fairseq.state_dict()
    renumbered = None if order == list(range(len(order))) else order
    for layout, model in models:
        moved = layout.from_hf(model.state_dict(), config.num_hidden_layers, dictionary.pad(), renumbered)
        unknown = sorted(set(moved) - set(weights))
        if unknown:
            raise ConvertError(f"{hf_dir}: {layout.model_class} tensors with no place in fairseq's model ({unknown[:3]})")
        weights.update(moved)
    fairseq.load_state_dict(weights, strict=True)
    checkpoints.save(output / "model.pt", fairseq, cfg)
    del fairseq, weights  # the check reloads what was written
    read = (config.architectures or [type(models[0][1]).__name__])[0]  # the folder's class (BertForPreTraining)
    report = {
        "direction": "from-hf", "source": str(hf_dir.resolve()), "family": family.name, "layout": models[0][0].name,
        "transformers_class": read, "fairseq_flags": flags, "dictionary_size": len(dictionary), "notes": notes,
        "parity": None,
    }
    log(f"{family.name}: {read} -> fairseq {' '.join(flags)} ({models[0][0].name})")
    for note in notes:
        log(f"note: {note}")
    if verify:
        reloaded = checkpoints.load(output / "model.pt", output / "dict.txt")
        encode = vocabulary.FairseqEncoding(vocabulary.from_folder(output), reloaded.dictionary)
        for layout, model in models:
            result = {}
            parity.verify(family.view(reloaded.model, layout), encode, model, tokenizer, dictionary, result, log,
                          f"{hf_dir}: the converted checkpoint", long=layout.long_context, hf_ids=order)
            if layout.tower == "generator":
                report["generator_parity"] = result["parity"]
            else:
                report["parity"] = result["parity"]
    return report
