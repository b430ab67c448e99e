"""The vocabulary side of a conversion: find the BPE a checkpoint was trained with, encode text the way fairseq
does (BPE, then dict.txt), and build the transformers tokenizer that gives the same ids.

fairseq's dict.txt renumbers BPE tokens (byte-level BPE ids or SentencePiece pieces are its symbols), so the
exported tokenizer's vocabulary is the BPE vocabulary re-indexed through the dictionary. Text the vocabulary
cannot encode gives <unk> in both; a dictionary that lacks some of the BPE's own tokens is refused (see
``_lacking``). A WordPiece vocabulary (a BERT-family model's vocab.txt) goes the other way: the tokenizer keeps the
published ids and vocab.txt, and the model's rows are reordered to them (``wordpiece_ids``).
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from biofairseq.convert import ConvertError
from biofairseq.corpus import vocab as corpus_vocab

if TYPE_CHECKING:
    from fairseq.data import Dictionary
    from omegaconf import DictConfig
    from transformers import BertTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

SPECIALS = corpus_vocab.SPECIALS
# fairseq's name for the filler symbols that pad a dictionary to a multiple of 8.
FILLER = "madeupword{:04d}"
LOOKED_FOR = ("vocab_info.json (with vocab.txt for WordPiece), vocab.json + merges.txt, encoder.json + vocab.bpe, or a "
              "SentencePiece .model")
TOKENIZER_FILES = "tokenizer.json, vocab.json + merges.txt, vocab.txt or a SentencePiece .model"
# fairseq's names of the special tokens a WordPiece vocabulary names its own way (corpus_vocab.WORDPIECE_DEFAULTS)
FAIRSEQ_NAMES = {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "<unk>", "mask": "<mask>"}


@dataclass
class Vocabulary:
    kind: str  # "bytelevel-bpe" (byte-level BPE, incl. fairseq's GPT-2 files), "sentencepiece" or "wordpiece"
    files: dict  # bytelevel-bpe: vocab, merges; sentencepiece: model; wordpiece: vocab (vocab.txt)
    lowercase: bool = False
    gpt2: bool = False  # encoder.json + vocab.bpe, read with fairseq's own gpt2 BPE
    settings: dict = None  # wordpiece: the tokenizer's (corpus_vocab.WORDPIECE_DEFAULTS' keys)


def from_folder(path: str | Path) -> Optional[Vocabulary]:
    """The vocabulary in a folder (or a SentencePiece .model file), or None."""
    path = Path(path)
    if path.is_file():
        return Vocabulary("sentencepiece", {"model": str(path)}) if path.suffix == ".model" else None
    if (path / corpus_vocab.INFO).is_file():
        try:
            kind, files = corpus_vocab.vocab_files(path)
        except corpus_vocab.VocabError as error:
            raise ConvertError(str(error)) from None
        info = corpus_vocab.read_info(path)
        settings = corpus_vocab.wordpiece_settings(info) if kind == "wordpiece" else None
        return Vocabulary(kind, files, lowercase=info.get("lowercase", False), settings=settings)
    if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        return Vocabulary("bytelevel-bpe", {"vocab": str(path / "vocab.json"), "merges": str(path / "merges.txt")})
    if (path / "encoder.json").is_file() and (path / "vocab.bpe").is_file():
        return Vocabulary(
            "bytelevel-bpe", {"vocab": str(path / "encoder.json"), "merges": str(path / "vocab.bpe")}, gpt2=True
        )
    models = sorted(path.glob("*.model"))
    if len(models) == 1:
        return Vocabulary("sentencepiece", {"model": str(models[0])})
    return None


def _from_bpe_config(bpe, checkpoint):
    """The vocabulary named by a checkpoint's --bpe settings, where its files are found (``checkpoints.locate``)."""
    from biofairseq.checkpoints import locate

    name = getattr(bpe, "_name", None) if bpe is not None else None

    def found(*paths: Optional[str]) -> Optional[list[str]]:
        if not all(isinstance(p, str) and p for p in paths):
            return None
        files = [next((str(c) for c in locate(p, checkpoint) if c.is_file()), None) for p in paths]
        return files if all(files) else None

    if name == "hf_byte_bpe" and (files := found(bpe.bpe_vocab, bpe.bpe_merges)):
        return Vocabulary("bytelevel-bpe", {"vocab": files[0], "merges": files[1]})
    if name == "gpt2" and (files := found(bpe.gpt2_encoder_json, bpe.gpt2_vocab_bpe)):
        return Vocabulary("bytelevel-bpe", {"vocab": files[0], "merges": files[1]}, gpt2=True)
    if name == "sentencepiece" and (files := found(bpe.sentencepiece_model)):
        return Vocabulary("sentencepiece", {"model": files[0]})
    if name == "bert" and (files := found(bpe.bpe_vocab_file)):
        beside = Path(files[0]).parent
        if (beside / corpus_vocab.INFO).is_file():  # the tokenizer's own settings, beside its vocab.txt
            return from_folder(beside)
        settings = {**corpus_vocab.WORDPIECE_DEFAULTS, "lowercase": not bpe.bpe_cased}
        return Vocabulary("wordpiece", {"vocab": files[0]}, lowercase=settings["lowercase"], settings=settings)
    return None


