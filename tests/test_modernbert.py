"""ModernBERT's block in fairseq (bio_modernbert_*): documents computed alone in packed rows, trained by
document_mlm, converted to transformers' own ModernBERT classes with parity past the local window, and back from
answerdotai's id layout. Continual pretraining from such a folder: test_recipe_modernbert.py."""

import json
import math

import pytest
import torch

import inprocess
from biofairseq.dev.samples import REPO
from conftest import TINY, bpe_flags, json_logs

LOCAL_WINDOW = 128  # ModernBERT's, bio_modernbert_tiny's
TRAIN = [*TINY[:TINY.index("--arch")], "--arch", "bio_modernbert_tiny", "--tokens-per-sample", "256",
         "--batch-size", "8", *TINY[TINY.index("--optimizer"):], "--pack-documents", "--mask-prob", "0.3",
         "--max-update", "30", "--total-num-update", "30", "--disable-validation"]


def tiny_model(corpus, pack_documents=False):
    from biofairseq.checkpoints import DictionaryTask, load_dictionary, training_config

    dictionary = load_dictionary(corpus.data_bin / "dict.txt")
    cfg = training_config(["--arch", "bio_modernbert_tiny"], corpus.data_bin)
    torch.manual_seed(0)
    return DictionaryTask(dictionary, pack_documents).build_model(cfg.model).eval(), dictionary


@pytest.fixture(scope="module")
def trained(bytebpe_corpus, tmp_path_factory):
    """(checkpoint, fairseq's log) of bio_modernbert_tiny trained 30 updates on packed rows of 256 tokens."""
    save_dir = tmp_path_factory.mktemp("modernbert")
    ran = inprocess.run("biofairseq-train", bytebpe_corpus.data_bin, *TRAIN, "--save-dir", save_dir,
                        *bpe_flags(bytebpe_corpus.data_bin), cwd=REPO)
    return save_dir / "checkpoint_last.pt", ran.stderr


@pytest.fixture(scope="module")
def hf(trained, tmp_path_factory):
    """The trained checkpoint converted to transformers (biofairseq-convert to-hf)."""
    out = tmp_path_factory.mktemp("hf") / "hf"
    inprocess.run("biofairseq-convert", "to-hf", trained[0], out)
    return out


@pytest.mark.fast
def test_a_document_computes_the_same_alone_padded_and_packed_beside_another(bytebpe_corpus):
    """Longer than the window, so the local layers' window and the document mask both act."""
    alone, dictionary = tiny_model(bytebpe_corpus)
    packed, _ = tiny_model(bytebpe_corpus, pack_documents=True)
    packed.load_state_dict(alone.state_dict())
    generator = torch.Generator().manual_seed(1)
    a, b = (torch.randint(4, len(dictionary) - 1, (1, n), generator=generator) for n in (200, 90))
    a[0, 0] = b[0, 0] = dictionary.bos()
    padded = torch.full((2, 200), dictionary.pad())
    padded[0], padded[1, :90] = a[0], b[0]
    with torch.no_grad():
        logits_a, logits_b = alone(a)[0][0], alone(b)[0][0]
        in_row = packed(torch.cat([b, a], dim=1))[0][0]
        in_batch = alone(padded)[0]
    assert (in_row[90:] - logits_a).abs().max() < 1e-4 and (in_row[:90] - logits_b).abs().max() < 1e-4
    assert (in_batch[0] - logits_a).abs().max() < 1e-4 and (in_batch[1, :90] - logits_b).abs().max() < 1e-4
    # and the window is a real limit: without it the long document's logits change
    alone.encoder.half_window = 10**6
    with torch.no_grad():
        assert (alone(a)[0][0] - logits_a).abs().max() > 1e-3


@pytest.mark.fast
def test_the_block_is_modernberts(bytebpe_corpus):
    model, _ = tiny_model(bytebpe_corpus)
    layers = model.encoder.layers
    assert [layer.is_global for layer in layers] == [True, False, False]  # every third layer global, from the first
    assert layers[0].attn_norm is None and layers[1].attn_norm is not None
    assert all(not hasattr(m, "bias") or m.bias is None for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.LayerNorm)))
    assert layers[0].ffn_in.weight.shape == (2 * 176, 128)  # GeGLU: value and gate
    assert model.encoder.lm_head.weight is model.encoder.embed_tokens.weight
    assert not any("rotary" in k or "position" in k for k in model.state_dict())  # rotary: nothing trained or saved
    # fairseq's --fp16 casts the model to fp16: the rotary angles stay fp32
    positions = torch.arange(4096).view(1, -1)
    before = model.encoder.rotary["global"](positions)
    after = model.half().encoder.rotary["global"](positions)
    assert all(a.dtype == torch.float32 and torch.equal(a, b) for a, b in zip(after, before))



