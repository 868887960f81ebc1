"""
A sharded run as one torchrun rank (``WORLD_SIZE=1``, gloo), in-process so that it is fast:
assembly with virtual datasets equals a plain run; reuse after a lost shard and its report;
a changed model recomputes everything; a missing shard is an error naming it, never NaN. The
multi-process runs are in ``test_sharded_torchrun.py``.
"""
import dataclasses
import os
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_plugin import EmbeddingsFile, MissingShardError
from elmo_plugin.data.sentence_file import read_sentences
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.plan import plan_input, read_piece
from tests.embedding_output.sharding_helpers import assert_same_output, corpus, free_port
from tests.helpers import make_random_bilm_files, run_elmo, write_lines

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture
def one_rank(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))


def plain_run(tmp_path: Path, input_file: Path, *args) -> Path:
    output = tmp_path / "plain.hdf5"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WORLD_SIZE", raising=False)
        assert run_elmo(input_file, output, *args) == 0
    return output


def shards_of(output: Path):
    return sorted(Path(f"{output}.shards").glob("lines-*.hdf5"))


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_one_rank_equals_plain_run_and_resumes(tmp_path, one_rank, capsys, layout):
    lines = corpus(200, repeat_every=17)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = ["--all", "--batch-size", "2", "--layout", layout, "--shard-tokens", "200"]
    expected = plain_run(tmp_path, input_file, *args)
    output = tmp_path / "out.hdf5"
    assert run_elmo(input_file, output, *args) == 0
    assert_same_output(expected, output)
    shards = shards_of(output)
    assert len(shards) == 4  # 64-line groups (2 x 32) of at least 200 tokens
    with h5py.File(output, "r") as handle:
        first = "layer_0" if layout == "flat" else "0"
        assert handle[first].is_virtual
    assert not [name for name in os.listdir(f"{output}.shards") if name.startswith(".")]

    # The same command again is refused: the output exists. Nothing changes.
    os.remove(shards[1])
    mtimes = {shard: shard.stat().st_mtime_ns for shard in shards if shard != shards[1]}
    written = output.read_bytes()
    capsys.readouterr()
    assert run_elmo(input_file, output, *args) == 2
    assert capsys.readouterr().err == (
        f"allennlp elmo: error: {output} exists; --overwrite replaces it (once the new file is "
        "complete), or choose another output file\n"
    )
    assert output.read_bytes() == written and shards_of(output) == shards[:1] + shards[2:]

    # With --overwrite, the lost shard is recomputed alone, and the rerun says so.
    assert run_elmo(input_file, output, *args, "--overwrite") == 0
    out = capsys.readouterr().out
    assert "136 of them reused" in out  # 200 lines, minus the lost shard's 64
    assert {shard: shard.stat().st_mtime_ns for shard in mtimes} == mtimes
    assert_same_output(expected, output)


def test_changed_model_recomputes_everything(tmp_path, one_rank, capsys):
    input_file = write_lines(tmp_path / "in.txt", corpus(70))
    output = tmp_path / "out.hdf5"
    args = ["--top", "--batch-size", "2", "--layout", "flat", "--shard-tokens", "100"]
    assert run_elmo(input_file, output, *args) == 0
    first_shards = {shard.name for shard in shards_of(output)}
    other = make_random_bilm_files(tmp_path, seed=3)
    capsys.readouterr()
    assert (
        run_elmo(
            input_file, output, *args, "--options-file", other.options_file,
            "--weight-file", other.weight_file, "--overwrite", model_files=False,
        )
        == 0
    )
    assert "reused" not in capsys.readouterr().out
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WORLD_SIZE", raising=False)
        assert (
            run_elmo(
                input_file, tmp_path / "plain.hdf5", *args, "--options-file", other.options_file,
                "--weight-file", other.weight_file, model_files=False,
            )
            == 0
        )
    assert_same_output(tmp_path / "plain.hdf5", output)
    # New names (the fingerprint is in them: the first output's shards were never overwritten),
    # and the first model's shards removed once the new output had replaced the first.
    second_shards = {shard.name for shard in shards_of(output)}
    assert len(second_shards) == 2 and not second_shards & first_shards


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_missing_shard_is_an_error_naming_it(tmp_path, one_rank, layout):
    input_file = write_lines(tmp_path / "in.txt", corpus(100))
    output = tmp_path / "out.hdf5"
    args = ["--top", "--batch-size", "2", "--layout", layout, "--shard-tokens", "50"]
    assert run_elmo(input_file, output, *args) == 0
    shard = shards_of(output)[-1]
    os.remove(shard)
    # Plain h5py reads NaN where the shard was: the trap the reader guards against.
    with h5py.File(output, "r") as handle:
        key = "top" if layout == "flat" else "99"
        assert np.isnan(handle[key][()]).any()
    with pytest.raises(MissingShardError, match=str(shard)):
        EmbeddingsFile(output)