def _bpe_files(bpe):
    """The files a checkpoint's --bpe settings name, for messages."""
    names = ("bpe_vocab", "bpe_merges", "gpt2_encoder_json", "gpt2_vocab_bpe", "sentencepiece_model", "bpe_vocab_file")
    return [str(getattr(bpe, n)) for n in names if isinstance(getattr(bpe, n, None), str)] if bpe is not None else []


def find(checkpoint: str | Path, explicit: Optional[str | Path], bpe: Optional[DictConfig],
         data_dir: Optional[str]) -> Vocabulary:
    """--vocab if given, else the checkpoint's --bpe files, else the vocabulary the data-bin carries, else one beside
    the checkpoint; recorded paths that do not resolve from here are looked for as ``checkpoints.locate`` says."""
    from biofairseq.checkpoints import locate, looked_in

    if explicit is not None:
        if not Path(explicit).exists():
            raise ConvertError(f"{explicit}: no such file or folder; --vocab takes a folder with {LOOKED_FOR}")
        found = from_folder(explicit)
        if found is None:
            raise ConvertError(f"{explicit}: no vocabulary there; --vocab takes a folder with {LOOKED_FOR}")
        return found
    found = _from_bpe_config(bpe, checkpoint)
    folders = [p for p in locate(data_dir, checkpoint) if p.is_dir()] if data_dir else []
    for folder in [*folders, Path(checkpoint).absolute().parent]:
        found = found or from_folder(folder)
    if found is None:
        bpe_files = _bpe_files(bpe)
        recorded = f"its --bpe files {', '.join(bpe_files)}, " if bpe_files else ""
        data = f"its data-bin {looked_in(data_dir, checkpoint)}, " if data_dir else ""
        raise ConvertError(
            f"{checkpoint}: vocabulary not found: looked for {recorded}{data}and {LOOKED_FOR} in "
            f"{Path(checkpoint).absolute().parent}; pass --vocab DIR, the folder preprocess/train_vocab.py wrote "
            "(or encoder.json + vocab.bpe for fairseq's GPT-2 BPE)"
        )
    return found


# ---- fairseq's own encoding


class FairseqEncoding:
    """Text -> ids the way fairseq's RobertaHubInterface.encode does it: <s> BPE(text) </s> through dict.txt."""

    def __init__(self, vocabulary: Vocabulary, dictionary: Dictionary) -> None:
        from fairseq.data import encoders

        self.dictionary = dictionary
        files = vocabulary.files
        if vocabulary.kind == "wordpiece":
            if fairseq_bert_encodes(vocabulary.settings):  # fairseq's --bpe bert, a BertTokenizer
                self.bpe = encoders.build_bpe(Namespace(bpe="bert", bpe_vocab_file=files["vocab"],
                                                        bpe_cased=not vocabulary.settings["lowercase"]))
            else:  # settings --bpe bert cannot give: the binarizer's tokenizer, which takes them all
                self.bpe = _LowercasingBPE(corpus_vocab.Encoder.from_files("wordpiece", files, info=vocabulary.settings))
        elif vocabulary.lowercase:
            # fairseq's BPEs do not lowercase; what wrote the data-bin (preprocess/encode.py) did.
            self.bpe = _LowercasingBPE(corpus_vocab.Encoder.from_files(vocabulary.kind, files, lowercase=True))
        elif vocabulary.gpt2:
            self.bpe = encoders.build_bpe(
                Namespace(bpe="gpt2", gpt2_encoder_json=files["vocab"], gpt2_vocab_bpe=files["merges"])
            )
        elif vocabulary.kind == "bytelevel-bpe":
            self.bpe = encoders.build_bpe(
                Namespace(bpe="hf_byte_bpe", bpe_vocab=files["vocab"], bpe_merges=files["merges"],
                          bpe_add_prefix_space=False)
            )
        else:
            self.bpe = encoders.build_bpe(Namespace(bpe="sentencepiece", sentencepiece_model=files["model"]))

    def __call__(self, text: str) -> list[int]:
        line = "<s> " + self.bpe.encode(text) + " </s>"
        return self.dictionary.encode_line(line, append_eos=False, add_if_not_exist=False).long().tolist()