@pytest.mark.fast
def test_the_step_benchmark_counts_the_keys_the_model_attends_to(bytebpe_corpus):
    """benchmarks/modernbert_step.py's FLOPs (and so its MFU) rest on the keys a token attends to in global and local
    layers: they must be those of the model's own masks, for documents shorter, about as long and longer than the
    window."""
    import sys

    import numpy as np

    from biofairseq.dev.samples import REPO

    sys.path.insert(0, str(REPO / "benchmarks"))
    from modernbert_step import keys_per_query

    model, dictionary = tiny_model(bytebpe_corpus, pack_documents=True)
    lengths = [3, 65, 66, 70, 300]
    row = torch.full((1, sum(lengths)), 5)
    row[0, np.cumsum([0, *lengths[:-1]])] = dictionary.bos()
    _, masks = model.encoder.positions_and_masks(row)
    counted = {kind: masks[kind].sum().item() / row.numel() for kind in ("global", "local")}
    assert keys_per_query(np.array(lengths, dtype=np.float64)) == pytest.approx((counted["global"], counted["local"]))
    assert counted["local"] < counted["global"]

def test_training_lowers_the_loss(trained):
    _, log = trained
    losses = [float(r["loss"]) for r in json_logs(log, "train_inner")]
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0


def test_converts_to_transformers_modernbert_with_parity_past_the_window(trained, hf):
    import transformers

    checkpoint, _ = trained
    report = json.loads((hf / "conversion.json").read_text())
    assert report["transformers_class"] == "ModernBertForMaskedLM"
    parity = report["parity"]
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    assert parity["batch_shape"][1] > LOCAL_WINDOW  # a padded batch with one sequence past the window
    config = json.loads((hf / "config.json").read_text())
    assert config["model_type"] == "modernbert" and config["local_attention"] == LOCAL_WINDOW
    assert config["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention"]

    # the token classifier NER fine-tunes is transformers' own, on the same encoder
    from biofairseq import checkpoints

    fairseq = checkpoints.load(checkpoint)
    tagger = transformers.AutoModelForTokenClassification.from_pretrained(hf, num_labels=5).eval()
    assert type(tagger).__name__ == "ModernBertForTokenClassification"
    tokens = torch.randint(4, len(fairseq.dictionary) - 1, (2, 3 * LOCAL_WINDOW))
    tokens[:, 0], tokens[1, 200:] = fairseq.dictionary.bos(), fairseq.dictionary.pad()
    real = tokens.ne(fairseq.dictionary.pad())
    with torch.no_grad():
        ours = fairseq.model(tokens, features_only=True)[0]
        theirs = tagger.model(input_ids=tokens, attention_mask=real.long()).last_hidden_state
    assert (ours - theirs).abs()[real].max() < 1e-4


def relaid_as_modernbert(folder, out):
    """The transformers folder ``folder`` with the id layout of answerdotai's ModernBERT (byte-level BPE, then [UNK],
    [CLS], [SEP], [PAD] and [MASK] after the vocabulary): the same model, its token rows reordered. What a team
    holding ModernBERT or BioClinical ModernBERT weights has on disk, at a size a test can build."""
    import transformers
    from tokenizers import Tokenizer, processors

    model = transformers.ModernBertForMaskedLM.from_pretrained(folder)
    size = model.config.vocab_size
    moved = {3: "[UNK]", 0: "[CLS]", 2: "[SEP]", 1: "[PAD]", 4: "[MASK]"}  # RoBERTa's <unk>, <s>, </s>, <pad>, <mask>
    rest = [i for i in range(size) if i not in moved]
    new_id = {old: new for new, old in enumerate(rest + list(moved))}
    old_at = torch.tensor(rest + list(moved))  # the old id at each new one
    spec = json.loads((folder / "tokenizer.json").read_text())
    name = {i: t for t, i in spec["model"]["vocab"].items()}
    spec["model"]["vocab"] = {moved.get(old, name.get(old)): new for old, new in new_id.items() if old in name}
    spec["added_tokens"] = [{**t, "id": new_id[t["id"]], "content": moved[t["id"]]} for t in spec["added_tokens"]]
    spec["post_processor"] = None
    backend = Tokenizer.from_str(json.dumps(spec))
    cls, sep = new_id[0], new_id[2]
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]",
                                         sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]").save_pretrained(out)
    with torch.no_grad():
        embeddings = model.model.embeddings.tok_embeddings
        embeddings.weight.copy_(embeddings.weight[old_at].clone())
        model.decoder.bias.copy_(model.decoder.bias[old_at].clone())
    model.config.update({"pad_token_id": new_id[1], "bos_token_id": cls, "cls_token_id": cls, "eos_token_id": sep,
                         "sep_token_id": sep})
    model.save_pretrained(out)
    return new_id


