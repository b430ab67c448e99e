"""biofairseq-convert on tiny models trained here with fairseq-train on real text: fairseq <-> transformers."""

import json

import pytest
import torch

import inprocess
from biofairseq.dev.samples import NCBI, REPO, read_documents, trainer_in_process
from conftest import json_logs

TRAIN = [
    "--tokens-per-sample", "128", "--batch-size", "16", "--optimizer", "adam", "--lr", "1e-3",
    "--lr-scheduler", "polynomial_decay", "--warmup-updates", "1", "--total-num-update", "2", "--max-update", "2",
    "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json", "--log-interval", "1",
    "--no-epoch-checkpoints", "--disable-validation",
]
DOCUMENT_MLM = ["--user-dir", "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy"]
# fairseq's own roberta architectures, shrunk (they read every size from the command line).
SMALL = ["--encoder-layers", "2", "--encoder-embed-dim", "64", "--encoder-ffn-embed-dim", "128",
         "--encoder-attention-heads", "2"]
MODELS = {
    "bytebpe": ("bytebpe_corpus", None),  # the session's trained model (conftest.trained_bytebpe)
    "sentencepiece": ("spm_corpus", ["--arch", "bio_roberta_tiny"]),
    "pre-LN": ("bytebpe_corpus", ["--arch", "bio_roberta_tiny", "--encoder-normalize-before"]),
    # BioMegatron's layout on its vocabulary: the SentencePiece pre-LN shape
    "pre-LN-no-embedding-LN": ("spm_corpus", ["--arch", "roberta_prenorm", *SMALL]),
}


def convert(*args):
    from biofairseq.convert.cli import main

    return main([str(a) for a in args])


def report(folder):
    return json.loads((folder / "conversion.json").read_text())


def held_out_sentences():
    """Real sentences the vocabularies and models never saw: Spanish clinical cases and NCBI-disease (English)."""
    from biofairseq.text.sentences import split_sentences

    spanish = [s for doc in read_documents(600, 20) for p in doc for s in split_sentences(p)]
    english, words = [], []
    with open(NCBI / "test.tsv", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                words.append(line.split("\t")[0])
            elif words:
                english.append(" ".join(words))
                words = []
    return spanish[:150] + english[:60]


@pytest.fixture(scope="module")
def checkpoints(request, tmp_path_factory):
    """name -> (checkpoint, data-bin): the session's model trained on the real clinical cases (102 updates), and
    models of the other shapes built as fairseq-train builds them on those vocabularies, every weight moved off its
    initial value (LayerNorms off 1, biases off 0, so that a swapped tensor shows), saved in fairseq-train's format."""
    from biofairseq.checkpoints import load_dictionary, new_model, save

    out = {}
    for name, (corpus_fixture, arch) in MODELS.items():
        corpus = request.getfixturevalue(corpus_fixture)
        if arch is None:
            save_dir, _ = request.getfixturevalue("trained_bytebpe")
            out[name] = (save_dir / "checkpoint_last.pt", corpus.data_bin)
            continue
        model, cfg = new_model([*arch, "--tokens-per-sample", "128"], corpus.data_bin,
                               load_dictionary(corpus.data_bin / "dict.txt"))
        torch.manual_seed(0)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.02 * torch.randn_like(parameter))
        checkpoint = tmp_path_factory.mktemp(name) / "checkpoint_last.pt"
        save(checkpoint, model, cfg)
        out[name] = (checkpoint, corpus.data_bin)
    return out


@pytest.fixture(scope="module")
def converted(checkpoints, tmp_path_factory):
    """name -> (transformers directory, fairseq directory converted back from it)."""
    root = tmp_path_factory.mktemp("converted")
    out = {}
    for name, (checkpoint, *_) in checkpoints.items():
        assert convert("to-hf", checkpoint, root / f"{name}-hf") == 0
        assert convert("from-hf", root / f"{name}-hf", root / f"{name}-fairseq") == 0
        out[name] = (root / f"{name}-hf", root / f"{name}-fairseq")
    return out


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_gives_identical_state_dicts_and_passes_parity(name, checkpoints, converted):
    from fairseq import checkpoint_utils

    hf_dir, fairseq_dir = converted[name]
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in hf_dir.iterdir()
    }
    for folder in (hf_dir, fairseq_dir):
        parity = report(folder)["parity"]
        assert parity["ids_identical"] and parity["batch_shape"][0] == 7
        assert parity["max_abs_diff_logits"] <= 1e-4 and parity["max_abs_diff_hidden"] <= 1e-4
    original = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoints[name][0]))["model"]
    back = checkpoint_utils.load_checkpoint_to_cpu(str(fairseq_dir / "model.pt"))["model"]
    assert original.keys() == back.keys()
    assert all(torch.equal(original[k], back[k]) for k in original)
    data_bin = checkpoints[name][1]
    from biofairseq.corpus.vocab import read_dict

    assert read_dict(fairseq_dir / "dict.txt")[0] == read_dict(data_bin / "dict.txt")[0]  # the data-bin's has counts