def fairseq_bert_encodes(settings: Mapping[str, Any]) -> bool:
    """Whether fairseq's --bpe bert (BertTokenizer(vocab, do_lower_case=not --bpe-cased), all else default) encodes
    text as a WordPiece vocabulary with these settings does."""
    default = {**corpus_vocab.WORDPIECE_DEFAULTS, "lowercase": settings["lowercase"]}
    return {**settings, "strip_accents": settings["strip_accents"] if settings["strip_accents"] != settings["lowercase"]
            else None} == default


class _LowercasingBPE:
    def __init__(self, encoder: corpus_vocab.Encoder) -> None:
        self.encoder = encoder

    def encode(self, text: str) -> str:
        return self.encoder.encode_lines([text])[0]


# ---- the transformers tokenizer


def _specials(dictionary):
    return {s: dictionary.index(s) for s in SPECIALS}


def _read_merges(path):
    """The merges, lines cut at "\\n" alone (and a "\\r" before it dropped), as tokenizers reads merges.txt."""
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = [l.removesuffix("\n").removesuffix("\r") for l in f]
    return [tuple(l.split(" ")) for l in lines if l and not l.startswith("#version")]


def _lacking(vocabulary, dictionary, missing, what):
    """fairseq encodes a BPE token its dictionary lacks as <unk>. A transformers tokenizer file holds one token
    per id and needs every merge result in its vocabulary, so it cannot give <unk> for such a token: refuse."""
    return ConvertError(
        f"{getattr(dictionary, 'path', 'dict.txt')}: lacks {len(missing)} {what} of {next(iter(vocabulary.files.values()))} (e.g. "
        f"{missing[:3]}); fairseq encodes them as <unk>, which no transformers tokenizer file can reproduce; "
        "convert a model binarized with the vocabulary's complete dict.txt (preprocess/binarize.sh writes one)"
    )


def _bytelevel_vocab(vocabulary, dictionary):
    with open(vocabulary.files["vocab"], encoding="utf-8") as f:
        bpe_ids = json.load(f)
    specials = _specials(dictionary)
    ids, missing = {}, []
    for token, bpe_id in bpe_ids.items():
        symbol = token if token in specials else str(bpe_id)
        if symbol not in dictionary.indices:
            missing.append(token)
        ids[token] = dictionary.indices.get(symbol)
    if missing:
        raise _lacking(vocabulary, dictionary, missing, "BPE tokens")
    ids.update(specials)
    return ids


