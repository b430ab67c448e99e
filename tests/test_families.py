"""The published families a team continues: BERT (and BertForPreTraining), Megatron-BERT and ELECTRA, from a transformers
folder into fairseq and back, on tiny stand-ins made offline at their families' defaults (conftest.standins):
parity both ways, the family given back with its own vocab.txt, WordPiece through the corpus stages. RoBERTa and
ModernBERT: test_convert.py, test_modernbert.py; through the recipes: test_recipe_continued.py."""

import json
import shutil
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
import torch

import inprocess
from biofairseq.dev.samples import NCBI, read_documents
from test_convert import convert, fails, report
from test_corpus_preparation import ODD_DOCUMENT, data_files

# stand-in: (family, the transformers class from-hf reads, the class to-hf gives back)
FAMILIES = {
    "bert": ("BERT", "BertForMaskedLM", "BertForMaskedLM"),
    "bert-pretraining": ("BERT", "BertForPreTraining", "BertForMaskedLM"),  # its next-sentence head left out
    "megatron-bert": ("Megatron-BERT", "MegatronBertForMaskedLM", "MegatronBertForMaskedLM"),
    "electra": ("ELECTRA", "ElectraForPreTraining", "ElectraForPreTraining"),
}


def held_out():
    """Sentences the vocabulary never saw: Spanish clinical cases past its 300, NCBI-disease's English."""
    spanish = [p for doc in read_documents(600, 6) for p in doc][:8]
    english = [line.split("\t")[0] for line in (NCBI / "test.tsv").read_text(encoding="utf-8").splitlines()[:60]]
    return spanish + [" ".join(english[:30]), " ".join(english[30:])]


@pytest.fixture(scope="module")
def round_trips(standins, tmp_path_factory):
    """{stand-in: (from-hf's folder, to-hf's folder)}: each stand-in converted to fairseq and back, untrained."""
    root = tmp_path_factory.mktemp("families")
    out = {}
    for name in FAMILIES:
        assert convert("from-hf", standins[name], root / f"{name}-fairseq") == 0
        generator = ["--generator"] if name == "electra" else []
        assert convert("to-hf", root / f"{name}-fairseq" / "model.pt", root / f"{name}-hf", *generator) == 0
        out[name] = (root / f"{name}-fairseq", root / f"{name}-hf")
    return out


def outputs(folder, sentences, tower=None):
    """(ids, hidden states, logits) of a transformers folder's model on the sentences, padded, fp32, eval mode."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = transformers.AutoConfig.from_pretrained(folder)
    model = getattr(transformers, config.architectures[0]).from_pretrained(folder).float().eval()
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
    real = batch["attention_mask"].bool()
    logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits  # BertForPreTraining's MLM head
    return batch["input_ids"], out.hidden_states[-1][real], logits[real]


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_converts_exactly_and_comes_back_as_itself(name, standins, round_trips):
    """from-hf: parity within 1e-4 (LayerNorm epsilon 1e-12 as the model's --layer-norm-eps, positions from 0, token
    type 0 folded in, ids renumbered); to-hf: the same transformers class (a BertForPreTraining as BertForMaskedLM)
    with its own vocab.txt and ids, whose outputs on held-out sentences are the stand-in's within 1e-4."""
    family, read, written = FAMILIES[name]
    fairseq_dir, hf_dir = round_trips[name]
    made = report(fairseq_dir)
    assert (made["family"], made["transformers_class"]) == (family, read)
    assert made["fairseq_flags"][-2:] == ["--layer-norm-eps", "1e-12"], made["fairseq_flags"]
    parities = [made["parity"]] + ([made["generator_parity"]] if name == "electra" else [])
    for parity in [*parities, report(hf_dir)["parity"]]:
        assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    assert any("renumbered" in note for note in made["notes"]) and any("type_vocab_size 2" in n for n in made["notes"])
    if name == "bert-pretraining":
        assert any("next-sentence head" in note for note in made["notes"])
    original, back = (json.loads((Path(f) / "config.json").read_text()) for f in (standins[name], hf_dir))
    assert back["architectures"] == [written] and back["model_type"] == original["model_type"]
    assert back["layer_norm_eps"] == 1e-12 and back["pad_token_id"] == original["pad_token_id"] == 0
    assert (hf_dir / "vocab.txt").read_bytes() == (standins[name] / "vocab.txt").read_bytes()
    assert json.loads((hf_dir / "tokenizer_config.json").read_text())["tokenizer_class"].startswith("BertTokenizer")
    folders = [(standins[name], hf_dir)] + ([(standins[name] / "generator", hf_dir / "generator")] if name == "electra" else [])
    sentences = held_out()
    for before, after in folders:
        (ids, hidden, logits), (back_ids, back_hidden, back_logits) = outputs(before, sentences), outputs(after, sentences)
        assert torch.equal(ids, back_ids) and ids.eq(100).sum() < ids.numel() / 50  # [UNK] rare: a real vocabulary
        torch.testing.assert_close(back_hidden, hidden, rtol=0, atol=1e-4)
        torch.testing.assert_close(back_logits, logits, rtol=0, atol=1e-4)


