"""fairseq RoBERTa checkpoint -> transformers directory (config.json, model.safetensors, tokenizer)."""

import shutil
from pathlib import Path

import torch

from biofairseq.convert import ConvertError, fairseq_side, layouts, parity, vocabulary


def _check_supported(args, checkpoint):
    """fairseq options that no transformers RoBERTa class reproduces."""
    problems = []
    if args.activation_fn not in layouts.ACTIVATIONS:
        problems.append(f"--activation-fn {args.activation_fn}")
    if not getattr(args, "no_scale_embedding", True):
        problems.append("scaled embeddings")
    if not getattr(args, "encoder_learned_pos", True) or getattr(args, "no_token_positional_embeddings", False):
        problems.append("non-learned positions")
    if getattr(args, "adaptive_input", False):
        problems.append("adaptive input")
    if layouts.layout_for_fairseq(args) is None:
        problems.append("post-LN without an embedding LayerNorm")
    if problems:
        raise ConvertError(f"{checkpoint}: {', '.join(problems)}: no transformers class computes this encoder")


def hf_state_dict(fairseq_weights, layout, layers, hf_keys, checkpoint):
    """fairseq weights renamed to the transformers class's; RoBERTa's unused token type embedding is zero."""
    pairs = layout.names(layers)
    known = {f for f, _ in pairs}
    unknown = [k for k in fairseq_weights if k not in known and not k.endswith(".version")]
    if unknown:
        raise ConvertError(
            f"{checkpoint}: parameters that {layout.model_class} has no place for ({', '.join(unknown[:3])}); "
            "to-hf converts RoBERTa encoders"
        )
    weights = {h: fairseq_weights[f] for f, h in pairs}
    for key in hf_keys:
        if key.endswith("embeddings.token_type_embeddings.weight"):
            weights[key] = torch.zeros(1, fairseq_weights[pairs[0][0]].shape[1])
        elif key == "lm_head.decoder.bias":
            weights[key] = weights["lm_head.bias"]
    return weights


def convert(checkpoint, output, dict_path=None, vocab=None, verify=True, log=print):
    import transformers
    from transformers.initialization import no_init_weights

    fairseq = fairseq_side.load(checkpoint, dict_path)
    args, dictionary = fairseq.args, fairseq.dictionary
    _check_supported(args, checkpoint)
    layout = layouts.layout_for_fairseq(args)
    found = vocabulary.find(checkpoint, vocab, fairseq.bpe, fairseq.data_dir)
    weights = fairseq.model.state_dict()
    positions = weights[layouts.FAIRSEQ_ENCODER + "embed_positions.weight"].shape[0]
    config = getattr(transformers, layout.config_class)(
        vocab_size=len(dictionary), hidden_size=args.encoder_embed_dim, num_hidden_layers=args.encoder_layers,
        num_attention_heads=args.encoder_attention_heads, intermediate_size=args.encoder_ffn_embed_dim,
        hidden_act=layouts.ACTIVATIONS[args.activation_fn], hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.attention_dropout, max_position_embeddings=positions, type_vocab_size=1,
        layer_norm_eps=1e-5, pad_token_id=dictionary.pad(), bos_token_id=dictionary.bos(),
        eos_token_id=dictionary.eos(), tie_word_embeddings=not args.untie_weights_roberta,
        architectures=[layout.model_class],
    )
    with no_init_weights():  # every weight is overwritten next
        model = getattr(transformers, layout.model_class)(config)
    model.load_state_dict(
        hf_state_dict(weights, layout, args.encoder_layers, model.state_dict().keys(), checkpoint), strict=True
    )
    model.eval().save_pretrained(output)
    del model, weights  # the check reloads what was written
    max_length = positions - dictionary.pad() - 1
    tokenizer = vocabulary.build_tokenizer(found, dictionary, max_length)
    tokenizer.save_pretrained(output)
    if found.kind == "sentencepiece":  # what from-hf and fairseq need to encode text for this model again
        shutil.copyfile(found.files["model"], output / "sentencepiece.model")
    notes = []
    if fairseq.heads:
        notes.append(f"classification heads not converted: {', '.join(fairseq.heads)}")
    report = {
        "direction": "to-hf", "source": str(Path(checkpoint).resolve()), "layout": layout.name,
        "transformers_class": layout.model_class, "vocabulary": {"type": found.kind, **found.files},
        "dictionary_size": len(dictionary), "notes": notes, "parity": None,
    }
    log(f"{layout.name} -> {layout.model_class}; vocabulary: {found.kind} ({', '.join(found.files.values())})")
    for note in notes:
        log(f"note: {note}")
    if verify:
        hf_model = transformers.AutoModelForMaskedLM.from_pretrained(output).float().eval()
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(output)
        parity.verify(fairseq.model, vocabulary.FairseqEncoding(found, dictionary), hf_model, hf_tokenizer,
                      dictionary, report, log, f"{checkpoint}: the converted model")
    return report
