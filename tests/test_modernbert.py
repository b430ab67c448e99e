"""ModernBERT's block in fairseq (bio_modernbert_*): documents computed alone in packed rows, trained by
document_mlm, converted to transformers' own ModernBERT classes with parity past the local window."""

import json

import pytest
import torch

from biofairseq.samples import BIN, REPO
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
    assert layers[0].ffn_in.weight.shape == (2 * 192, 128)  # GeGLU: value and gate
    assert model.encoder.lm_head.weight is model.encoder.embed_tokens.weight
    assert not any("rotary" in k or "position" in k for k in model.state_dict())  # rotary: nothing trained or saved


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