def test_a_discriminator_without_its_generator_gets_a_fresh_one_said_in_one_note(standins, tmp_path):
    assert convert("from-hf", standins["electra-discriminator"], tmp_path / "fresh", "--generator-fraction", "0.25") == 0
    made = report(tmp_path / "fresh")
    assert any("no generator" in note and "0.25" in note and "fresh" in note for note in made["notes"])
    flags = made["fairseq_flags"]
    assert flags[flags.index("--generator-width-fraction") + 1] == "0.25" and "generator_parity" not in made
    assert made["parity"]["max_abs_diff_hidden"] <= 1e-4
    from biofairseq.checkpoints import load

    model = load(tmp_path / "fresh" / "model.pt").model
    generator = model.generator.layers[0].fc1.weight
    assert generator.shape[0] == 4 * 32 and 0.01 < float(generator.std()) < 0.05  # 1/4 of 128 wide, initialised as BERT


def test_what_the_conversion_cannot_take_is_refused_in_one_line_from_config_alone(standins, tmp_path, capsys):
    generator = standins["electra"] / "generator"
    message = fails(capsys, "from-hf", generator, tmp_path / "out")
    assert "an ELECTRA generator (ElectraForMaskedLM), not a discriminator (ElectraForPreTraining)" in message
    assert "give the discriminator's folder, which holds this one as its generator/ folder" in message
    message = fails(capsys, "from-hf", standins["electra"], tmp_path / "out", "--generator", standins["bert"])
    assert f"{standins['bert']}: a bert model, not an ELECTRA generator" in message
    odd = tmp_path / "odd-electra"
    shutil.copytree(standins["electra"], odd)
    config = json.loads((odd / "generator" / "config.json").read_text())
    (odd / "generator" / "config.json").write_text(json.dumps({**config, "num_attention_heads": 2}))
    assert "generator num_attention_heads 2 (fairseq's ELECTRA gives a generator 64 wide 1" in fails(
        capsys, "from-hf", odd, tmp_path / "out")
    message = fails(capsys, "from-hf", standins["bert"], tmp_path / "out", "--generator-fraction", "0.25")
    assert "--generator-fraction: a BERT model has no generator" in message
    relative = tmp_path / "relative-bert"
    shutil.copytree(standins["bert"], relative)
    config = json.loads((relative / "config.json").read_text())
    (relative / "config.json").write_text(json.dumps({**config, "position_embedding_type": "relative_key"}))
    message = fails(capsys, "from-hf", relative, tmp_path / "out")
    assert "position_embedding_type relative_key" in message and "no fairseq bio_roberta computes this BERT" in message
    assert not (tmp_path / "out").exists()


# ---- WordPiece through the corpus stages

EDGES = "\n".join([  # what BERT's normaliser and pre-tokeniser treat specially, and its special tokens written out
    "[CLS] texto [SEP] con [MASK] y [UNK] [PAD] escritos", "acentos: mamá, pingüino, ñandú, Crème brûlée",
    "中文字符 y 日本語 mezclados", "a" * 150 + " palabra larguísima", "puntuación¡¿!?…«»—–", "\u200b\u200d\ufeff",
    "Greek ΑΒΓ and Cyrillic АБВ", "e\u0301 compuesta",
])