def _sentencepiece_parts(vocabulary, dictionary):
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers

    proto = sentencepiece_model_pb2.ModelProto()
    with open(vocabulary.files["model"], "rb") as f:
        proto.ParseFromString(f.read())
    NORMAL, USER_DEFINED, BYTE = 1, 4, 6  # sentencepiece_model.proto's piece types (2 unknown, 3 control, 5 unused)
    named = corpus_vocab.dict_symbol  # a piece holding "\r" has a stand-in name in dict.txt
    scores = {named(p.piece): p.score for p in proto.pieces}
    missing = [p.piece for p in proto.pieces
               if p.type in (NORMAL, USER_DEFINED, BYTE) and named(p.piece) not in dictionary.indices]
    if missing:
        raise _lacking(vocabulary, dictionary, missing, "pieces")
    floor = min(scores.values()) - 10.0  # dictionary symbols SentencePiece never produces
    symbols = [dictionary[i] for i in range(len(dictionary))]
    vocab = [(s, scores.get(s, floor) if s not in SPECIALS else 0.0) for s in symbols]
    byte_fallback = proto.trainer_spec.byte_fallback
    if proto.trainer_spec.model_type == 1:  # unigram: Viterbi over the whole text, as sentencepiece does
        model = models.Unigram(vocab, unk_id=dictionary.unk(), byte_fallback=byte_fallback)
    elif proto.trainer_spec.model_type == 2:
        from transformers.tokenization_utils_base import generate_merges

        spm_order = {p.piece: i for i, p in enumerate(proto.pieces)}
        merges = generate_merges(spm_order, [(p.piece, p.score) for p in proto.pieces])
        merges = [(named(a), named(b)) for a, b in merges]  # the names of the vocabulary's tokens, as dict.txt's
        model = models.BPE({s: i for i, s in enumerate(symbols)}, merges, unk_token="<unk>", fuse_unk=True,
                           byte_fallback=byte_fallback)
    else:
        raise ConvertError(f"{vocabulary.files['model']}: only unigram and BPE SentencePiece models convert")
    tokenizer = Tokenizer(model)
    spec = proto.normalizer_spec
    steps = [normalizers.Precompiled(spec.precompiled_charsmap)] if spec.precompiled_charsmap else []
    if spec.remove_extra_whitespaces:
        steps += [normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")]
    if spec.add_dummy_prefix:
        steps.append(normalizers.Prepend(" "))
    steps.append(normalizers.Replace(" ", "\u2581"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    pieces = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if spec.add_dummy_prefix:
        pieces.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(pieces)
    user_defined = [p.piece for p in proto.pieces if p.type == USER_DEFINED and p.piece not in SPECIALS]
    return tokenizer, user_defined


def wordpiece_ids(vocabulary: Vocabulary, dictionary: Dictionary) -> list[int]:
    """The vocab.txt id of each fairseq index of a WordPiece vocabulary's dict.txt (its special tokens under fairseq's
    names), where each of vocab.txt's tokens has one index; else one line saying which are missing or extra."""
    settings = vocabulary.settings
    with open(vocabulary.files["vocab"], encoding="utf-8") as f:  # as corpus_vocab.wordpiece_tokenizer reads it
        vocab = {token.rstrip("\n"): i for i, token in enumerate(f)}
    names = {FAIRSEQ_NAMES[k]: token for k, token in settings["specials"].items()}
    ids = [vocab.get(names.get(dictionary[i], dictionary[i])) for i in range(len(dictionary))]
    extra = [dictionary[i] for i, token_id in enumerate(ids) if token_id is None]
    missing = sorted(set(vocab.values()) - set(ids))
    if extra or missing or len(set(ids)) != len(ids):
        what = (f"{len(extra)} entries not in it (e.g. {extra[:3]})" if extra else
                f"no entry for {len(missing)} of its tokens (e.g. ids {missing[:3]})" if missing else "entries twice")
        raise ConvertError(f"{getattr(dictionary, 'path', 'dict.txt')}: {what} of {vocabulary.files['vocab']}; a "
                           "WordPiece model's dict.txt holds each of its tokens once (biofairseq-convert from-hf writes it)")
    return ids


def build_wordpiece_tokenizer(vocabulary: Vocabulary, max_length: int) -> BertTokenizer:
    """The published tokenizer of a WordPiece vocabulary, BERT's (BertTokenizerFast, its own vocab.txt and ids)."""
    from transformers import BertTokenizer

    settings = vocabulary.settings
    specials = {f"{k}_token": v for k, v in settings["specials"].items()}
    return BertTokenizer(vocabulary.files["vocab"], do_lower_case=settings["lowercase"],
                         strip_accents=settings["strip_accents"], tokenize_chinese_chars=settings["chinese_chars"],
                         model_max_length=max_length, **specials)


def build_tokenizer(vocabulary: Vocabulary, dictionary: Dictionary, max_length: int) -> PreTrainedTokenizerFast:
    """A transformers tokenizer whose ids are fairseq's for this vocabulary and dict.txt (WordPiece:
    ``build_wordpiece_tokenizer``, with the published ids)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, RobertaTokenizer

    specials = dict(bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>", unk_token="<unk>",
                    pad_token="<pad>", mask_token=AddedToken("<mask>", lstrip=True, rstrip=False))
    if vocabulary.kind == "bytelevel-bpe":
        ids = _bytelevel_vocab(vocabulary, dictionary)
        merges = _read_merges(vocabulary.files["merges"])
        if not vocabulary.lowercase:  # the standard RoBERTa tokenizer class
            return RobertaTokenizer(vocab=ids, merges=merges, add_prefix_space=False, model_max_length=max_length,
                                    **specials)
        tokenizer = Tokenizer(models.BPE(ids, merges, fuse_unk=False))
        tokenizer.normalizer = normalizers.Lowercase()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        user_defined = []
    else:
        tokenizer, user_defined = _sentencepiece_parts(vocabulary, dictionary)
    bos, eos = dictionary.bos(), dictionary.eos()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    if user_defined:
        tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in user_defined])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=max_length, **specials)


# ---- transformers tokenizer -> dict.txt and vocabulary files (from-hf)


def has_tokenizer(hf_dir: str | Path) -> bool:
    """Whether a transformers folder holds a tokenizer's vocabulary. Without one, AutoTokenizer still builds a
    tokenizer from config.json alone: its special tokens only, at ids that would mislead every later message."""
    hf_dir = Path(hf_dir)
    return ((hf_dir / "tokenizer.json").is_file() or (hf_dir / "vocab.txt").is_file() or any(hf_dir.glob("*.model"))
            or ((hf_dir / "vocab.json").is_file() and (hf_dir / "merges.txt").is_file()))


def fairseq_order(tokenizer: PreTrainedTokenizerBase, vocab_size: int, hf_dir: str | Path,
                  renumber: bool = False) -> list[int]:
    """The transformers id at each fairseq index: fairseq's Dictionary holds <s>, <pad>, </s>, <unk> at 0-3. A
    RoBERTa-layout tokenizer already has them there (the identity). With ``renumber`` (ModernBERT, whose special
    tokens come after its vocabulary) the ids of [CLS], [PAD], [SEP] and [UNK] move to 0-3 and the others follow in
    their order: the model's embedding rows are reordered the same way, so it computes the same function."""
    expected = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    found = {name: getattr(tokenizer, f"{name}_token_id") for name in expected}
    if found == expected:
        return list(range(vocab_size))
    if renumber:
        specials = [tokenizer.cls_token_id if found["bos"] is None else found["bos"], found["pad"],
                    tokenizer.sep_token_id if found["eos"] is None else found["eos"], found["unk"]]
        if None not in specials and len(set(specials)) == 4 and max(specials) < vocab_size:
            return specials + [i for i in range(vocab_size) if i not in set(specials)]
        found = dict(zip(("bos or cls", "pad", "eos or sep", "unk"), specials))
    raise ConvertError(
        f"{hf_dir}: special token ids are {found}; fairseq's Dictionary needs <s> 0, <pad> 1, </s> 2, <unk> 3 "
        "(the RoBERTa and XLM-R layout), so this tokenizer cannot be carried over"
    )


def export_fairseq_vocabulary(tokenizer: PreTrainedTokenizerFast, vocab_size: int, hf_dir: str | Path, out_dir: Path,
                              renumber: bool = False) -> list[int]:
    """Writes dict.txt (fairseq index i holds transformers id order[i]) and the vocabulary files preprocess/ reads;
    returns that order (``fairseq_order``)."""
    import shutil

    order = fairseq_order(tokenizer, vocab_size, hf_dir, renumber)
    if tokenizer.mask_token_id is None:
        raise ConvertError(f"{hf_dir}: the tokenizer has no mask token; a masked LM needs one (mask_token)")
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    model = backend["model"]
    pre = json.dumps(backend.get("pre_tokenizer") or {})
    byte_level = model["type"] == "BPE" and '"ByteLevel"' in pre
    added = {t["id"]: t["content"] for t in backend.get("added_tokens", [])}
    if order[:4] != [0, 1, 2, 3]:  # fairseq's names for what moved to 0-3, and for the mask, which stays where it is
        added[tokenizer.mask_token_id] = "<mask>"
    id_to_token = {i: t for t, i in tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False).items()}
    symbols, fillers = [], 0
    for i in order[4:]:
        if i in added:
            symbols.append(added[i])
        elif byte_level and i in id_to_token:
            symbols.append(str(i))
        elif i in id_to_token:
            symbols.append(id_to_token[i])
        else:
            symbols.append(FILLER.format(fillers))
            fillers += 1
    if len(set(map(corpus_vocab.dict_symbol, symbols))) != len(symbols):
        raise ConvertError(f"{hf_dir}: two token ids share a symbol; dict.txt needs one symbol per id")
    if model["type"] == "WordPiece":  # BERT's: vocab.txt and the tokenizer's settings
        settings = _wordpiece_settings(tokenizer, backend, hf_dir)
        corpus_vocab.write_dict(out_dir / "dict.txt", symbols)
        vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
        by_id = {i: token for token, i in vocab.items()}
        if sorted(by_id) != list(range(len(by_id))):
            raise ConvertError(f"{hf_dir}: the WordPiece vocabulary's ids are not 0 to {len(by_id) - 1}, one token each")
        (out_dir / "vocab.txt").write_text("".join(by_id[i] + "\n" for i in range(len(by_id))), encoding="utf-8")
        corpus_vocab.write_info(out_dir, "wordpiece", len(by_id), **settings)
        return order
    corpus_vocab.write_dict(out_dir / "dict.txt", symbols)
    lowercase = '"Lowercase"' in json.dumps(backend.get("normalizer") or {})
    if byte_level:
        vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
        if order[:4] != [0, 1, 2, 3]:  # the renumbered special tokens under fairseq's names, as dict.txt has them
            names = dict(zip(order[:4], SPECIALS[:4])) | {tokenizer.mask_token_id: "<mask>"}
            renamed = {names.get(i, token): i for token, i in vocab.items()}
            if len(set(renamed)) != len(renamed):
                raise ConvertError(f"{hf_dir}: the vocabulary has a token named like fairseq's <s>, <pad>, </s>, <unk> "
                                   "or <mask> besides its own special tokens, which would take those names")
            vocab = renamed
        (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        (out_dir / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges), encoding="utf-8")
        corpus_vocab.write_info(out_dir, "bytelevel-bpe", vocab_size, lowercase=lowercase)
        return order
    models_found = sorted(Path(hf_dir).glob("*.model"))
    if len(models_found) != 1:
        raise ConvertError(
            f"{hf_dir}: the tokenizer is not byte-level BPE, and fairseq needs its SentencePiece .model file, which "
            "is not there; copy it into the folder"
        )
    shutil.copyfile(models_found[0], out_dir / "sentencepiece.model")
    corpus_vocab.write_info(out_dir, "sentencepiece", vocab_size)
    return order


def _wordpiece_settings(tokenizer, backend, hf_dir):
    """A WordPiece tokenizer's settings (corpus_vocab.WORDPIECE_DEFAULTS' keys), where it is BERT's: BertNormalizer,
    BertPreTokenizer, "##" continuations; else one line saying what the binarizer could not reproduce."""
    normalizer, pre, model = backend.get("normalizer") or {}, backend.get("pre_tokenizer") or {}, backend["model"]
    problems = [what for what, wrong in (
        (f"normalizer {normalizer.get('type')}", normalizer.get("type") != "BertNormalizer" or not normalizer.get("clean_text", True)),
        (f"pre-tokenizer {pre.get('type')}", pre.get("type") != "BertPreTokenizer"),
        (f"continuing subword prefix {model.get('continuing_subword_prefix')!r}", model.get("continuing_subword_prefix") != "##"),
    ) if wrong]
    if problems:
        raise ConvertError(f"{hf_dir}: a WordPiece tokenizer with {', '.join(problems)}; the corpus stages encode "
                           "with BERT's (BertNormalizer, BertPreTokenizer, ## continuations) only")
    specials = {k: str(getattr(tokenizer, f"{k}_token")) for k in ("cls", "pad", "sep", "unk", "mask")}
    return {"lowercase": bool(normalizer.get("lowercase")), "strip_accents": normalizer.get("strip_accents"),
            "chinese_chars": bool(normalizer.get("handle_chinese_chars", True)),
            "max_word_chars": int(model.get("max_input_chars_per_word", 100)), "specials": specials}
