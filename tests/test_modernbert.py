"""ModernBERT's block in fairseq (bio_modernbert_*): documents computed alone in packed rows, trained by
document_mlm, converted to transformers' own ModernBERT classes with parity past the local window."""

import json

import pytest
import torch

from biofairseq.samples import BIN, run_script
from conftest import TINY, bpe_flags, json_logs, run_fairseq

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
    proc = run_fairseq("biofairseq-train", bytebpe_corpus.data_bin, *TRAIN, "--save-dir", save_dir,
                       *bpe_flags(bytebpe_corpus.data_bin))
    return save_dir / "checkpoint_last.pt", proc.stdout + proc.stderr


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

    from biofairseq.samples import REPO

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


def test_converts_to_transformers_modernbert_with_parity_past_the_window(trained, tmp_path):
    import subprocess

    import transformers

    checkpoint, _ = trained
    out = tmp_path / "hf"
    proc = subprocess.run([str(BIN / "biofairseq-convert"), "to-hf", str(checkpoint), str(out)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((out / "conversion.json").read_text())
    assert report["transformers_class"] == "ModernBertForMaskedLM"
    parity = report["parity"]
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    assert parity["batch_shape"][1] > LOCAL_WINDOW  # a padded batch with one sequence past the window
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "modernbert" and config["local_attention"] == LOCAL_WINDOW
    assert config["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention"]

    # the token classifier NER fine-tunes is transformers' own, on the same encoder
    from biofairseq import checkpoints

    fairseq = checkpoints.load(checkpoint)
    tagger = transformers.AutoModelForTokenClassification.from_pretrained(out, num_labels=5).eval()
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


def test_from_hf_modernbert_renumbers_its_ids_and_continues_pretraining(trained, bytebpe_corpus, tmp_path):
    """A ModernBERT-layout folder -> fairseq (ids renumbered, parity on the long batch) -> its text binarized with
    the exported vocabulary -> fairseq-train --restore-file starts where the model left off."""
    import subprocess

    checkpoint, log = trained
    run = lambda *args: subprocess.run([str(a) for a in args], cwd=tmp_path, capture_output=True, text=True)
    proc = run(BIN / "biofairseq-convert", "to-hf", checkpoint, tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr[-2000:]
    new_id = relaid_as_modernbert(tmp_path / "hf", tmp_path / "modernbert")
    proc = run(BIN / "biofairseq-convert", "from-hf", tmp_path / "modernbert", tmp_path / "fairseq")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "fairseq" / "conversion.json").read_text())
    assert report["fairseq_flags"] == ["--arch", "bio_modernbert_tiny"]
    assert any("renumbered" in note for note in report["notes"]), report["notes"]
    parity = report["parity"]
    assert parity["ids_identical"] and max(parity["max_abs_diff_logits"], parity["max_abs_diff_hidden"]) <= 1e-4
    assert parity["batch_shape"][1] > LOCAL_WINDOW
    symbols = [line.split()[0] for line in (tmp_path / "fairseq" / "dict.txt").read_text().splitlines()]
    assert symbols[-1] == "<mask>" and len(symbols) + 4 == len(new_id)

    run_script("preprocess/binarize.sh", bytebpe_corpus.data_bin.parent / "clean", tmp_path / "fairseq",
               tmp_path / "data-bin", "1")
    restored = run_fairseq(
        "biofairseq-train", tmp_path / "data-bin", *TRAIN, "--max-update", "3", "--total-num-update", "3",
        "--save-dir", tmp_path / "continued", "--restore-file", tmp_path / "fairseq" / "model.pt", "--reset-optimizer",
        "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler")
    first_loss = lambda text: float(json_logs(text, "train_inner")[0]["loss"])
    assert first_loss(restored.stdout + restored.stderr) < first_loss(log) - 1.0  # the original's first update: from scratch


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
    assert len(lines) == 1 and named in lines[0] and "no fairseq bio_modernbert computes this model" in lines[0], lines
    assert not (tmp_path / "out").exists()