TOKENIZERS = {  # (lowercase, strip_accents): a cased BERT, an uncased one (accents go with the case, BERT's), and
    # BETO's uncased, which lowercases and keeps accents: a tokenizer fairseq's --bpe bert cannot build
    "cased": (False, None), "uncased": (True, None), "uncased, accents kept": (True, False)}


def wordpiece_folder(standins, tmp_path, kind="cased"):
    """A from-hf folder of a BERT stand-in with a WordPiece vocabulary of this kind (TOKENIZERS)."""
    if kind == "cased":
        folder = tmp_path / "cased"
        assert convert("from-hf", standins["bert"], folder) == 0
        return folder
    from biofairseq.dev.samples import standin, wordpiece_vocab

    lowercase, strip_accents = TOKENIZERS[kind]
    texts = [p for doc in read_documents(0, 200) for p in doc]
    vocab = wordpiece_vocab(tmp_path / "uncased.txt", texts if strip_accents is False else [t.lower() for t in texts],
                            lowercase=strip_accents is None)
    bert = standin("bert", tmp_path / "uncased-bert", vocab, lowercase=True, strip_accents=strip_accents)
    assert convert("from-hf", bert, tmp_path / "uncased") == 0
    return tmp_path / "uncased"


def fairseq_bert_reference(clean, vocab_dir, out, kind):
    """fairseq's own path: each line through --bpe bert (fairseq's BertBPE), then fairseq-preprocess --srcdict; for a
    tokenizer --bpe bert cannot build, the model's own (transformers' BertTokenizer with its settings) in its place."""
    from fairseq import options
    from fairseq.data import encoders
    from fairseq_cli.preprocess import main
    from transformers import BertTokenizer

    from biofairseq.text.documents import is_blank

    lowercase, strip_accents = TOKENIZERS[kind]
    vocab = str(vocab_dir / "vocab.txt")
    if strip_accents is None:
        bpe = encoders.build_bpe(Namespace(bpe="bert", bpe_vocab_file=vocab, bpe_cased=not lowercase))
    else:
        tokenizer = BertTokenizer(vocab, do_lower_case=lowercase, strip_accents=strip_accents)
        bpe = Namespace(encode=lambda text: " ".join(tokenizer.tokenize(text)))
    out.mkdir()
    for split in ("train", "valid"):
        with open(clean / f"{split}.txt", encoding="utf-8", newline="\n") as f, \
                open(out / f"{split}.bert", "w", encoding="utf-8") as encoded:
            for line in f:
                line = line.rstrip("\n")
                blank = is_blank(line)  # a document's end, as the corpus readers and encode.py take it
                symbols = "" if blank else bpe.encode(line)
                if symbols or blank:  # a line that encodes to nothing is left out, as encode.py does
                    encoded.write(symbols + "\n")
    main(options.get_preprocessing_parser().parse_args([
        "--only-source", "--srcdict", str(vocab_dir / "dict.txt"), "--trainpref", str(out / "train.bert"),
        "--validpref", str(out / "valid.bert"), "--destdir", str(out), "--workers", "1"]))


@pytest.mark.parametrize("kind", TOKENIZERS)
def test_wordpiece_binarizes_byte_for_byte_as_fairseqs_bert_bpe_and_preprocess_give_it(kind, standins, tmp_path):
    """The binarizer (the tokenizer's ids through a lookup table) against fairseq's --bpe bert path on the sample's text
    with the edge cases: accents (stripped with the case in the uncased vocabulary), CJK characters, a word longer than
    WordPiece's 100 characters, zero-width and control characters, other scripts, and [CLS] [MASK] and the like
    written in the text, which both keep whole and look up as unknown. A tokenizer that lowercases and keeps accents
    (BETO's uncased), which --bpe bert cannot build, against transformers' BertTokenizer with its settings."""
    vocab = wordpiece_folder(standins, tmp_path, kind)
    settings = json.loads((vocab / "vocab_info.json").read_text())
    assert (settings["lowercase"], settings["strip_accents"]) == TOKENIZERS[kind]
    clean = tmp_path / "clean"
    clean.mkdir()
    docs = ["\n".join(doc) for doc in read_documents(300, 40)]
    for split, part in (("train", docs[:30]), ("valid", docs[30:])):
        (clean / f"{split}.txt").write_text("\n\n".join([part[0], ODD_DOCUMENT, EDGES, *part[1:]]) + "\n", encoding="utf-8")
    inprocess.run("python", "-m", "biofairseq.corpus.binarize", clean, vocab, tmp_path / "new", "--workers", 2)
    fairseq_bert_reference(clean, vocab, tmp_path / "reference", kind)
    new, reference = data_files(tmp_path / "new"), data_files(tmp_path / "reference")
    for name in ("train.bin", "train.idx", "valid.bin", "valid.idx"):
        assert new[name] == reference[name], name
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    tokens = np.concatenate([MMapIndexedDataset(str(tmp_path / "new" / "train"))[i].numpy() for i in range(40)])
    assert (tokens == 3).mean() < 0.02  # <unk>: rare on the clinical text


