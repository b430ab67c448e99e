"""A packed checkpoint saved by an earlier biofairseq (whose models switched fairseq's modules to packed rows after
building them; today's are built packed) loads, resumes with the losses that run had, and converts.

``tests/data/packed_checkpoint_0``: ``bio_roberta_tiny`` narrowed to 2 x 32, ``--attention sdpa --pack-documents``,
saved at update 3 of 6 on 24 bundled clinical cases (its data-bin beside it), and the losses of updates 4 to 6 as
that run logged them (before packed rows were masked block by block). The resumed run reads a copy of the data-bin, where today's code builds the block index and the
packing (no index is committed: one would be read instead, and the test would no longer run today's ``pack()``).
"""

import json
import shutil

import torch

import inprocess
from biofairseq.dev.samples import REPO
from conftest import json_logs

EARLIER = REPO / "tests" / "data" / "packed_checkpoint_0"
CHECKPOINT = EARLIER / "checkpoint_1_3.pt"
FLAGS = ["--user-dir", "biofairseq", "--task", "document_mlm", "--criterion", "masked_lm_accuracy",
         "--arch", "bio_roberta_tiny", "--encoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
         "--encoder-attention-heads", "2", "--tokens-per-sample", "128", "--batch-size", "8", "--attention", "sdpa",
         "--pack-documents", "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "polynomial_decay",
         "--warmup-updates", "2", "--total-num-update", "6", "--cpu", "--num-workers", "0", "--seed", "1",
         "--no-epoch-checkpoints", "--log-format", "json", "--log-interval", "1", "--disable-validation"]


def test_an_earlier_packed_checkpoint_resumes_with_the_losses_its_run_had(tmp_path):
    data_bin = tmp_path / "data-bin"  # a copy: the indexes built beside its train split stay out of the repository
    shutil.copytree(EARLIER / "data-bin", data_bin, ignore=shutil.ignore_patterns("*.index"))
    output = inprocess.run("biofairseq-train", data_bin, *FLAGS, "--max-update", "6", "--save-dir", tmp_path / "save",
                           "--restore-file", CHECKPOINT, cwd=REPO).stderr
    assert "built the blocks-complete_doc-127 index" in output and "built the packed-128 index" in output  # today's
    logged = {r["num_updates"]: r["loss"] for r in json_logs(output, "train_inner")}
    earlier = json.loads((EARLIER / "losses.json").read_text())  # {update: loss} as the earlier run logged them
    # Packed rows are masked block by block since the earlier run (which masked each row as a whole): where a row's
    # blocks get other masks, the loss moves a little, so the resumed run is today's own, exactly, and within 0.02 of
    # the earlier run's at every update (a model or optimizer state lost in loading would move it by far more).
    assert logged == {"4": "8.964", "5": "8.946", "6": "8.902"}
    assert all(abs(float(logged[u]) - float(earlier[u])) < 0.02 for u in earlier)


def test_an_earlier_packed_checkpoint_loads_packed_or_not_and_converts(tmp_path):
    from biofairseq import checkpoints
    from biofairseq.convert.cli import main as convert

    dictionary = EARLIER / "data-bin" / "dict.txt"
    unpacked = checkpoints.load(CHECKPOINT, dictionary)  # strict: every key of the earlier layout, no other
    packed = checkpoints.load(CHECKPOINT, dictionary, pack_documents=True)  # as a distillation teacher is
    assert packed.model.reads_packed_rows and not unpacked.model.reads_packed_rows
    d = unpacked.dictionary
    document = torch.tensor([[d.bos(), *range(10, 40), d.eos()]])
    two = torch.cat([document, document], dim=1)  # a packed row: the document twice
    alone = unpacked.model(document, features_only=True)[0]
    together = packed.model(two, features_only=True)[0]
    torch.testing.assert_close(together[:, :32], alone, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(together[:, 32:], alone, rtol=1e-5, atol=1e-5)

    out = tmp_path / "hf"
    assert convert(["to-hf", str(CHECKPOINT), str(out), "--dict", str(dictionary), "--vocab", str(EARLIER / "data-bin")]) == 0
    parity = json.loads((out / "conversion.json").read_text())["parity"]
    assert parity["ids_identical"] and parity["max_abs_diff_logits"] <= 1e-4