def test_layouts_pick_the_transformers_class_with_the_same_layer_order(converted):
    classes = {name: json.loads((hf / "config.json").read_text())["architectures"][0]
               for name, (hf, _) in converted.items()}
    assert classes == {
        "bytebpe": "RobertaForMaskedLM", "sentencepiece": "RobertaForMaskedLM",
        "pre-LN": "RobertaPreLayerNormForMaskedLM", "pre-LN-no-embedding-LN": "XLMRobertaXLForMaskedLM",
    }
    # described by the nearest pre-LN preset without an embedding LayerNorm (BioMegatron's tiny shape, fewest flags)
    assert report(converted["pre-LN-no-embedding-LN"][1])["fairseq_flags"][:2] == ["--arch", "bio_megatron_tiny"]


@pytest.mark.parametrize("name", ["bytebpe", "sentencepiece"])
def test_token_ids_equal_fairseq_encoding_on_held_out_sentences(name, checkpoints, converted):
    from transformers import AutoTokenizer

    from biofairseq import checkpoints as checkpoint_io
    from biofairseq.convert import vocabulary

    checkpoint, data_bin = checkpoints[name]
    dictionary = checkpoint_io.load_dictionary(data_bin / "dict.txt")
    fairseq_encode = vocabulary.FairseqEncoding(vocabulary.from_folder(data_bin), dictionary)
    tokenizer = AutoTokenizer.from_pretrained(converted[name][0])
    sentences = held_out_sentences()
    assert len(sentences) == 210
    sentences += EDGE_CASES
    assert tokenizer(sentences)["input_ids"] == [fairseq_encode(s) for s in sentences]
    assert tokenizer.mask_token_id == dictionary.index("<mask>") == 4
    assert [tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id] == [0, 1, 2, 3]


EDGE_CASES = ["  dos  espacios  ", "tab\there", "emoji 😀 y 中文", "ÁÉÍÓÚ ñ ü ç ß", "ﬁ ligature ①", "", " ", "a\u00a0b",
              "x\ny"]


@pytest.mark.parametrize("options", [
    ["--type", "bytelevel-bpe", "--lowercase"],
    ["--type", "sentencepiece", "--model-type", "bpe"],
    ["--type", "sentencepiece", "--normalization", "nmt_nfkc", "--no-byte-fallback"],
], ids=["bytebpe-lowercase", "sentencepiece-bpe", "sentencepiece-nfkc-no-byte-fallback"])
def test_exported_tokenizer_gives_fairseq_ids_for_each_vocabulary_option(options, bytebpe_corpus, tmp_path):
    from transformers import AutoTokenizer

    from biofairseq import checkpoints as checkpoint_io
    from biofairseq.convert import vocabulary

    inprocess.run("python", REPO / "preprocess" / "train_vocab.py", "--input",
                  bytebpe_corpus.data_bin.parent / "clean" / "train.txt", "--vocab-size", 2000, "--output-dir",
                  tmp_path / "vocab", *options)
    found = vocabulary.from_folder(tmp_path / "vocab")
    dictionary = checkpoint_io.load_dictionary(tmp_path / "vocab" / "dict.txt")
    vocabulary.build_tokenizer(found, dictionary, 512).save_pretrained(tmp_path / "hf")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    fairseq_encode = vocabulary.FairseqEncoding(found, dictionary)
    sentences = held_out_sentences() + EDGE_CASES
    ours, theirs = tokenizer(sentences)["input_ids"], [fairseq_encode(s) for s in sentences]
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if "--normalization" not in options:
        assert not differ
        return
    # A unigram model can segment a run two ways of equal score ("III": I + II or II + I). sentencepiece sums piece
    # scores in float32, tokenizers in float64, so rounding breaks such a tie differently: the same pieces, in
    # another order, in about one sentence in 200 here (docs/conversion.md). Nothing else may differ.
    assert len(differ) <= len(sentences) // 100 and all(sorted(ours[i]) == sorted(theirs[i]) for i in differ)


