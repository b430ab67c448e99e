"""fairseq RoBERTa or ELECTRA checkpoint -> transformers directory (config.json, model.safetensors, tokenizer)."""

import shutil
from pathlib import Path

import torch
from transformers.initialization import no_init_weights

from biofairseq import checkpoints
from biofairseq.convert import ConvertError, layouts, parity, vocabulary
from biofairseq.model_card import write_model_card


def _check_supported(args, checkpoint, modernbert=False):
    """fairseq options that no transformers class of the family reproduces (a ModernBERT's only such option is its
    activation)."""
    problems = [f"--activation-fn {args.activation_fn}"] if args.activation_fn not in layouts.ACTIVATIONS else []
    if not modernbert:
        if not getattr(args, "no_scale_embedding", True):
            problems.append("scaled embeddings")
        if not getattr(args, "encoder_learned_pos", True) or getattr(args, "no_token_positional_embeddings", False):
            problems.append("non-learned positions")
        if getattr(args, "adaptive_input", False):
            problems.append("adaptive input")
        if not hasattr(args, "embedding_sharing") and layouts.layout_for_fairseq(args) is None:
            problems.append("post-LN without an embedding LayerNorm")
    if problems:
        raise ConvertError(f"{checkpoint}: {', '.join(problems)}: no transformers class computes this encoder")


def hf_state_dict(fairseq_weights, layout, layers, hf_keys, checkpoint, pad):
    """fairseq weights renamed (and computed) into the transformers class's; the unused token type embedding is zero."""
    known = layout.reads(layers)
    unknown = [k for k in fairseq_weights
               if k not in known and not k.endswith(".version") and not any(k.startswith(d) for d in layout.drops)]
    if unknown:
        raise ConvertError(
            f"{checkpoint}: parameters that {layout.model_class} has no place for ({', '.join(unknown[:3])}); "
            "to-hf converts RoBERTa and ELECTRA encoders"
        )
    weights = layout.tensors(fairseq_weights, layers, pad)
    for key in hf_keys:
        if key.endswith("embeddings.token_type_embeddings.weight"):
            width = weights[next(k for k in weights if k.endswith("embeddings.word_embeddings.weight"))].shape[1]
            weights[key] = torch.zeros(1, width)
        elif key == "lm_head.decoder.bias":
            weights[key] = weights["lm_head.bias"]
    return weights


def _shared_config(args, dictionary, layout, positions):
    return dict(
        vocab_size=len(dictionary), num_hidden_layers=args.encoder_layers, hidden_act=layouts.ACTIVATIONS[args.activation_fn],
        hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.attention_dropout, type_vocab_size=1,
        layer_norm_eps=1e-5, pad_token_id=dictionary.pad(), bos_token_id=dictionary.bos(), eos_token_id=dictionary.eos(),
        architectures=[layout.model_class], max_position_embeddings=positions,
    )


def _roberta_config(args, dictionary, layout, positions):
    return dict(
        **_shared_config(args, dictionary, layout, positions), hidden_size=args.encoder_embed_dim,
        num_attention_heads=args.encoder_attention_heads, intermediate_size=args.encoder_ffn_embed_dim,
        tie_word_embeddings=not args.untie_weights_roberta,
    )


def _electra_config(args, dictionary, layout, positions):
    from biofairseq.models.electra import generator_shape

    if layout.tower == "generator":
        width, ffn, heads = generator_shape(args)
    else:
        width, ffn, heads = args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_attention_heads
    # transformers' ELECTRA counts positions from 0: the table loses fairseq's padding_idx + 1 leading rows
    return dict(
        **_shared_config(args, dictionary, layout, positions - dictionary.pad() - 1), hidden_size=width,
        num_attention_heads=heads, intermediate_size=ffn, embedding_size=args.embedding_dim, tie_word_embeddings=True,
    )


def _modernbert_config(args, dictionary, layout, positions):
    activation = layouts.ACTIVATIONS[args.activation_fn]
    return dict(
        vocab_size=len(dictionary), hidden_size=args.encoder_embed_dim, intermediate_size=args.encoder_ffn_embed_dim,
        num_hidden_layers=args.encoder_layers, num_attention_heads=args.encoder_attention_heads,
        hidden_activation=activation, classifier_activation=activation, max_position_embeddings=positions,
        global_attn_every_n_layers=args.global_attn_every_n_layers, local_attention=args.local_attention,
        global_rope_theta=args.global_rope_theta, local_rope_theta=args.local_rope_theta,
        embedding_dropout=args.dropout, mlp_dropout=args.activation_dropout, attention_dropout=args.attention_dropout,
        norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False, decoder_bias=True, classifier_bias=False,
        tie_word_embeddings=True, pad_token_id=dictionary.pad(), bos_token_id=dictionary.bos(),
        eos_token_id=dictionary.eos(), cls_token_id=dictionary.bos(), sep_token_id=dictionary.eos(),
        architectures=[layout.model_class],
    )


