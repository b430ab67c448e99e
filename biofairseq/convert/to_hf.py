"""fairseq checkpoint -> transformers folder (config.json, model.safetensors, tokenizer), as the family it is.

The same steps for every family (``biofairseq.convert.families``): the checkpoint, its vocabulary, the family they
make (a fairseq RoBERTa with a WordPiece vocabulary goes back as the BERT or Megatron-BERT it was continued from),
then for each of the family's transformers models (ELECTRA: the discriminator, and the generator in generator/) its
config, its weights moved over by the family's layout, its tokenizer, and the parity check.
"""

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from fairseq.data import Dictionary
from transformers.initialization import no_init_weights

from biofairseq import checkpoints
from biofairseq.convert import ConvertError, families, layouts, parity, vocabulary
from biofairseq.convert.families.base import Family
from biofairseq.model_card import write_model_card


def _ids(found: vocabulary.Vocabulary, dictionary: Dictionary, order: Optional[list[int]]) -> dict[str, int]:
    """The transformers ids of pad, bos and eos, and how many token types the config has (BERT's 2 for a WordPiece
    vocabulary, which comes from a BERT-family model; 1 otherwise)."""
    at = (lambda i: order[i]) if order is not None else (lambda i: i)
    return {"pad": at(dictionary.pad()), "bos": at(dictionary.bos()), "eos": at(dictionary.eos()),
            "types": 2 if found.kind == "wordpiece" else 1}


def _write(fairseq: checkpoints.FairseqRoberta, family: Family, layout: layouts.Layout, output: Path,
           found: vocabulary.Vocabulary, order: Optional[list[int]], checkpoint: str | Path, verify: bool,
           log: Callable[[str], None]) -> Optional[dict[str, Any]]:
    """One transformers model folder (weights, config, tokenizer) for one layout, parity-checked."""
    import transformers

    args, dictionary = fairseq.args, fairseq.dictionary
    if args.activation_fn not in layouts.ACTIVATIONS:
        raise ConvertError(f"{checkpoint}: --activation-fn {args.activation_fn}: no transformers class computes this encoder")
    weights = fairseq.model.state_dict()
    table = next((k for k in layout.reads(args.encoder_layers) if k.endswith(layouts.POSITIONS)), None)
    positions = weights[table].shape[0] if table else 0  # rotary positions (ModernBERT): no table
    config = getattr(transformers, layout.config_class)(**family.hf_config(fairseq, layout, positions,
                                                                            _ids(found, dictionary, order)))
    with no_init_weights():  # every weight is overwritten next
        model = getattr(transformers, layout.model_class)(config)
    expected = model.state_dict()
    known = layout.reads(args.encoder_layers)
    unknown = [k for k in weights if k not in known and not k.endswith(".version")
               and not any(k.startswith(d) for d in layout.drops)]
    if unknown:
        raise ConvertError(f"{checkpoint}: parameters that {layout.model_class} has no place for ({', '.join(unknown[:3])}); "
                           f"to-hf converts the families {families.described()}")
    model.load_state_dict(layout.to_hf(weights, args.encoder_layers, dictionary.pad(), expected, order), strict=True)
    model.eval().save_pretrained(output)
    del model, weights  # the check reloads what was written
    max_length = args.max_positions if not table else positions - dictionary.pad() - 1
    if found.kind == "wordpiece":  # the published tokenizer, and vocab.txt beside it as published folders have it
        vocabulary.build_wordpiece_tokenizer(found, max_length).save_pretrained(output)
        shutil.copyfile(found.files["vocab"], output / "vocab.txt")
    else:
        vocabulary.build_tokenizer(found, dictionary, max_length).save_pretrained(output)
    if found.kind == "sentencepiece":  # what from-hf and fairseq need to encode text for this model again
        shutil.copyfile(found.files["model"], output / "sentencepiece.model")
    log(f"{family.name}: {layout.name} -> {layout.model_class} in {output}")
    if not verify:
        return None
    hf_model = getattr(transformers, layout.model_class).from_pretrained(output).float().eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(output)
    result = {}
    parity.verify(family.view(fairseq.model, layout), vocabulary.FairseqEncoding(found, dictionary), hf_model,
                  hf_tokenizer, dictionary, result, log, f"{checkpoint}: the converted {layout.tower or 'model'}",
                  long=layout.long_context, hf_ids=order)
    return result["parity"]