@pytest.mark.parametrize("name", MODELS)
def test_logits_match_on_a_padded_batch_of_held_out_sentences(name, checkpoints, converted):
    """Computed here, not read from conversion.json: the post-LN and both pre-LN layouts."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from biofairseq import checkpoints as checkpoint_io

    fairseq = checkpoint_io.load(checkpoints[name][0])
    hf = AutoModelForMaskedLM.from_pretrained(converted[name][0]).eval()
    tokenizer = AutoTokenizer.from_pretrained(converted[name][0])
    sentences = held_out_sentences()[::25]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert batch["attention_mask"].float().mean() < 0.9  # really padded
    with torch.no_grad():
        expected = fairseq.model(batch["input_ids"])[0]
        got = hf(**batch).logits
        expected_hidden = fairseq.model(batch["input_ids"], features_only=True)[0]  # after pre-LN's final LayerNorm
        got_hidden = hf.base_model(**batch).last_hidden_state
    real = batch["attention_mask"].bool()
    assert expected.abs()[real].max() > 1.0 and expected.std() > 0.1  # not trivially equal
    assert (expected - got).abs()[real].max() <= 1e-4
    assert (expected_hidden - got_hidden).abs()[real].max() <= 1e-4


def test_transformers_loads_the_directory_offline(converted):
    from transformers import AutoModelForMaskedLM, AutoModelForTokenClassification, AutoTokenizer, pipeline

    for name in ("bytebpe", "sentencepiece"):
        hf_dir = converted[name][0]
        tagger = AutoModelForTokenClassification.from_pretrained(hf_dir, num_labels=5)
        tokenizer = AutoTokenizer.from_pretrained(hf_dir)
        words = ["Se", "pautó", "amoxicilina", "500", "mg", "."]
        batch = tokenizer(words, is_split_into_words=True, return_tensors="pt")
        assert tagger(**batch).logits.shape == (1, batch["input_ids"].shape[1], 5)
        masked_lm = AutoModelForMaskedLM.from_pretrained(hf_dir)
        assert torch.equal(tagger.roberta.embeddings.word_embeddings.weight, masked_lm.roberta.embeddings.word_embeddings.weight)
        filled = pipeline("fill-mask", model=hf_dir)("El paciente presenta dolor <mask> intenso.", top_k=3)
        assert len(filled) == 3 and all(f["sequence"].startswith("El paciente presenta dolor") for f in filled)


def test_fairseq_roberta_base_with_gpt2_bpe_and_a_renumbered_dictionary(bytebpe_corpus, tmp_path, capsys):
    """fairseq's own recipe: GPT-2 BPE files (encoder.json, vocab.bpe), a dict.txt in frequency order, as
    fairseq's released RoBERTa has, --task masked_lm --arch roberta_base; the BPE is found from the checkpoint's
    --bpe settings. A dictionary that lacks BPE tokens is refused, naming the file."""
    from collections import Counter

    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder
    from transformers import AutoTokenizer

    from biofairseq import checkpoints as checkpoint_io
    from biofairseq.convert import vocabulary
    from biofairseq.corpus.vocab import read_dict, write_dict

    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    vocab = json.loads((bytebpe_corpus.data_bin / "vocab.json").read_text())
    (gpt2 / "encoder.json").write_text(json.dumps({t: i for t, i in vocab.items() if i >= 5}))
    (gpt2 / "vocab.bpe").write_text((bytebpe_corpus.data_bin / "merges.txt").read_text())
    encoder = get_encoder(str(gpt2 / "encoder.json"), str(gpt2 / "vocab.bpe"))
    clean = bytebpe_corpus.data_bin.parent / "clean"
    counts = Counter()
    for split, first in (("train", 600), ("valid", 100)):  # GPT-2's Python BPE is slow: a fifth of the text does
        text = (clean / f"{split}.txt").read_text().splitlines()[:first]
        lines = [" ".join(map(str, encoder.encode(l))) for l in text]
        (tmp_path / f"{split}.bpe").write_text("".join(l + "\n" for l in lines))
        counts.update(" ".join(lines).split()) if split == "train" else None
    ordered = sorted(map(str, range(5, len(vocab))), key=lambda s: (-counts[s], int(s)))
    (tmp_path / "dict.txt").write_text("".join(f"{s} {counts[s]}\n" for s in ordered))
    inprocess.run("fairseq-preprocess", "--only-source", "--srcdict", tmp_path / "dict.txt", "--trainpref",
                  tmp_path / "train.bpe", "--validpref", tmp_path / "valid.bpe", "--destdir", tmp_path / "bin")
    inprocess.run("fairseq-train", tmp_path / "bin", "--task", "masked_lm", "--criterion", "masked_lm", "--arch",
                  "roberta_base", *SMALL, *TRAIN, "--bpe", "gpt2", "--gpt2-encoder-json", gpt2 / "encoder.json",
                  "--gpt2-vocab-bpe", gpt2 / "vocab.bpe", "--save-dir", tmp_path / "ck", cwd=REPO)
    checkpoint = tmp_path / "ck" / "checkpoint_last.pt"
    assert convert("to-hf", checkpoint, tmp_path / "hf") == 0
    assert report(tmp_path / "hf")["parity"]["ids_identical"]
    dictionary = checkpoint_io.load_dictionary(tmp_path / "bin" / "dict.txt")
    fairseq_encode = vocabulary.FairseqEncoding(vocabulary.from_folder(gpt2), dictionary)
    sentences = held_out_sentences()
    expected = [fairseq_encode(s) for s in sentences]
    assert AutoTokenizer.from_pretrained(tmp_path / "hf")(sentences)["input_ids"] == expected
    de = encoder.encode(" de")[0]
    assert dictionary.index(str(de)) != de  # renumbered
    lacking = tmp_path / "lacking" / "dict.txt"
    lacking.parent.mkdir()
    symbols, counts = read_dict(tmp_path / "bin" / "dict.txt")
    write_dict(lacking, symbols[:-8] + [f"madeupword{i:04d}" for i in range(8)], counts[:-8] + [0] * 8)
    message = fails(capsys, "to-hf", checkpoint, tmp_path / "hf2", "--dict", lacking)
    assert "lacks 8 BPE tokens" in message and "<unk>" in message and not (tmp_path / "hf2").exists()


def test_from_hf_checkpoint_continues_pretraining(checkpoints, converted, trained_bytebpe, tmp_path):
    """fairseq-train --restore-file of from-hf's model.pt starts where the session's model left off."""
    _, log = trained_bytebpe
    restored = inprocess.run(
        "fairseq-train", checkpoints["bytebpe"][1], *DOCUMENT_MLM, "--arch", "bio_roberta_tiny", *TRAIN,
        "--save-dir", tmp_path, "--restore-file", converted["bytebpe"][1] / "model.pt", "--reset-optimizer",
        "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler", cwd=REPO,
    )
    output = restored.stdout + restored.stderr
    assert "Loaded checkpoint" in output
    first_loss = lambda text: float(json_logs(text, "train_inner")[0]["loss"])
    assert first_loss(output) < first_loss(log) - 1.0  # the original run's first update started from scratch


# ---- errors a user can cause


def fails(capsys, *args):
    """The one-line message of a conversion that must fail (exit status 1), run in this process."""
    capsys.readouterr()
    assert convert(*args) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("biofairseq-convert: error: "), lines
    return lines[0]


def test_a_checkpoint_of_another_architecture_fails_clearly(bytebpe_corpus, tmp_path):
    """Through the console script's entry (in this process): exit status 1, one line on stderr, no output folder.
    The checkpoint: a language model saved by fairseq's Trainer as fairseq-train builds it, in this process."""
    from fairseq.trainer import Trainer

    trainer = trainer_in_process(bytebpe_corpus.data_bin, "--task", "language_modeling", "--arch", "transformer_lm",
                                 "--decoder-layers", "1", "--decoder-embed-dim", "32", "--decoder-ffn-embed-dim", "64",
                                 "--decoder-attention-heads", "2", "--tokens-per-sample", "64", "--optimizer", "adam",
                                 "--lr", "1e-3", "--cpu", trainer=Trainer)
    (tmp_path / "lm").mkdir()
    trainer.consolidate_optimizer()  # as fairseq's checkpoint_utils.save_checkpoint does first
    trainer.save_checkpoint(str(tmp_path / "lm" / "checkpoint_last.pt"), {})
    proc = inprocess.run("biofairseq-convert", "to-hf", tmp_path / "lm" / "checkpoint_last.pt", tmp_path / "out",
                         cwd=REPO, check=False)
    assert proc.returncode == 1
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("biofairseq-convert: error: ") and "Traceback" not in proc.stderr
    assert all(str(n) in message for n in (tmp_path / "lm" / "checkpoint_last.pt", "transformer_lm", "RoBERTa"))
    assert not (tmp_path / "out").exists() and list(tmp_path.glob(".out*")) == []