class TowerView(torch.nn.Module):
    """One ELECTRA tower called as a fairseq RoBERTa is: ``(logits, None)``, or hidden states with features_only."""

    def __init__(self, electra, tower):
        super().__init__()
        self.electra, self.tower = electra, tower

    def forward(self, tokens, features_only=False):
        hidden = getattr(self.electra, f"{self.tower}_features")(tokens)
        return (hidden if features_only else getattr(self.electra, f"{self.tower}_head")(hidden)), None


def _write(fairseq, layout, output, found, checkpoint, verify, log):
    """One transformers model folder (weights, config, tokenizer) for one layout, parity-checked."""
    import transformers
    from transformers.initialization import no_init_weights

    args, dictionary = fairseq.args, fairseq.dictionary
    weights = fairseq.model.state_dict()
    if fairseq.modernbert:  # rotary positions: no table, a longest sequence
        positions, max_length, make_config = args.max_positions, args.max_positions, _modernbert_config
    else:
        table = next(k for k in layout.reads(args.encoder_layers) if k.endswith("embed_positions.weight"))
        positions = weights[table].shape[0]
        max_length = positions - dictionary.pad() - 1
        make_config = _electra_config if layout.tower else _roberta_config
    config = getattr(transformers, layout.config_class)(**make_config(args, dictionary, layout, positions))
    with no_init_weights():  # every weight is overwritten next
        model = getattr(transformers, layout.model_class)(config)
    model.load_state_dict(
        hf_state_dict(weights, layout, args.encoder_layers, model.state_dict().keys(), checkpoint, dictionary.pad()),
        strict=True,
    )
    model.eval().save_pretrained(output)
    del model, weights  # the check reloads what was written
    vocabulary.build_tokenizer(found, dictionary, max_length).save_pretrained(output)
    if found.kind == "sentencepiece":  # what from-hf and fairseq need to encode text for this model again
        shutil.copyfile(found.files["model"], output / "sentencepiece.model")
    log(f"{layout.name} -> {layout.model_class} in {output}")
    parity_result = None
    if verify:
        hf_model = getattr(transformers, layout.model_class).from_pretrained(output).float().eval()
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(output)
        fairseq_model = TowerView(fairseq.model, layout.tower) if layout.tower else fairseq.model
        parity_result = {}
        parity.verify(fairseq_model, vocabulary.FairseqEncoding(found, dictionary), hf_model, hf_tokenizer,
                      dictionary, parity_result, log, f"{checkpoint}: the converted {layout.tower or 'model'}",
                      long=layout.long_context)
        parity_result = parity_result["parity"]
    return parity_result