def test_whole_word_masking_masks_a_word_and_its_continuations_together(standins, tmp_path):
    from biofairseq.data.whole_words import word_starts
    from biofairseq.tasks.document_mlm import DocumentMLMConfig, DocumentMLMTask

    vocab = wordpiece_folder(standins, tmp_path)
    clean = tmp_path / "clean"
    clean.mkdir()
    docs = ["\n".join(doc) for doc in read_documents(300, 30)]
    (clean / "train.txt").write_text("\n\n".join(docs[:25]) + "\n", encoding="utf-8")
    (clean / "valid.txt").write_text("\n\n".join(docs[25:]) + "\n", encoding="utf-8")
    inprocess.run("python", "-m", "biofairseq.corpus.binarize", clean, vocab, tmp_path / "data-bin", "--workers", 1)
    task = DocumentMLMTask.setup_task(DocumentMLMConfig(data=str(tmp_path / "data-bin"), tokens_per_sample=128,
                                                        mask_whole_words=True, seed=1))  # its vocabulary: vocab_info.json
    dictionary = task.source_dictionary
    starts = word_starts(dictionary, "wordpiece").starts.bool()
    assert not starts[dictionary.index("##s")] and starts[dictionary.index("paciente")]
    task.load_dataset("valid")
    dataset, pad = task.dataset("valid"), dictionary.pad()
    words = partial = masked = 0
    for i in range(len(dataset)):
        sample = dataset[i]
        tokens = torch.where(sample["target"].ne(pad), sample["target"], sample["net_input.src_tokens"])
        word = torch.cumsum(starts[tokens].long(), 0)
        chosen = sample["target"].ne(pad)
        for w in word.unique().tolist():
            inside = chosen[word == w]
            words += 1
            masked += bool(inside.all())
            partial += bool(inside.any() and not inside.all())
    assert partial == 0 and 0.1 < masked / words < 0.2


@pytest.mark.fast
def test_the_families_table_is_the_registrys_and_no_family_is_named_outside_its_file():
    """docs/conversion.md's table of the families is generated from the families themselves (python -m
    biofairseq.convert.families), and no code outside biofairseq/convert/families/ branches on a family's name: a
    family is its file and its line in FAMILIES, every hook declared on the base class."""
    import re

    from biofairseq.convert.families import FAMILIES, docs_table
    from biofairseq.convert.families.base import Family
    from biofairseq.dev.samples import REPO

    text = (REPO / "docs" / "conversion.md").read_text()
    begin, end = "<!-- generated: python -m biofairseq.convert.families -->\n", "<!-- end of generated -->"
    assert text[text.index(begin) + len(begin):text.index(end, text.index(begin))] == docs_table(), \
        "docs/conversion.md: run python -m biofairseq.convert.families and paste its table between the markers"
    names = "|".join(re.escape(f.name) for f in FAMILIES)
    for path in (REPO / "biofairseq").rglob("*.py"):
        if "families" not in path.parts:
            found = re.findall(rf'[!=]=\s*"({names})"|"({names})"\s*[!=]=', path.read_text())
            assert not found, (path, found)
    hooks = {name for f in FAMILIES for name in vars(type(f)) if not name.startswith("_")}
    assert hooks <= set(dir(Family)), hooks - set(dir(Family))  # each declared on the base, with its default
