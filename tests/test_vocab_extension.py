"""VOCAB_EXTEND's step on stand-ins built offline: a BERT with a WordPiece vocab.txt (conftest.standins) and a RoBERTa
with the session's byte-level BPE, each converted by from-hf, then extended by biofairseq-convert extend-vocab from the
clinical cases. Every check is made against what transformers itself gives: the old model's tokenizer cuts the new
words, the original transformers model computes the logits, the converted folder's AutoTokenizer encodes the text
the data-bin holds."""

import json

import pytest
import torch

import inprocess
from biofairseq.corpus.vocab import read_dict
from biofairseq.dev.samples import read_documents

pytestmark = pytest.mark.fast
SIZE = 150


def _lines(first, count):
    return [p for doc in read_documents(first, count) for p in doc]


@pytest.fixture(scope="module")
def models(standins, bytebpe_corpus, tmp_path_factory):
    """kind -> (transformers folder, from-hf folder, extended folder, the extended model to-hf), and the texts."""
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizer

    root = tmp_path_factory.mktemp("extension")
    text, valid = root / "clean" / "train.txt", root / "clean" / "valid.txt"
    text.parent.mkdir()
    text.write_text("\n".join(_lines(0, 200)) + "\n\n", encoding="utf-8")
    valid.write_text("\n".join(_lines(200, 20)) + "\n", encoding="utf-8")
    vocab = bytebpe_corpus.data_bin
    size = len(json.loads((vocab / "vocab.json").read_text()))
    torch.manual_seed(0)
    roberta = RobertaForMaskedLM(RobertaConfig(vocab_size=size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                               intermediate_size=64, max_position_embeddings=514))
    with torch.no_grad():
        for parameter in roberta.parameters():  # LayerNorms off 1, biases off 0: a row left behind shows
            parameter.add_(0.02 * torch.randn_like(parameter))
    roberta.save_pretrained(root / "roberta")
    RobertaTokenizer(str(vocab / "vocab.json"), str(vocab / "merges.txt")).save_pretrained(root / "roberta")
    out = {}
    for kind, hf in (("wordpiece", standins["bert"]), ("bytelevel-bpe", root / "roberta")):
        init, extended, back = root / f"{kind}-init", root / f"{kind}-extended", root / f"{kind}-hf"
        inprocess.run("biofairseq-convert", "from-hf", hf, init)
        ran = inprocess.run("biofairseq-convert", "extend-vocab", init, extended, "--text", text, "--size", SIZE,
                            "--valid", valid)
        inprocess.run("biofairseq-convert", "to-hf", extended / "model.pt", back)
        out[kind] = (hf, init, extended, back, ran.stdout)
    return out, text, valid


def new_tokens(extended):
    record = json.loads((extended / "vocab_info.json").read_text())["extension"]
    symbols, _ = read_dict(extended / "dict.txt")
    return symbols[-record["added"]:], record


def spelled(kind, extended, symbols):
    """The new tokens as text: a byte-level BPE token's id read back through vocab.json, its Ġ a space."""
    if kind == "wordpiece":
        return symbols
    by_id = {str(i): t for t, i in json.loads((extended / "vocab.json").read_text(encoding="utf-8")).items()}
    from tokenizers.decoders import ByteLevel

    return [ByteLevel().decode([by_id[s]]) for s in symbols]