def test_truncated_shard_is_an_error_naming_it(tmp_path, one_rank):
    input_file = write_lines(tmp_path / "in.txt", corpus(100))
    output = tmp_path / "out.hdf5"
    args = ["--top", "--batch-size", "2", "--layout", "flat", "--shard-tokens", "50"]
    assert run_elmo(input_file, output, *args) == 0
    shard = shards_of(output)[0]
    with open(shard, "r+b") as handle:
        handle.truncate(shard.stat().st_size // 2)
    with pytest.raises(MissingShardError, match=f"{shard}.*truncated"):
        EmbeddingsFile(output)


def test_bad_input_and_stateful_are_one_line(tmp_path, one_rank, capsys):
    bad = write_lines(tmp_path / "bad.txt", ["a b", "", "c"])
    assert run_elmo(bad, tmp_path / "out.hdf5", "--top") == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "blank" in err
    good = write_lines(tmp_path / "in.txt", ["a b"])
    assert run_elmo(good, tmp_path / "out.hdf5", "--top", "--stateful") == 1
    assert "--stateful" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "in.txt"]  # no shards directory left


def test_plan_balances_ranks_by_tokens(tmp_path):
    # 40 chunks of 2 lines; the first half of the lines has 10 tokens each, the second 1.
    lines = [" ".join(["x"] * 10)] * 40 + ["y"] * 40
    path = write_lines(tmp_path / "in.txt", lines)
    job = EmbeddingJob(str(path), "", batch_size=1, sort_chunk_batches=2, piece_tokens=1)
    plan = plan_input(job, world_size=2)
    assert len(plan.pieces) == 40 and plan.num_tokens == 440
    first, second = plan.pieces_of(0), plan.pieces_of(1)
    assert first[-1].end_line == second[0].first_line
    # Balanced by tokens (220 each), not lines.
    assert sum(piece.num_tokens for piece in first) == 220
    assert first[-1].end_line == 22
    # Byte offsets let a rank start reading at its first line.
    with open(path, "rb") as handle:
        handle.seek(second[0].byte_offset)
        assert handle.readline().decode().split() == lines[22].split()


@pytest.mark.parametrize("num_lines, world_size", [(2050, 2), (2050, 3), (2050, 5), (20000, 2)])
def test_a_small_input_is_cut_into_a_piece_per_rank_of_a_single_runs_batches(
    tmp_path, num_lines, world_size
):
    # 2,050 lines at the default batch size: a chunk of 2,048 lines and one of 2; far fewer
    # tokens than a piece. Each rank gets one piece, cut between two batches of a single run.
    lines = corpus(num_lines, seed=1)
    path = write_lines(tmp_path / "in.txt", lines)
    job = EmbeddingJob(str(path), "", num_sentences=num_lines)
    plan = plan_input(job, world_size)
    assert [len(plan.pieces_of(rank)) for rank in range(world_size)] == [1] * world_size
    # Balanced by tokens: each piece within one batch's tokens of its share.
    batches = list(job.batches(read_sentences(str(path))))
    largest_batch = max(sum(len(tokens) for _, tokens in batch) for batch in batches)
    for piece in plan.pieces:
        assert abs(piece.num_tokens - plan.num_tokens / world_size) <= largest_batch
    # Taken in turn, the pieces' batches are exactly a single run's: bitwise its vectors.
    pieces_batches = [list(job.batches(read_piece(str(path), piece))) for piece in plan.pieces]
    assert [batch for batches_of_piece in pieces_batches for batch in batches_of_piece] == batches
    # Every line in exactly one piece; shard names distinct.
    assert sorted(line for piece in plan.pieces for line in piece.lines()) == list(range(num_lines))
    assert len({piece.shard_name("f" * 16) for piece in plan.pieces}) == world_size
    assert plan.pieces[0].chosen_lines is not None  # cut inside the first chunk


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_pieces_cut_inside_chunks_assemble_to_a_single_runs_output(
    tmp_path, one_rank, monkeypatch, capsys, layout
):
    # One rank embedding the pieces of three: lines of one chunk spread over three shards.
    import elmo_plugin.embedding_output.sharded_run as sharded_run

    plans = []

    def plan_of_three(job, world_size):
        plans.append(plan_input(job, 3))
        return dataclasses.replace(plans[-1], rank_starts=[0, len(plans[-1].pieces)])

    monkeypatch.setattr(sharded_run, "plan_input", plan_of_three)
    lines = corpus(150, repeat_every=13)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = ["--all", "--batch-size", "4", "--layout", layout]
    expected = plain_run(tmp_path, input_file, *args)
    output = tmp_path / "out.hdf5"
    assert run_elmo(input_file, output, *args) == 0
    assert len(shards_of(output)) == 3
    assert [piece.chosen_lines is not None for piece in plans[0].pieces] == [True, True, True]
    assert_same_output(expected, output)
    with EmbeddingsFile(output) as embeddings, EmbeddingsFile(expected) as single:
        assert embeddings.sentences() == single.sentences()
        np.testing.assert_array_equal(embeddings[77], single[77])

    # Resumed after a lost shard: the other two are reused.
    os.remove(shards_of(output)[1])
    os.remove(output)
    capsys.readouterr()
    assert run_elmo(input_file, output, *args) == 0
    assert "of them reused" in capsys.readouterr().out
    assert_same_output(expected, output)


