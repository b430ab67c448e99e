"""The checks of a recipe's settings that read its inputs, before any work: the sources (their language, their
documents against VALID_DOCS), INIT_FROM's model (its family, positions, weights and vocabulary), the NER data (its
splits, types and language). Each returns None or the one line that says what is wrong and how to fix it (or raises
SettingsError with it)."""

import functools
import json
import os
import re
from pathlib import Path
from typing import Callable, Optional

from biofairseq.finetune import splits
from biofairseq.recipe.table import SettingsError, path_pairs, plural
from biofairseq.text.phrases import with_article


def valid_docs_problem(values: dict) -> Optional[str]:
    """None, or the one line saying that VALID_DOCS would hold out half of SOURCES' documents or more (all of them:
    the cleaning would say so after it had cleaned them all); counting stops at twice VALID_DOCS, so a large corpus
    costs what that many documents cost to read."""
    from biofairseq.corpus.sources import count_documents

    wanted = int(values["VALID_DOCS"])
    paths = [path for _, path in path_pairs(values["SOURCES"])]
    found = count_documents(paths, values["TEXT_DOCS"], values["TEXT_FIELD"], more_than=2 * wanted - 1)
    if found >= 2 * wanted:  # at least as many to train on as held out, before the cleaning removes any
        return None
    text = any(".jsonl" not in Path(path).name for path in paths)  # plain text (or folders): TEXT_DOCS applies
    hint = "; or, if each line is a document, TEXT_DOCS=line" if values["TEXT_DOCS"] == "blank-line" and text else ""
    read = f" (read as TEXT_DOCS={values['TEXT_DOCS']})" if text else ""
    left = f"{found - wanted:,} left to train on" if found > wanted else "none left to train on"
    return (f"VALID_DOCS={wanted}, but SOURCES hold {found:,} document{'s' * (found != 1)}{read} before cleaning, "
            f"{left}; give VALID_DOCS={max(1, found // 10)} (a tenth){hint}")


def notes_read_as_paragraphs(values: dict) -> list:
    """A line for each source that is a folder of notes read at blank lines (TEXT_DOCS=blank-line by default, not
    given), each note's paragraphs becoming documents: said before any work, not after the cleaning."""
    from biofairseq.corpus.sources import paragraphs_as_documents

    lines = []
    for name, path in path_pairs(values["SOURCES"]) if values["TEXT_DOCS"] == "blank-line" else ():
        found = paragraphs_as_documents(path) if os.path.isdir(path) else None
        if found:
            lines.append(f"note: SOURCES '{name}': its first {found[0]} text files give {found[1]} documents, split at "
                         "blank lines (TEXT_DOCS=blank-line); if each file is one document (a note, a case), give "
                         f"TEXT_DOCS=file (and a VALID_DOCS={values['VALID_DOCS']} that the files outnumber twice)")
    return lines


def languages(texts: list) -> object:
    """{language: how many of the texts lid.176 gives it} (the cleaning's identifier, loaded once)."""
    from collections import Counter

    from biofairseq.corpus.cleaning import lid_model

    return Counter(lid_model().predict(" ".join(text.split()))[0][0].removeprefix("__label__") for text in texts)


def _changed(path):
    """When a file or folder last changed: the key under which what was read of it is remembered, in this process
    (a recipe's settings step is a process of its own; a folder's time changes with its entries, not their texts)."""
    return os.stat(path).st_mtime_ns


@functools.lru_cache(maxsize=64)
def _source_languages(path, changed, text_docs, text_field):
    """The languages of a source's first documents (at most 100), read once per process while it is unchanged."""
    from biofairseq.corpus.sources import sample_documents

    return languages(sample_documents([path], text_docs, text_field)[:100])


def source_language_problem(source: str, values: dict, given: bool = True) -> Optional[str]:
    """None, or the one line saying that the start of a source (NAME=PATH) is in another language than CORPUS_LANG:
    under a tenth of its first documents in it, so the cleaning would remove nearly all of it (English text given to
    a recipe whose default is Spanish), an hour later on a large corpus. ``given``: SOURCES came from the user, not
    from the preset (the tiny preset's bundled Spanish sample)."""
    path = source.split("=", 1)[1]
    found, lang = _source_languages(path, _changed(path), values["TEXT_DOCS"], values["TEXT_FIELD"]), values["CORPUS_LANG"]
    documents = sum(found.values())
    if not documents or found[lang] >= 0.1 * documents:
        return None
    other, count = found.most_common(1)[0]
    if not given:
        return (f"SOURCES is PRESET={values['PRESET']}'s {other} sample ({source}), not in CORPUS_LANG={lang}; give "
                f"your corpus, SOURCES=NAME=PATH, or CORPUS_LANG={other}")
    return (f"SOURCES: '{source}': {count} of its first {documents} documents are identified as {other} and "
            f"{found[lang]} as {lang}, so the cleaning would remove nearly all of it; set CORPUS_LANG={other}")


