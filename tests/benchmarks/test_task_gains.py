"""Tests of benchmarks/task_gains.py's run scheduling (``--jobs``, ``--keep-finished``) and tables."""
import argparse
import importlib.util
import json
import sys
import threading
import time

import pytest

from tests.helpers import REPO_ROOT

_PATH = REPO_ROOT / "benchmarks" / "task_gains.py"
_SPEC = importlib.util.spec_from_file_location("task_gains", _PATH)
task_gains = importlib.util.module_from_spec(_SPEC)
sys.modules["task_gains"] = task_gains
_SPEC.loader.exec_module(task_gains)


def make_args(tmp_path, **kwargs):
    defaults = dict(
        runs=tmp_path, tasks=["klue_ner", "nsmc_sentiment"], variants=["baseline", "elmo"],
        seeds=[1, 2], threads=1, jobs=1, num_epochs=None, keep_finished=False, bilm=None,
    )
    defaults.update(kwargs)
    return argparse.Namespace(**defaults)


def test_selected_runs_put_the_elmo_runs_first_and_keep_the_given_order(tmp_path):
    runs = task_gains.selected_runs(make_args(tmp_path))
    assert runs == [
        ("klue_ner", "elmo", 1), ("klue_ner", "elmo", 2),
        ("nsmc_sentiment", "elmo", 1), ("nsmc_sentiment", "elmo", 2),
        ("klue_ner", "baseline", 1), ("klue_ner", "baseline", 2),
        ("nsmc_sentiment", "baseline", 1), ("nsmc_sentiment", "baseline", 2),
    ]


def test_train_all_runs_jobs_at_a_time_skips_finished_runs_and_reports_failures(tmp_path, monkeypatch):
    finished = tmp_path / "klue_ner_seed1"
    finished.mkdir()
    (finished / "metrics.json").write_text("{}")
    lock = threading.Lock()
    running, most_at_once, trained = [0], [0], []

    def fake_train(name, config_path, runs, threads, num_epochs, seed):
        with lock:
            running[0] += 1
            most_at_once[0] = max(most_at_once[0], running[0])
            trained.append(name)
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        if name == "nsmc_sentiment_seed2":
            raise RuntimeError(f"{name} failed (exit 1)")

    monkeypatch.setattr(task_gains, "train", fake_train)
    args = make_args(tmp_path, variants=["baseline"], jobs=2, keep_finished=True)
    failed = task_gains.train_all(task_gains.selected_runs(args), args)
    assert sorted(trained) == ["klue_ner_seed2", "nsmc_sentiment_seed1", "nsmc_sentiment_seed2"]
    assert most_at_once[0] == 2
    assert failed == ["nsmc_sentiment_seed2 failed (exit 1)"]


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_train_raises_naming_the_log_when_allennlp_fails(tmp_path):
    config = tmp_path / "broken.jsonnet"
    config.write_text("{")  # not Jsonnet: allennlp train exits with an error
    with pytest.raises(RuntimeError, match="broken_run failed .*broken_run.log"):
        task_gains.train("broken_run", config, tmp_path, 1)
    assert not (tmp_path / "broken_run" / "wall_seconds.txt").exists()


def test_seeds_table_gives_mean_and_sample_std(tmp_path):
    for name, score in [("klue_ner_seed1", 0.80), ("klue_ner_seed2", 0.84),
                        ("klue_ner_elmo_seed1", 0.85), ("klue_ner_elmo_seed2", 0.87)]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps({"test_entity_macro_f1": score}))
        (tmp_path / name / "wall_seconds.txt").write_text("120\n")
    row = task_gains.seeds_table(tmp_path, ["klue_ner"], [1, 2]).splitlines()[2]
    # std with ddof=1: |0.80 - 0.84| / sqrt(2) = 2.83 points; |0.85 - 0.87| / sqrt(2) = 1.41
    assert "| 82.00 ± 2.83 (2) | 86.00 ± 1.41 (2) | +4.00 |" in row
    assert "2.0 min / 2.0 min" in row
