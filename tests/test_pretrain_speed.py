"""benchmarks/pretrain_speed.py at CPU shapes: stock and our packed path train, and the report holds speed, utilisation,
padding and loss curves (our unpacked path trains in test_training.py and test_fast_path.py)."""

import re
import sys

import pytest

import inprocess
from biofairseq.dev.samples import REPO


def test_pretrain_speed_benchmark_reports_speed_utilisation_padding_and_loss_curves(bytebpe_corpus, tmp_path):
    output = tmp_path / "speed.md"
    # the benchmark in this process; the training runs it times are processes of their own, as it measures them
    inprocess.run("python", REPO / "benchmarks" / "pretrain_speed.py", "--models", "roberta", "--tokens", "64",
                  "--only", "stock,packed", "--rounds", "1", "--updates", "4", "--log-interval", "2",
                  "--data-bin", bytebpe_corpus.data_bin, "--output", output, cwd=REPO,
                  env={"PYTHONWARNINGS": "ignore"})
    report = output.read_text()
    rows = re.findall(r"^\| (stock \(fp32\)|ours \(fp32, packed\)) \| ([\d,]+) \| [\d.]+ \| ([\d.]+)% \|$",
                      report, re.M)
    assert len(rows) == 2 and all(0 < float(mfu) < 100 for _, _, mfu in rows), report
    # the packed rows carry the same blocks with less padding
    unpacked, packed = map(float, re.search(r"Padding: ([\d.]+)% .* one block per row, ([\d.]+)% packed", report).groups())
    assert packed < unpacked
    curve = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", report, re.M)
    assert [int(u) for u, *_ in curve] == [2, 4] and all(8 < float(x) < 12 for row in curve for x in row[1:])
    assert "largest loss gap" in report and "tokens/s / stock (fp32) tokens/s" in report
    # synchronisations per update: on the packed path under biofairseq-train, fairseq's finiteness test of the
    # gradient norm only; stock's encoder, loss, trainer and meters add theirs
    table = report[report.index("| system | count | where (count) |"):]  # the synchronisations' table, not the speeds'
    syncs = dict(re.findall(r"^\| (stock \(fp32\)|ours \(fp32, packed\)) \| (\d+) \| .*\|$", table, re.M))
    assert int(syncs["ours (fp32, packed)"]) == 1 and int(syncs["stock (fp32)"]) > 4, report
    packed_sites = re.search(r"^\| ours \(fp32, packed\) \| \d+ \| (.*) \|$", table, re.M).group(1)
    assert re.fullmatch(r"fairseq/trainer\.py:\d+ \(1\)", packed_sites), packed_sites


def test_with_keep_going_a_failing_system_is_reported_and_the_others_still_measured(bytebpe_corpus, tmp_path):
    """On a rarely lent GPU one system's failure must not lose the others' runs (pretrain_speed.py --keep-going): it
    is reported and left out of the later rounds. A failed run is a failed process (once, below); the rounds are
    stood in for, the benchmark's own runs being processes in the test above."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from measure import fairseq_train_speed, interleaved
    from pretrain_speed import failure_lines

    with pytest.raises(SystemExit, match="no_such_arch"):  # what a failed run raises: the end of its output
        fairseq_train_speed(bytebpe_corpus.data_bin, ["--arch", "no_such_arch", "--cpu"], 1, tmp_path / "save", cwd=REPO)

    ran = []

    def train(data_bin, flags, updates, save_dir, cwd=None, curve=False):
        ran.append(flags[0])
        if flags[0] == "broken":
            raise SystemExit("fairseq-train ... failed:\n...\nRuntimeError: no_such_arch")
        return {"ups": 1.0, "wps": 100.0, "peak_rss_mb": 1.0}

    runs = {"stock (fp32)": ["stock"], "broken": ["broken"]}
    failures = {}
    results = interleaved(runs, tmp_path, 2, 2, tmp_path / "save", failures=failures, train=train)
    assert ran == ["stock", "broken", "stock"]  # left out of the second round
    assert list(results) == ["stock (fp32)"] and len(results["stock (fp32)"]) == 2
    assert list(failures) == ["broken"] and "no_such_arch" in failures["broken"]
    assert any("**broken failed**" in line for line in failure_lines(failures))