def init_from_problem(recipe: str, values: dict, given: dict) -> Optional[str]:
    """None, or why INIT_FROM's transformers folder cannot start this recipe, read from its config.json alone: a family
    the recipe does not continue (named, with the recipes that do), settings its conversion cannot compute, sequences
    longer than its positions, an ELECTRA's embedding sharing or generator width set twice. What from-hf would refuse
    hours later, after the cleaning, is refused here. (A fairseq checkpoint, .pt, is read when it is converted.) given:
    the settings the user gave, {name: value}, as against the presets'."""
    init = values["INIT_FROM"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert import ConvertError, families

    fraction = values.get("GENERATOR_FRACTION") or None
    source = families.Source(Path(init), generator_fraction=float(fraction) if fraction else None)
    try:
        family, config, problems = families.inspect(source)
    except ConvertError as error:
        return f"INIT_FROM={init}: {str(error).removeprefix(f'{init}: ')}"
    kind = ", ".join(config.architectures or []) or config.model_type
    if recipe not in family.recipes:
        takes = [f.name for f in families.FAMILIES if recipe in f.recipes]
        return (f"INIT_FROM={init}: {with_article(family.name)} model ({kind}); {recipe}.sh continues {plural(takes)} models; "
                f"continue {with_article(family.name)} with {plural([f'recipes/{r}.sh' for r in family.recipes])}")
    if problems:
        return (f"INIT_FROM={init}: {'; '.join(problems)}: no fairseq {family.fairseq_model} computes this "
                f"{family.name} model, so it cannot be continued")
    own = [name for name in ("ARCH", "VOCAB_SIZE", "VOCAB_SIZES", "VOCAB_TYPE") if given.get(name) and name in values]
    if own:
        return (f"{own[0]}={given[own[0]]}: INIT_FROM={init} brings its own shape and vocabulary, which the run "
                f"continues; drop {' and '.join(own)}")
    longest = family.max_length(config)
    lengths = ["TOKENS_PER_SAMPLE", "NER_MAX_LENGTH"] + (["PHASE2_TOKENS_PER_SAMPLE"] if values.get("PHASE2_SHARE", "0") != "0" else [])
    longer = [f"{name}={values[name]}" for name in lengths if name in values and int(values[name]) > longest]
    if longer:
        phase2 = " (or PHASE2_SHARE=0: one length)" if any(n.startswith("PHASE2") for n in longer) else ""
        said = longer[0] if len(longer) == 1 else f"{', '.join(longer[:-1])} and {longer[-1]}"
        return (f"{said}: INIT_FROM={init} has {longest} positions (max_position_embeddings "
                f"{config.max_position_embeddings}); give at most {longest}{phase2}")
    return family.init_problem(source, given)


def init_weights_problem(values: dict) -> Optional[str]:
    """None, or the line saying INIT_FROM's folder (or its ELECTRA generator's) holds no weights: a download cut short,
    which from-hf would meet after the cleaning."""
    init = values["INIT_FROM"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert import families

    generator = Path(init) / "generator"
    missing = families.weights_problem(init) or ((generator / "config.json").is_file() and families.weights_problem(generator))
    return f"INIT_FROM={init}: {missing.split(': ', 1)[1]} in {missing.split(': ', 1)[0]}" if missing else None


def init_vocabulary_kind(init: str) -> str:
    """The kind of INIT_FROM's vocabulary (biofairseq.corpus.vocab.TYPES, or what else its tokenizer is), from its
    files alone: a transformers folder's tokenizer.json (else vocab.txt, vocab.json + merges.txt, a .model), a fairseq
    checkpoint's --bpe."""
    path = Path(init)
    if init.endswith(".pt"):
        from biofairseq.training_state import load_state

        bpe = (load_state(path).get("cfg") or {}).get("bpe") or {}
        return {"hf_byte_bpe": "bytelevel-bpe", "gpt2": "bytelevel-bpe", "bert": "wordpiece"}.get(
            bpe.get("_name"), bpe.get("_name") or "unknown")
    if (path / "tokenizer.json").is_file():
        try:
            backend = json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))
        except ValueError:
            return "unknown"
        model = (backend.get("model") or {}).get("type", "unknown")
        if model == "BPE":
            return "bytelevel-bpe" if '"ByteLevel"' in json.dumps(backend.get("pre_tokenizer") or {}) else "sentencepiece"
        return {"WordPiece": "wordpiece", "Unigram": "sentencepiece"}.get(model, model)
    if (path / "vocab.txt").is_file():
        return "wordpiece"
    if (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        return "bytelevel-bpe"
    return "sentencepiece" if any(path.glob("*.model")) else "unknown"


def init_extension_problem(values: dict) -> Optional[str]:
    """None, or why VOCAB_EXTEND cannot extend INIT_FROM's vocabulary (its kind: SentencePiece is not extended)."""
    if not int(values.get("VOCAB_EXTEND") or 0):
        return None
    from biofairseq.corpus.vocab_extension import refusal

    problem = refusal(init_vocabulary_kind(values["INIT_FROM"]))
    return f"VOCAB_EXTEND={values['VOCAB_EXTEND']}: INIT_FROM={values['INIT_FROM']} has {problem}; unset VOCAB_EXTEND" \
        if problem else None


UNKNOWN_SHARE = 0.01  # of the corpus's tokens that INIT_FROM's vocabulary may leave unknown


def init_vocabulary_problem(values: dict) -> Optional[str]:
    """None, or why INIT_FROM's vocabulary cannot serve the corpus: a transformers folder without a tokenizer, or one
    that leaves more than 1% of the tokens of the corpus's start unknown (an English WordPiece on Greek text), which
    continual pretraining would then learn as one token. A fairseq checkpoint's vocabulary is byte-level or has byte
    fallback (preprocess/train_vocab.py's), so it knows every text."""
    init, lang = values["INIT_FROM"], values["CORPUS_LANG"]
    if init.endswith(".pt"):
        return None
    from biofairseq.convert.vocabulary import TOKENIZER_FILES, has_tokenizer
    from biofairseq.corpus.sources import sample_documents

    if not has_tokenizer(init):
        return (f"INIT_FROM={init}: no tokenizer in the folder ({TOKENIZER_FILES}); save it there with "
                "tokenizer.save_pretrained, as the model was")
    import transformers

    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(init)
    except (ValueError, OSError, KeyError, TypeError, ImportError) as error:
        return (f"INIT_FROM={init}: transformers cannot load its tokenizer ({str(error).splitlines()[0][:200]}); give a "
                "folder that AutoTokenizer.from_pretrained loads")
    paths = [pair.split("=", 1)[1] for pair in values["SOURCES"].split()]
    documents = sample_documents(paths, values["TEXT_DOCS"], values["TEXT_FIELD"])
    ids = [i for doc in documents for i in tokenizer(doc, add_special_tokens=False, verbose=False)["input_ids"]]
    unknown = ids.count(tokenizer.unk_token_id) / max(1, len(ids)) if tokenizer.unk_token_id is not None else 0
    if unknown > UNKNOWN_SHARE:
        return (f"INIT_FROM={init}: its vocabulary leaves {unknown:.0%} of the tokens of the corpus's start unknown "
                f"({tokenizer.unk_token}), so it cannot serve CORPUS_LANG={lang}; continue a model whose vocabulary "
                "covers the language, or pretrain from scratch (INIT_FROM=)")
    return None


def ner_data(values: dict, say: Callable[[str], None], given: bool = True) -> dict:
    """NER_DATA's sets: (names, train, dev, test) lists, each split found by its names (biofairseq/finetune/splits.py)."""
    found = ([], [], [], [])
    context_document = re.search(r"--context(=|\s+)document", values["NER_EXTRA"])
    for dataset in values["NER_DATA"].split():
        name, _, folder = dataset.partition("=")
        if not Path(folder).is_dir():
            raise SettingsError(f"NER_DATA: '{dataset}': {folder}: not a folder; give the folder that holds train and "
                                "valid (or dev)")
        train, dev, test = (splits.find(folder, role) for role in ("train", "dev", "test"))
        misnamed = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.stem in splits.NAMES
                          and p.suffix not in splits.FILE_SUFFIXES)
        if misnamed and not (train and dev):  # train.txt, dev.txt: CoNLL files under a name no reader takes
            raise SettingsError(f"NER_DATA: '{dataset}': {misnamed[0]}: a split as a {misnamed[0].suffix or 'bare'} file; "
                                f"name a CoNLL file {misnamed[0].stem}.conll, .tsv or .bio (JSON: .jsonl, .json), or give "
                                "a BRAT split as a folder (X.txt beside X.ann)")
        if not train:
            raise SettingsError(f"NER_DATA: '{dataset}': {folder} has no train split; it needs train and valid (or dev), "
                                "each a BRAT folder, a CoNLL file (.conll, .tsv, .bio) or JSON (.jsonl, .json)")
        if not dev:
            raise SettingsError(f"NER_DATA: '{dataset}': {folder} has no valid (or dev, devel) split beside train; add one "
                                "(a BRAT folder or a .conll, .tsv, .bio file), e.g. documents moved out of train")
        for split in (train, dev, test):
            if split is None:
                continue
            if not Path(split).is_file() and next(Path(split).rglob("*.txt"), None) is None:
                raise SettingsError(f"NER_DATA: '{dataset}': {split}: a folder without .txt files; a split is a BRAT "
                                    "folder (X.txt beside X.ann) or a CoNLL file")
            # a CoNLL file does not say where its documents end (biofairseq-ner refuses it), so say so before pretraining
            if Path(split).is_file() and Path(split).suffix in splits.CONLL_SUFFIXES and context_document:
                raise SettingsError(f"NER_DATA: '{dataset}': {split}: a CoNLL file, and NER_EXTRA asks for --context "
                                    "document, which needs BRAT folders (X.txt beside X.ann); give BRAT data or drop "
                                    "--context document")
        _check_ner_data(dataset, {"train": train, "dev": dev, "test": test}, values, given)
        say(f"NER_DATA: {name}: train {train}, valid {dev}, test "
            f"{test or 'none (the sweep and the report give valid scores only)'}")
        for column, value in zip(found, (name, train, dev, test or "")):
            column.append(value)
    return dict(zip(("NER_NAMES", "NER_TRAIN", "NER_DEV", "NER_TEST"), found))