def test_missing_files_and_a_wrong_dictionary_fail_clearly(checkpoints, tmp_path, capsys):
    from biofairseq.corpus.vocab import read_dict, write_dict

    checkpoint, data_bin = checkpoints["bytebpe"]
    # the data-bin was moved away: the dictionary, then the vocabulary, are asked for by their flags
    state = torch.load(checkpoint)
    state["cfg"]["task"]["data"] = str(tmp_path / "moved-away")
    state["cfg"]["bpe"] = None  # trained without --bpe flags: the vocabulary is looked for beside the data
    state["model"].update({  # as a fine-tuned (sentence_prediction) checkpoint holds them
        "classification_heads.triage.dense.weight": torch.zeros(128, 128),
        "classification_heads.triage.dense.bias": torch.zeros(128),
        "classification_heads.triage.out_proj.weight": torch.zeros(3, 128),
        "classification_heads.triage.out_proj.bias": torch.zeros(3),
    })
    moved = tmp_path / "moved.pt"
    torch.save(state, moved)
    message = fails(capsys, "to-hf", moved, tmp_path / "out")
    assert "dictionary not found" in message and "moved-away" in message and "pass --dict" in message
    message = fails(capsys, "to-hf", moved, tmp_path / "out", "--dict", data_bin / "dict.txt")
    assert "vocabulary not found" in message and "pass --vocab" in message
    assert convert("to-hf", moved, tmp_path / "out", "--dict", data_bin / "dict.txt", "--vocab", data_bin) == 0
    assert "classification heads not converted: triage" in report(tmp_path / "out")["notes"]
    short = tmp_path / "dict.txt"
    write_dict(short, *(column[:100] for column in read_dict(data_bin / "dict.txt")))
    message = fails(capsys, "to-hf", checkpoint, tmp_path / "other", "--dict", short)
    assert str(short) in message and "104 entries" in message and "2000 rows" in message and "--dict" in message
    assert not (tmp_path / "other").exists()