def _card(report, fairseq, checkpoint, found, card):
    """The model card's metadata and body: what this conversion knows (architecture, updates, validation perplexity,
    parity) and what the user told it (``card``: language, license, datasets)."""
    args, training = fairseq.args, fairseq.training or {}
    arch = getattr(args, "_name", None) or getattr(args, "arch", None)
    cls = report["transformers_class"]
    kind = "electra" if fairseq.electra else "modernbert" if fairseq.modernbert else "roberta"
    metadata = {
        "language": card.get("language") or None, "license": card.get("license") or "other",
        "library_name": "transformers", "pipeline_tag": None if fairseq.electra else "fill-mask",
        "tags": ["fill-mask", "biomedical", "fairseq", "biofairseq", kind] if not fairseq.electra else
                ["biomedical", "fairseq", "biofairseq", kind, "electra-discriminator"],
        "datasets": card.get("datasets") or None,
    }
    shape = (f"{args.encoder_layers} layers, hidden size {args.encoder_embed_dim}, {args.encoder_attention_heads} "
             f"heads, feed-forward {args.encoder_ffn_embed_dim}")
    parity = report.get("parity")
    rows = [("architecture", f"fairseq `{arch}` ({report['layout']}) as transformers `{cls}`: {shape}"),
            ("vocabulary", f"{found.kind}, {report['dictionary_size']:,} entries (fairseq's dict.txt order)"),
            ("pretraining updates", f"{training['updates']:,}" if training.get("updates") is not None else "not recorded")]
    if training.get("epoch") is not None:
        rows.append(("epoch", str(training["epoch"])))
    if training.get("best") is not None:
        metric = training["metric"]
        if training.get("best_perplexity") is not None and not fairseq.electra:
            rows.append(("validation perplexity", f"{training['best_perplexity']:.2f} (best validation {metric} "
                                                  f"{training['best']:.4f}, base 2, up to this checkpoint)"))
        else:
            rows.append((f"best validation {metric}", f"{training['best']:.4f}"))
    rows.append(("parity with fairseq", (
        f"token ids {'identical' if parity['ids_identical'] else 'differ'}; max abs. logit difference "
        f"{parity['max_abs_diff_logits']:.2e}, hidden states {parity['max_abs_diff_hidden']:.2e} on "
        f"{parity['sentences']} sentences, fp32 (tolerance {parity['tolerance']:.0e})") if parity else "not checked (--no-verify)"))
    rows.append(("converted from", f"`{Path(checkpoint).name}` by `biofairseq-convert to-hf`"))
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    language = ", ".join(card.get("language") or []) or "not given at conversion (`--language`)"
    use = (
        "```python\nfrom transformers import pipeline\n\nfill = pipeline(\"fill-mask\", model=\"PATH/TO/THIS/FOLDER\")\n"
        "fill(\"El paciente presenta hipertensión <mask>.\")\n```"
        if not fairseq.electra else
        "```python\nfrom transformers import AutoModelForTokenClassification\n\nmodel = "
        "AutoModelForTokenClassification.from_pretrained(\"PATH/TO/THIS/FOLDER\", num_labels=N)\n```"
    )
    body = f"""# {card.get('name') or Path(checkpoint).stem}

A {'ELECTRA discriminator' if fairseq.electra else 'masked language model'} pretrained with
biofairseq on fairseq, converted to Hugging Face transformers. Language: {language}. License:
{metadata['license']}{' (not given at conversion: set `--license` to the terms of your training data)' if not card.get('license') else ''}.

| | |
|---|---|
{table}

## Use

{use}

Fine-tune it for NER with `biofairseq-ner sweep --model PATH/TO/THIS/FOLDER ...`. `conversion.json` beside this card
holds the conversion's full record.
"""
    return metadata, body


def convert(checkpoint, output, dict_path=None, vocab=None, verify=True, log=print, generator=False, card=None):
    with no_init_weights():  # the checkpoint overwrites every weight
        fairseq = checkpoints.load(checkpoint, dict_path)
    args, dictionary = fairseq.args, fairseq.dictionary
    _check_supported(args, checkpoint, fairseq.modernbert)
    if fairseq.electra:
        discriminator, generator_layout = layouts.electra_layouts(args.embedding_sharing)
        written = [(discriminator, output)] + ([(generator_layout, output / "generator")] if generator else [])
    else:
        if generator:
            raise ConvertError(f"{checkpoint}: --generator: not an ELECTRA checkpoint (it has no generator); drop the flag")
        written = [(layouts.MODERNBERT if fairseq.modernbert else layouts.layout_for_fairseq(args), output)]
    found = vocabulary.find(checkpoint, vocab, fairseq.bpe, fairseq.data_dir)
    log(f"vocabulary: {found.kind} ({', '.join(found.files.values())})")
    notes = [f"classification heads not converted: {', '.join(fairseq.heads)}"] if fairseq.heads else []
    for note in notes:
        log(f"note: {note}")
    parities = [_write(fairseq, layout, folder, found, checkpoint, verify, log) for layout, folder in written]
    report = {
        "direction": "to-hf", "source": str(Path(checkpoint).resolve()), "layout": written[0][0].name,
        "transformers_class": written[0][0].model_class, "vocabulary": {"type": found.kind, **found.files},
        "dictionary_size": len(dictionary), "notes": notes, "parity": parities[0],
    }
    if generator:
        report["generator"] = {"folder": "generator", "layout": written[1][0].name,
                               "transformers_class": written[1][0].model_class, "parity": parities[1]}
    report["training"] = fairseq.training
    write_model_card(output, *_card(report, fairseq, checkpoint, found, card or {}))
    return report