@functools.lru_cache(maxsize=64)
def _ner_data_read(paths, allowed):
    """(the unseen-type problem or None, the languages of the training text in chunks of 10 sentences) of NER splits
    ((role, path, changed), ...), read once per process while they are unchanged."""
    from biofairseq.finetune import NERFormatError
    from biofairseq.finetune.training import read_annotated, unseen_types

    paths = {role: path for role, path, _ in paths}
    try:
        sets = {role: read_annotated(path, role, warn=lambda line: None) for role, path in paths.items()}
    except NERFormatError:
        return None, {}  # the data's own problems: the sweep's to report
    if not sets["train"].types():
        return None, {}  # a training set without entities: the sweep's to report too
    if not allowed:
        try:
            unseen_types(sets, paths, allowed=False, warn=lambda line: None,
                         accept="add --allow-unseen-types to NER_EXTRA")
        except NERFormatError as error:
            return str(error), {}
    sentences = [" ".join(s.tokens) for s in sets["train"].sentences[:200]]
    return None, languages(" ".join(sentences[i:i + 10]) for i in range(0, len(sentences), 10))


def _check_ner_data(dataset, paths, values, given=True):
    """Before pretraining, what the sweep would find after it: a dev or test entity type that train lacks (a typo,
    another data set's types; NER_EXTRA=--allow-unseen-types accepts it), and NER text in another language than
    CORPUS_LANG, the model's. The data's own problems are the sweep's to report."""
    allowed = bool(re.search(r"--allow-unseen-types\b", values["NER_EXTRA"]))
    paths = tuple((role, path, _changed(path)) for role, path in paths.items() if path)
    problem, found = _ner_data_read(paths, allowed)
    if problem:
        raise SettingsError(f"NER_DATA: '{dataset}': {problem}")
    lang, chunks = values["CORPUS_LANG"], sum(found.values())
    if chunks and found[lang] < 0.1 * chunks:
        other = found.most_common(1)[0][0]
        if not given:
            raise SettingsError(f"NER_DATA is PRESET={values['PRESET']}'s {other} data ({dataset}), not in CORPUS_LANG="
                                f"{lang}; give yours, NER_DATA=NAME=DIR, or NER_DATA= to pretrain and convert only")
        raise SettingsError(f"NER_DATA: '{dataset}': its training text is identified as {other}, not CORPUS_LANG={lang}, "
                            f"the language the model is pretrained in; give NER data in {lang}, or a corpus in {other} "
                            f"(SOURCES=NAME=PATH and CORPUS_LANG={other})")