def _card(report: dict[str, Any], fairseq: checkpoints.FairseqRoberta, family: Family, checkpoint: str | Path,
          found: vocabulary.Vocabulary, card: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The model card's metadata and body: what this conversion knows (family, architecture, updates, validation
    perplexity, parity, what the pretraining continued) and what the user told it (``card``: language, license,
    datasets)."""
    args, training = fairseq.args, fairseq.training or {}
    arch = getattr(args, "_name", None) or getattr(args, "arch", None)
    cls = report["transformers_class"]
    what, tags, pipeline_tag, use = family.card(fairseq)
    metadata = {
        "language": card.get("language") or None, "license": card.get("license") or "other",
        "library_name": "transformers", "pipeline_tag": pipeline_tag,
        "tags": [*tags[:1], "biomedical", "fairseq", "biofairseq", *tags[1:]],
        "datasets": card.get("datasets") or None,
    }
    shape = (f"{args.encoder_layers} layers, hidden size {args.encoder_embed_dim}, {args.encoder_attention_heads} "
             f"heads, feed-forward {args.encoder_ffn_embed_dim}")
    parity_ = report.get("parity")
    rows = [("architecture", f"fairseq `{arch}` ({report['layout']}) as transformers `{cls}`: {shape}"),
            ("vocabulary", f"{found.kind}, {report['dictionary_size']:,} entries" +
             (" (the published vocab.txt and ids)" if found.kind == "wordpiece" else " (fairseq's dict.txt order)"))]
    extension = _extension(found)
    if extension:
        rows.append(("vocabulary extended", f"{extension['added']:,} tokens ({extension['words']:,} words) after the "
                     f"published vocabulary's, the words of `{Path(extension['from']).name}` it cut into the most pieces "
                     "(`biofairseq-convert extend-vocab`), each initialised as the mean of its pieces' rows"))
    if fairseq.continued_from:
        start = fairseq.continued_from
        rows.append(("continued from", f"`{start['source']}` ({start.get('family', 'RoBERTa')}, "
                                       f"`{start['transformers_class']}`), converted by `biofairseq-convert from-hf`"))
    rows.append(("pretraining updates", f"{training['updates']:,}" if training.get("updates") is not None else "not recorded"))
    if training.get("epoch") is not None:
        rows.append(("epoch", str(training["epoch"])))
    if training.get("best") is not None:
        metric = training["metric"]
        if training.get("best_perplexity") is not None and family.perplexity:
            rows.append(("validation perplexity", f"{training['best_perplexity']:.2f} (best validation {metric} "
                                                  f"{training['best']:.4f}, base 2, up to this checkpoint)"))
        else:
            rows.append((f"best validation {metric}", f"{training['best']:.4f}"))
    rows.append(("parity with fairseq", (
        f"token ids {'identical' if parity_['ids_identical'] else 'differ'}; max abs. logit difference "
        f"{parity_['max_abs_diff_logits']:.2e}, hidden states {parity_['max_abs_diff_hidden']:.2e} on "
        f"{parity_['sentences']} sentences, fp32 (tolerance {parity_['tolerance']:.0e})") if parity_ else "not checked (--no-verify)"))
    rows.append(("converted from", f"`{Path(checkpoint).name}` by `biofairseq-convert to-hf`"))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    language = ", ".join(card.get("language") or []) or "not given at conversion (`--language`)"
    mask = "[MASK]" if found.kind == "wordpiece" else "<mask>"
    use = use or ("```python\nfrom transformers import pipeline\n\nfill = pipeline(\"fill-mask\", model=\"PATH/TO/THIS/FOLDER\")\n"
                  f"fill(\"El paciente presenta hipertensión {mask}.\")\n```")
    body = f"""# {card.get('name') or Path(checkpoint).stem}

A {family.name} {what} pretrained with biofairseq on fairseq, converted to Hugging Face transformers. Language:
{language}. License: {metadata['license']}{' (not given at conversion: set `--license` to the terms of your training data)' if not card.get('license') else ''}.

| | |
|---|---|
{table}

## Use

{use}

Fine-tune it for NER with `biofairseq-ner sweep --model PATH/TO/THIS/FOLDER ...`. `conversion.json` beside this card
holds the conversion's full record.
"""
    return metadata, body


def _extension(found: vocabulary.Vocabulary) -> Optional[dict[str, Any]]:
    """What ``biofairseq-convert extend-vocab`` added to this vocabulary (its vocab_info.json's record), or None."""
    import json

    info = Path(next(iter(found.files.values()))).parent / "vocab_info.json"
    try:
        return json.loads(info.read_text()).get("extension") if info.is_file() else None
    except ValueError:
        return None


def convert(checkpoint: str | Path, output: Path, dict_path: Optional[str | Path] = None,
            vocab: Optional[str | Path] = None, verify: bool = True, log: Callable[[str], None] = print,
            generator: bool = False, card: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    with no_init_weights():  # the checkpoint overwrites every weight
        fairseq = checkpoints.load(checkpoint, dict_path)
    found = vocabulary.find(checkpoint, vocab, fairseq.bpe, fairseq.data_dir)
    try:
        family = families.for_fairseq(fairseq, found)
        written = family.layouts(fairseq, generator)
    except ConvertError as error:
        raise ConvertError(f"{checkpoint}: {error}") from None
    if generator and len(written) < 2:
        raise ConvertError(f"{checkpoint}: --generator: not an ELECTRA checkpoint (it has no generator); drop the flag")
    log(f"vocabulary: {found.kind} ({', '.join(found.files.values())})")
    order = vocabulary.wordpiece_ids(found, fairseq.dictionary) if found.kind == "wordpiece" else None
    notes = [f"classification heads not converted: {', '.join(fairseq.heads)}"] if fairseq.heads else []
    if family.has_generator and not generator:
        notes.append("the generator is not written (to-hf --generator writes it in generator/, as from-hf reads it)")
    if found.kind == "wordpiece":
        notes.append("token type embeddings are zero (fairseq has none; type 0's went into the positions at from-hf), "
                     "so type 1 adds what type 0 adds")
    for note in notes:
        log(f"note: {note}")
    parities = [_write(fairseq, family, layout, output / folder if folder else output, found, order, checkpoint, verify,
                       log) for layout, folder in written]
    report = {
        "direction": "to-hf", "source": str(Path(checkpoint).resolve()), "family": family.name,
        "layout": written[0][0].name, "transformers_class": written[0][0].model_class,
        "vocabulary": {"type": found.kind, **found.files}, "dictionary_size": len(fairseq.dictionary), "notes": notes,
        "parity": parities[0],
    }
    if generator:
        report["generator"] = {"folder": written[1][1], "layout": written[1][0].name,
                               "transformers_class": written[1][0].model_class, "parity": parities[1]}
    report["training"] = fairseq.training
    if fairseq.continued_from:
        report["continued_from"] = {k: fairseq.continued_from.get(k) for k in ("source", "family", "transformers_class")}
    write_model_card(output, *_card(report, fairseq, family, checkpoint, found, card or {}))
    return report