def test_from_hf_modernbert_renumbers_its_ids_and_its_vocabulary_binarizes_text_the_model_reads_as_before(
        trained, hf, bytebpe_corpus, tmp_path):
    """A ModernBERT-layout folder -> fairseq (ids renumbered, parity on the long batch) -> the corpus binarized with
    the exported vocabulary: on it, the converted model's masked-token log-probabilities are the trained model's on
    the original data-bin, so pretraining goes on from where the model left off. (Training from such a folder:
    test_recipe_modernbert.py; --restore-file of a from-hf model.pt: test_convert.py.)"""
    from fairseq.data import data_utils

    from biofairseq import checkpoints
    from biofairseq.corpus.binarize import binarize
    from biofairseq.corpus.vocab import read_dict

    checkpoint, log = trained
    first_loss = float(json_logs(log, "train_inner")[0]["loss"])
    new_id = relaid_as_modernbert(hf, tmp_path / "modernbert")
    inprocess.run("biofairseq-convert", "from-hf", tmp_path / "modernbert", tmp_path / "fairseq")
    report = json.loads((tmp_path / "fairseq" / "conversion.json").read_text())
    assert report["fairseq_flags"] == ["--arch", "bio_modernbert_tiny"]
    assert any("renumbered" in note for note in report["notes"]), report["notes"]
    parity = report["parity"]
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    assert parity["batch_shape"][1] > LOCAL_WINDOW
    symbols = read_dict(tmp_path / "fairseq" / "dict.txt")[0]
    assert symbols[-1] == "<mask>" and len(symbols) + 4 == len(new_id)

    # what preprocess/binarize.sh runs (the script itself, on this folder: test_recipe_modernbert.py)
    binarize(bytebpe_corpus.data_bin.parent / "clean", tmp_path / "fairseq", tmp_path / "data-bin", workers=1)
    before = checkpoints.load(checkpoint, bytebpe_corpus.data_bin / "dict.txt")
    after = checkpoints.load(tmp_path / "fairseq" / "model.pt", tmp_path / "fairseq" / "dict.txt")
    rows = []  # (model, dictionary, 4 rows of 300 tokens of the valid split), before and after
    for loaded, data_bin in ((before, bytebpe_corpus.data_bin), (after, tmp_path / "data-bin")):
        d = loaded.dictionary
        lines = data_utils.load_indexed_dataset(str(data_bin / "valid"), d)
        stream = torch.cat([lines[i] for i in range(len(lines))])
        tokens = torch.stack([torch.cat([torch.tensor([d.bos()]), stream[k: k + 299]]) for k in (0, 1000, 2000, 3000)])
        rows.append((loaded, d, tokens))
    (_, _, old), (_, _, new) = rows
    pairs = torch.stack([old.flatten(), new.flatten()]).unique(dim=1)  # one new id for each old one, and the reverse
    assert pairs[0].unique().numel() == pairs[1].unique().numel() == pairs.shape[1] and not old.equal(new)
    masked = torch.rand(old.shape, generator=torch.Generator().manual_seed(0)) < 0.15
    masked[:, 0] = False
    log_probs = []  # of each masked token
    for loaded, d, tokens in rows:
        with torch.no_grad():
            logits = loaded.model(torch.where(masked, d.index("<mask>"), tokens))[0]
        log_probs.append(logits.log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)[masked])
    bits = -float(log_probs[1].mean()) / math.log(2)  # fairseq's loss
    assert masked.sum() > 100 and bits < first_loss - 1.0  # the trained model's: not the first update's, from scratch
    torch.testing.assert_close(log_probs[1], log_probs[0], rtol=0, atol=1e-4)


@pytest.mark.fast
@pytest.mark.parametrize("change, named", [
    ({"attention_bias": True}, "biases"),
    ({"tie_word_embeddings": False}, "untied word embeddings"),
    ({"classifier_activation": "silu"}, "classifier_activation silu"),
    ({"layer_types": ["full_attention", "full_attention", "sliding_attention"]}, "layer_types"),
])
def test_from_hf_refuses_a_modernbert_no_fairseq_model_computes_in_one_line(change, named, tmp_path, capsys):
    import transformers

    from biofairseq.convert.cli import main as convert

    config = transformers.ModernBertConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                           num_attention_heads=2, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                           cls_token_id=0, sep_token_id=2, **change)
    transformers.ModernBertForMaskedLM(config).save_pretrained(tmp_path / "hf")
    capsys.readouterr()  # transformers' progress bars
    assert convert(["from-hf", str(tmp_path / "hf"), str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "no fairseq bio_modernbert computes this ModernBERT model" in lines[0], lines
    assert not (tmp_path / "out").exists()