DISK_FULL_CHILD = r"""
import contextlib, io, json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from allennlp.commands import main
limit, argv = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
sys.argv = ["allennlp"] + argv
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
    try:
        main(prog="allennlp")
        code = 0
    except SystemExit as exit:
        code = exit.code
print(json.dumps([code, stderr.getvalue()]))
"""


@pytest.mark.slow
def test_disk_full_on_a_shard_is_one_line_and_keeps_finished_shards(tmp_path, one_rank, capsys):
    import json
    import subprocess
    import sys

    from tests.embedding_output.sharding_helpers import MODEL_ARGS, environment

    # Two pieces of 64 lines: short sentences (a small shard), then long ones (a shard over the
    # file-size limit).
    lines = [f"w{index}" for index in range(64)] + [" ".join(["long"] * 20)] * 64
    input_file = write_lines(tmp_path / "in.txt", lines)
    output = tmp_path / "out.hdf5"
    args = ["--all", "--batch-size", "2", "--shard-tokens", "1"]
    argv = ["elmo", str(input_file), str(output), *args, *MODEL_ARGS]
    (tmp_path / ".allennlp_plugins").write_text("elmo_plugin\n", encoding="utf-8")
    env = environment(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(free_port()))
    child = subprocess.run(
        [sys.executable, "-c", DISK_FULL_CHILD, json.dumps([300_000, argv])],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    code, stderr = json.loads(child.stdout.strip().splitlines()[-1])
    assert code == 1
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    shards = Path(f"{output}.shards")
    assert len(errors) == 1, stderr[-2000:]
    # The shard's name ends with the run's fingerprint (16 hex digits).
    assert re.fullmatch(
        f"allennlp elmo: error: cannot write the shard {re.escape(str(shards))}/"
        r"lines-00000000064-00000000128\.[0-9a-f]{16}\.hdf5: File too large \(its partial "
        r"file was removed; the shards already finished are kept: make room and run the same "
        r"command again to resume\)",
        errors[0],
    ), errors[0]
    assert "Traceback" not in stderr
    assert not output.exists()
    [kept] = shards_of(output)
    assert kept.name.startswith("lines-00000000000-00000000064.")
    assert not list(shards.glob(".lines-*"))

    capsys.readouterr()
    assert run_elmo(input_file, output, *args) == 0
    assert "64 of them reused" in capsys.readouterr().out
    assert_same_output(plain_run(tmp_path, input_file, *args), output)


@pytest.mark.parametrize(
    "options",
    [
        ["--layout", "per-sentence", "--use-sentence-keys"],
        ["--layout", "per-sentence", "--include-sentence-indices", "--forget-sentences"],
        ["--layout", "flat", "--forget-sentences", "--float16"],
    ],
)
def test_one_rank_keeps_the_key_and_index_options(tmp_path, one_rank, options):
    lines = [f"{line} w{index}" for index, line in enumerate(corpus(90))]  # unique sentences
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = ["--average", "--batch-size", "2", "--shard-tokens", "100", *options]
    expected = plain_run(tmp_path, input_file, *args)
    output = tmp_path / "out.hdf5"
    assert run_elmo(input_file, output, *args) == 0
    assert_same_output(expected, output)