def test_another_layer_norm_epsilon_becomes_the_models_own_and_converts_exactly_both_ways(tmp_path):
    """A tiny model of transformers' default RobertaConfig (layer_norm_eps 1e-12, type_vocab_size 2): the epsilon
    becomes the fairseq model's --layer-norm-eps, so it converts exactly and comes back with it. It matters: the same
    weights with fairseq's 1e-5 fail the parity check (what from-hf refused before the setting existed)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from biofairseq import checkpoints as checkpoint_io
    from biofairseq.convert import ConvertError, parity, vocabulary
    from biofairseq.models.layer_norms import set_layer_norm_eps
    from test_mistakes import tiny_roberta

    tiny_roberta(tmp_path)
    hf_dir = tmp_path / "default-roberta"
    assert convert("from-hf", hf_dir, tmp_path / "out") == 0
    made = report(tmp_path / "out")
    assert made["fairseq_flags"][-2:] == ["--layer-norm-eps", "1e-12"], made["fairseq_flags"]
    assert made["parity"]["max_abs_diff_logits"] < 1e-5 and any("type_vocab_size 2" in n for n in made["notes"])
    assert convert("to-hf", tmp_path / "out" / "model.pt", tmp_path / "back") == 0
    assert json.loads((tmp_path / "back" / "config.json").read_text())["layer_norm_eps"] == 1e-12
    fairseq = checkpoint_io.load(tmp_path / "out" / "model.pt", tmp_path / "out" / "dict.txt")
    set_layer_norm_eps(fairseq.model, 1e-5)
    encode = vocabulary.FairseqEncoding(vocabulary.from_folder(tmp_path / "out"), fairseq.dictionary)
    with pytest.raises(ConvertError, match="fails the parity check"):
        parity.verify(fairseq.model, encode, AutoModelForMaskedLM.from_pretrained(hf_dir).eval(),
                      AutoTokenizer.from_pretrained(hf_dir), fairseq.dictionary, {}, lambda _: None, str(hf_dir))


def test_from_hf_refuses_a_model_of_another_family_naming_the_families(tmp_path, capsys):
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    DistilBertForMaskedLM(DistilBertConfig(vocab_size=50, dim=16, n_layers=1, n_heads=2,
                                           hidden_dim=32)).save_pretrained(tmp_path / "distilbert")
    message = fails(capsys, "from-hf", tmp_path / "distilbert", tmp_path / "out")
    assert all(s in message for s in ("distilbert", "DistilBertForMaskedLM", "BERT (bert)", "ELECTRA (electra)")), message
    assert "config.json" in fails(capsys, "from-hf", tmp_path / "nothing", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_generator_flag_on_a_roberta_checkpoint_fails_in_one_line(checkpoints, tmp_path, capsys):
    checkpoint = checkpoints["bytebpe"][0]
    assert convert("to-hf", checkpoint, tmp_path / "out", "--generator") == 1
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--generator" in message and "ELECTRA" in message and not (tmp_path / "out").exists()


# ---- a project's relative paths, converted from another folder; the model card

def relative_project(trained_bytebpe, bytebpe_corpus, root):
    """The session's trained model as a project trained from its own folder records it: ``fairseq-train data-bin ...
    --bpe-vocab data-bin/vocab.json`` (what bpe_flags printed before its paths were absolute), the checkpoint in
    project/checkpoints/."""
    import shutil

    save_dir, _ = trained_bytebpe
    project = root / "project"
    shutil.copytree(bytebpe_corpus.data_bin, project / "data-bin")
    state = torch.load(save_dir / "checkpoint_best.pt")
    state["cfg"]["task"]["data"] = "data-bin"
    state["cfg"]["bpe"].update(bpe_vocab="data-bin/vocab.json", bpe_merges="data-bin/merges.txt")
    (project / "checkpoints").mkdir()
    torch.save(state, project / "checkpoints" / "checkpoint_best.pt")
    return project / "checkpoints" / "checkpoint_best.pt", state


def test_relative_paths_in_a_checkpoint_resolve_from_another_folder_and_the_card_has_the_run(
        trained_bytebpe, bytebpe_corpus, tmp_path):
    """From a working folder outside the project (and the repository), to-hf finds data-bin/dict.txt and the BPE
    files beside the checkpoint's folder, and writes a model card that huggingface_hub reads."""
    from huggingface_hub import ModelCard

    checkpoint, state = relative_project(trained_bytebpe, bytebpe_corpus, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inprocess.run("biofairseq-convert", "to-hf", checkpoint, "hf", "--language", "es", "--license", "apache-2.0",
                  "--dataset", "clinical-cases", cwd=elsewhere)
    assert report(elsewhere / "hf")["parity"]["ids_identical"]
    card = ModelCard.load(elsewhere / "hf" / "README.md")
    assert card.data.language == ["es"] and card.data.license == "apache-2.0" and card.data.datasets == ["clinical-cases"]
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "fill-mask"
    assert {"fill-mask", "biomedical", "fairseq"} <= set(card.data.tags)
    updates = state["optimizer_history"][-1]["num_updates"]
    perplexity = 2 ** state["extra_state"]["best"]
    parity = report(elsewhere / "hf")["parity"]
    assert "bio_roberta_tiny" in card.text and "RobertaForMaskedLM" in card.text and f"| {updates:,} |" in card.text
    assert f"validation perplexity | {perplexity:.2f}" in card.text
    assert f"{parity['max_abs_diff_logits']:.2e}" in card.text and "token ids identical" in card.text


def test_bpe_flags_prints_absolute_paths(bytebpe_corpus):
    out = inprocess.run("python", "-m", "biofairseq.bpe_flags", bytebpe_corpus.data_bin.name,
                        cwd=bytebpe_corpus.data_bin.parent)
    flags = out.stdout.split()
    assert flags[:2] == ["--bpe", "hf_byte_bpe"]
    assert flags[3] == str(bytebpe_corpus.data_bin / "vocab.json") and flags[5] == str(bytebpe_corpus.data_bin / "merges.txt")


def test_a_dictionary_found_nowhere_is_asked_for_in_one_line(trained_bytebpe, bytebpe_corpus, tmp_path, capsys,
                                                             monkeypatch):
    import shutil

    checkpoint, _ = relative_project(trained_bytebpe, bytebpe_corpus, tmp_path)
    shutil.move(tmp_path / "project" / "data-bin", tmp_path / "moved")
    monkeypatch.chdir(tmp_path)
    message = fails(capsys, "to-hf", checkpoint, tmp_path / "out")
    assert "dictionary not found: looked for dict.txt in its data-bin data-bin" in message
    assert str(checkpoint.parent) in message and "pass --dict" in message
    message = fails(capsys, "to-hf", checkpoint, tmp_path / "out", "--dict", tmp_path / "moved" / "dict.txt")
    assert "vocabulary not found" in message and "data-bin/vocab.json" in message and "pass --vocab" in message
    assert convert("to-hf", checkpoint, tmp_path / "out", "--dict", tmp_path / "moved" / "dict.txt",
                   "--vocab", tmp_path / "moved", "--no-verify") == 0
    assert (tmp_path / "out" / "README.md").is_file()


def test_user_mistakes_fail_in_one_line_before_loading_anything(converted, checkpoints, tmp_path, capsys):
    """Each: exit status 1, one line naming the file or flag and the fix, no output folder (nor its staging folder)."""
    checkpoint = checkpoints["bytebpe"][0]
    (tmp_path / "notes.txt").write_text("not a checkpoint\n")
    (tmp_path / "existing").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text('{"model_type": "roberta"}')  # no weights, no tokenizer
    cases = [  # arguments, what the line says, the path it names
        (("to-hf", tmp_path / "nope.pt", tmp_path / "out"), "no such checkpoint file", tmp_path / "nope.pt"),
        (("to-hf", tmp_path / "notes.txt", tmp_path / "out"), "not a PyTorch checkpoint", tmp_path / "notes.txt"),
        (("to-hf", tmp_path, tmp_path / "out"), "a folder; give the checkpoint file in it", tmp_path),
        (("to-hf", checkpoint, tmp_path / "existing"), "already exists; choose another output or pass --overwrite",
         tmp_path / "existing"),
        (("to-hf", checkpoint, checkpoint.parent, "--overwrite"), "choose an output folder elsewhere", checkpoint),
        (("to-hf", checkpoint, tmp_path / "out", "--dict", tmp_path / "no-dict.txt"), "--dict takes the dict.txt",
         tmp_path / "no-dict.txt"),
        (("to-hf", checkpoint, tmp_path / "out", "--vocab", tmp_path / "no-vocab"), "--vocab takes the vocabulary",
         tmp_path / "no-vocab"),
        (("from-hf", tmp_path / "notes.txt", tmp_path / "out"), "no such folder; give a transformers model folder",
         tmp_path / "notes.txt"),
        (("from-hf", tmp_path / "existing", tmp_path / "out"), "no config.json", tmp_path / "existing"),
        (("from-hf", tmp_path / "broken", tmp_path / "out"), "not loadable as a masked LM", tmp_path / "broken"),
        (("from-hf", converted["bytebpe"][0], converted["bytebpe"][0] / "fairseq"), "choose an output folder elsewhere",
         converted["bytebpe"][0]),
    ]
    for args, fragment, named in cases:
        message = fails(capsys, *args)
        assert fragment in message and str(named) in message, (args, message)
        assert not (tmp_path / "out").exists() and list(tmp_path.glob(".out*")) == []
    assert checkpoint.is_file() and list((tmp_path / "existing").iterdir()) == []
    with pytest.raises(SystemExit) as exit:
        convert("to-hf", checkpoint)
    assert exit.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "biofairseq-convert to-hf: error: the following arguments are required: OUTPUT_DIR; "
        "see biofairseq-convert to-hf --help"]