@pytest.mark.parametrize("kind", ["wordpiece", "bytelevel-bpe"])
def test_old_ids_keep_their_rows_and_each_new_row_is_the_mean_of_its_pieces(models, kind):
    from transformers import AutoTokenizer

    from biofairseq.training_state import load_state

    hf, init, extended, _, said = models[0][kind]
    old_symbols, _ = read_dict(init / "dict.txt")
    symbols, record = new_tokens(extended)
    assert read_dict(extended / "dict.txt")[0] == old_symbols + symbols and record["added"] == SIZE == len(symbols)
    assert record["words"] > (SIZE // 2 if kind == "bytelevel-bpe" else SIZE - 1)
    old, new = (load_state(f / "model.pt")["model"] for f in (init, extended))
    grown = sorted(k for k in old if old[k].shape != new[k].shape)
    assert "encoder.sentence_encoder.embed_tokens.weight" in grown and "encoder.lm_head.bias" in grown
    rows = len(old_symbols) + 4  # with fairseq's <s> <pad> </s> <unk>
    unchanged = [k for k in old if k not in grown]
    assert all(torch.equal(old[k], new[k]) for k in unchanged)
    tokenizer = AutoTokenizer.from_pretrained(hf)  # the published model's own tokenizer cuts each new token
    index = {s: i + 4 for i, s in enumerate(old_symbols)}
    hf_to_symbol = (lambda t: t) if kind == "wordpiece" else (lambda t: str(tokenizer.convert_tokens_to_ids(t)))
    for k in grown:
        assert torch.equal(new[k][:rows], old[k]) and new[k].shape[0] == rows + SIZE
        for j, text in enumerate(spelled(kind, extended, symbols)):
            pieces = [index[hf_to_symbol(t)] for t in tokenizer.tokenize(text)]
            assert len(pieces) > 1, text
            torch.testing.assert_close(new[k][rows + j], old[k][pieces].mean(0), rtol=0, atol=1e-6)
    assert "ids identical, max |logit difference| over the old vocabulary" in said
    assert f"--restore-file {extended.resolve()}/model.pt" in said  # the next step, as from-hf prints it


@pytest.mark.parametrize("kind", ["wordpiece", "bytelevel-bpe"])
def test_text_without_new_tokens_gives_the_original_logits_and_new_words_are_one_token(models, kind):
    """transformers' original model and the extended one converted back: the same logits over the old vocabulary
    (1e-5) where the extended tokenizer gives no new id; the new words themselves whole."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    (hf, _, extended, back, _), valid = models[0][kind], models[2]
    symbols, _ = new_tokens(extended)
    original, tokenizer = AutoModelForMaskedLM.from_pretrained(hf).eval(), AutoTokenizer.from_pretrained(hf)
    model, extended_tokenizer = AutoModelForMaskedLM.from_pretrained(back).eval(), AutoTokenizer.from_pretrained(back)
    old_size = len(tokenizer)
    lines = [line for line in valid.read_text().splitlines() if line.strip()]
    plain = [line for line in lines if max(extended_tokenizer(line)["input_ids"]) < old_size][:8]
    holding = [line for line in lines if max(extended_tokenizer(line)["input_ids"]) >= old_size]
    assert len(plain) >= 4 and holding
    for line in plain:
        ids = extended_tokenizer(line, return_tensors="pt", truncation=True, max_length=128)["input_ids"]
        assert ids.tolist() == tokenizer(line, return_tensors="pt", truncation=True, max_length=128)["input_ids"].tolist()
        with torch.no_grad():
            a, b = original(ids).logits, model(ids).logits
        assert b.shape[-1] == old_size + len(symbols)
        torch.testing.assert_close(b[..., :old_size], a, rtol=0, atol=1e-5)
    for text in spelled(kind, extended, symbols)[:20]:
        if kind == "wordpiece" or text.startswith(" "):
            assert len(extended_tokenizer.tokenize(text)) == 1, text


@pytest.mark.parametrize("kind", ["wordpiece", "bytelevel-bpe"])
def test_binarizing_gives_the_extended_tokenizers_ids_and_whole_words_keep_new_words_whole(models, kind, tmp_path):
    from fairseq.data import data_utils
    from transformers import AutoTokenizer

    from biofairseq.checkpoints import load_dictionary
    from biofairseq.corpus.binarize import binarize
    from biofairseq.data.whole_words import word_starts

    (_, _, extended, back, _), text = models[0][kind], models[1]
    binarize(text.parent, extended, tmp_path / "bin")
    dictionary = load_dictionary(tmp_path / "bin" / "dict.txt")
    data = data_utils.load_indexed_dataset(str(tmp_path / "bin" / "valid"), dictionary)
    tokenizer = AutoTokenizer.from_pretrained(back)
    to_index = torch.arange(len(dictionary))
    if kind == "wordpiece":  # the published ids of vocab.txt: fairseq's index of each, through dict.txt
        from biofairseq.convert import vocabulary

        ids = vocabulary.wordpiece_ids(vocabulary.from_folder(extended), dictionary)
        to_index = torch.zeros(len(ids), dtype=torch.long)
        to_index[torch.tensor(ids)] = torch.arange(len(ids))
    lines = [line for line in (text.parent / "valid.txt").read_text().splitlines() if line.strip()]
    old_size = len(dictionary) - SIZE
    seen_new = 0
    for k, line in enumerate(lines):
        expected = to_index[torch.tensor(tokenizer(line, add_special_tokens=False)["input_ids"])].tolist()
        assert data[k].tolist() == expected + [dictionary.eos()], line
        seen_new += sum(i >= old_size for i in expected)
    assert seen_new > 10
    vocab_file = str(extended / "vocab.json") if kind == "bytelevel-bpe" else None
    starts = word_starts(dictionary, "wordpiece" if kind == "wordpiece" else "bytebpe", vocab_file).starts
    symbols, _ = new_tokens(extended)
    whole = [s for s, text in zip(symbols, spelled(kind, extended, symbols)) if kind == "wordpiece" or text.startswith(" ")]
    assert whole and all(starts[dictionary.index(s)] for s in whole)


@pytest.mark.parametrize("kind", ["wordpiece", "bytelevel-bpe"])
def test_the_converted_model_card_says_what_was_added(models, kind):
    (_, _, _, back, _) = models[0][kind]
    card = (back / "README.md").read_text()
    assert f"| vocabulary extended | {SIZE} tokens (" in card and "`train.txt`" in card


def test_a_sentencepiece_model_is_refused_in_one_line(spm_corpus, tmp_path):
    from biofairseq.recipe.inputs import init_extension_problem

    (tmp_path / "spm").mkdir()
    (tmp_path / "spm" / "sentencepiece.bpe.model").write_bytes(spm_corpus.vocab_file.read_bytes())
    problem = init_extension_problem({"VOCAB_EXTEND": "1000", "INIT_FROM": str(tmp_path / "spm")})
    assert problem.startswith(f"VOCAB_EXTEND=1000: INIT_FROM={tmp_path / 'spm'} has a SentencePiece vocabulary, and only") and \
        problem.endswith("unset VOCAB_EXTEND"), problem
    assert init_extension_problem({"VOCAB_EXTEND": "0", "INIT_FROM": str(tmp_path / "spm")}) is None


def test_vocab_extend_without_init_from_is_refused_before_any_work(tmp_path):
    from biofairseq.dev.samples import REPO
    from biofairseq.recipe import settings

    with pytest.raises(settings.SettingsError) as refused:
        settings.resolve("bsc_bio_es", {"NUM_GPUS": "0", "STOP_AFTER": "settings", "RUN_DIR": str(tmp_path / "run"),
                                        "VOCAB_EXTEND": "1000"}, REPO)
    assert str(refused.value).startswith("VOCAB_EXTEND=1000: extends the vocabulary of INIT_FROM's model, and there is none")
    assert not (tmp_path / "run").exists()
