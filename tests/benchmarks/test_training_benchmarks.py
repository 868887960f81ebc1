"""
The training benchmarks of the pretraining work: batches that cannot be short, the data path,
the day session's report and projection, and (slow) the day session's CPU dry run end to end,
the compiled-against-eager check and the vocabulary-size epoch, each at a tiny size.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"


def _module(name: str, path: Path):
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bilm_sizes = _module("bilm_sizes", BENCHMARKS / "bilm_sizes.py")
day_report = _module("day_report", BENCHMARKS / "gpu" / "day_report.py")


def test_a_corpus_too_short_for_full_batches_is_refused_with_its_counts(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c d e\nshort\nf g h i j k\n", encoding="utf-8")
    batches = bilm_sizes.load_batches(1, 2, 5, corpus)
    assert batches == [[["a", "b", "c", "d", "e"], ["f", "g", "h", "i", "j"]]]
    with pytest.raises(SystemExit) as refused:
        bilm_sizes.load_batches(2, 2, 5, corpus)
    message = str(refused.value)
    assert f"{corpus} holds 2 sentence(s) of at least 5 token(s); 4 are needed" in message
    assert "short batch would be timed as a full one" in message
    # A folder of .txt files is read in name order.
    (tmp_path / "z.txt").write_text("p q r s t\n", encoding="utf-8")
    assert bilm_sizes.load_sentences(3, 5, path=tmp_path)[-1] == ["p", "q", "r", "s", "t"]


def test_the_data_path_benchmark_measures_both_loaders(tmp_path):
    data_path = _module("data_path", BENCHMARKS / "data_path.py")
    out = tmp_path / "data.json"
    data_path.main(["--corpus", str(SAMPLE / "train.txt"), "--vocabulary",
                    str(SAMPLE / "vocabulary.txt"), "--batch-size", "4", "--batches", "6",
                    "--loaders", "bilm_stream", "multiprocess", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert [row["loader"] for row in rows] == ["bilm_stream", "multiprocess"]
    # The same batches, so the same tokens: 6 full batches of 4 rows x 20.
    assert rows[0]["tokens"] == rows[1]["tokens"] == 6 * 4 * 20
    assert all(row["tokens_per_second"] > 0 for row in rows)


def test_the_projection_of_the_day_report(tmp_path):
    # A day is 10 x 768,648,884 tokens / 86,400 s = 88,964 tokens/s.
    (tmp_path / "epoch.json").write_text(json.dumps(dict(
        config="bilm_original.jsonnet", size="config", batch_size=384, unroll_steps=20,
        batches=60, tokens=453_000, seconds=5.09, first_batch_seconds=70.0,
        tokens_per_second=88_964.0, precision="tf32", compile="default", device="cuda:0",
        num_words=793_471, num_samples=8192)))
    (tmp_path / "step.json").write_text(json.dumps([
        dict(side=side, precision=precision, tokens_per_second=rate, compile_seconds=60.0,
             batch_size=384, tokens_per_sentence=20, softmax="sparse", device="cuda",
             versus_eager=1.0, loss_difference=0.0, first_loss=9.0)
        for side, precision, rate in (("allennlp", "tf32", 14_000.0), ("eager", "tf32", 30_000.0),
                                      ("compiled", "tf32", 150_000.0),
                                      ("compiled", "bfloat16", 225_000.0))
    ]))
    text = day_report.report(tmp_path, dry=False, all_reduce_gb_per_s=200.0, memory_gb_per_s=2000.0)
    assert "| 1 | 88,964 | 24.0 | `allennlp train`, measured |" in text
    # The step alone: the fastest of ours (bfloat16 compiled), 10 passes in 9.5 hours.
    assert "| 1, the step alone | 225,000 | 9.5 |" in text
    assert "| ours, LSTM recurrence compiled | 150,000 | 225,000 | 1.50x | 60 |" in text
    assert "| ours, the step captured whole | not measured |" in text
    # 8 GPUs: 7,680 tokens per update; the 384-row step (7,680 / 88,964 s) plus the all-reduce of
    # 4 x (93.6M + 793,471 x 513) bytes x 2 x 7/8 at 200 GB/s plus 5 x 4 x 793,471 x 513 bytes
    # at 2,000 GB/s.
    step = 7680 / 88_964.0
    all_reduce = 2 * 7 / 8 * 4 * (93_600_000 + 793_471 * 513) / 200e9
    adagrad = 5 * 4 * 793_471 * 513 / 2000e9
    eight = 7680 / (step + all_reduce + adagrad)
    assert f"| 8 | at least {eight:,.0f} |" in text
    assert "39.7" in text and "not measured" in text  # no profile, data or perplexity files


def _environment() -> dict:
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    environment.pop("OUT", None)
    return environment


@pytest.mark.slow
def test_the_day_session_runs_end_to_end_on_the_cpu(tmp_path):
    result = subprocess.run(
        ["bash", "benchmarks/gpu/session.sh", "day"], cwd=REPO_ROOT, capture_output=True,
        text=True, timeout=900,
        env=dict(_environment(), DAY_DRY="1", PYTHON=sys.executable, OUT=str(tmp_path)),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ("step", "epoch", "data", "perplexity"):
        assert (tmp_path / "day" / f"{name}.json").is_file(), (name, result.stdout[-3000:])
    text = (tmp_path / "day.md").read_text()
    assert "DRY RUN on the CPU" in text
    step = json.loads((tmp_path / "day" / "step.json").read_text())
    assert {(row["side"], row["precision"]) for row in step} == {
        (side, precision) for side in ("allennlp", "eager", "captured")
        for precision in ("tf32", "bfloat16")
    }
    # The captured side (on the CPU the same step function, eagerly) trains what eager trains.
    assert all(row["loss_difference"] < 1e-3 for row in step if row["side"] == "captured")
    assert all(row["tokens_per_second"] > 0 for row in step)
    assert "| ours, eager |" in text and "| 1 |" in text and "| 8 | at least" in text
    assert (tmp_path / "logs.tar.gz").is_file()


@pytest.mark.slow
def test_compiled_against_eager_through_allennlp_train_at_a_tiny_size(tmp_path):
    # The CPU check of the compiled path (compiled on the CPU by Inductor: minutes).
    compiled_against_eager = _module("compiled_against_eager",
                                     BENCHMARKS / "compiled_against_eager.py")
    out = tmp_path / "perplexity.json"
    compiled_against_eager.main([
        "--size", "tiny", "--steps", "12", "--batch-size", "8", "--unroll-steps", "10",
        "--num-samples", "64", "--eval-sentences", "40", "--corpus", str(SAMPLE / "train.txt"),
        "--held-out", str(SAMPLE / "heldout.txt"), "--threads", "1", "--json", str(out),
    ])
    result = json.loads(out.read_text())
    runs = [row["run"] for row in result["rows"]]
    assert runs == ["eager", "eager, weights moved by one float32 step", "compiled"]
    assert result["passes"] is True
    # The training curves: 12 steps each, every loss finite.
    assert all(len(row["losses"]) == 12 for row in result["rows"])


@pytest.mark.slow
def test_the_vocabulary_epoch_benchmark_compares_the_two_vocabularies(tmp_path, monkeypatch):
    vocabulary_epoch = _module("vocabulary_epoch", BENCHMARKS / "vocabulary_epoch.py")
    out = tmp_path / "vocabulary.json"
    monkeypatch.setattr(sys, "argv", ["vocabulary_epoch.py", "--large", "20000", "--repeats", "1",
                                      "--softmax", "sparse", "--threads", "1", "--json", str(out)])
    vocabulary_epoch.main()
    rows = json.loads(out.read_text())
    assert [(row["softmax"], row["words"]) for row in rows] == [("sparse", 160), ("sparse", 20000)]
    assert rows[0]["ratio"] == 1.0 and rows[1]["train_seconds"] > 0
