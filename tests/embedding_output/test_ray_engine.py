"""
``allennlp elmo ... --ray``: the Parquet rows equal a single process's HDF5 vectors (to the bit
where the batches are the same, within 1e-6 in any case), every sentence once, read back by
`ParquetEmbeddings` and `read_embeddings`; a worker that dies mid-job is restarted and the job
completes; what is checked before Ray starts (a bad input line, an existing output, options a
Ray job cannot take); and that nothing imports ray without --ray. The runs on a Ray cluster
(started on this machine, a few seconds to a minute on a busy 2-core machine) are slow, each in a
pytest of its own (the Ray driver's threads stay with it); the callable class itself is tested
without Ray.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elmo_plugin import ElmoEmbedder, EmbeddingsFile
from elmo_plugin.embedding_output import ray_engine
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.parquet_reader import ParquetEmbeddings
from elmo_plugin.embedding_output.reader import read_embeddings
from tests.embedding_output.sharding_helpers import corpus
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    in_a_process_of_its_own,
    run_elmo,
    write_lines,
)

pytestmark = pytest.mark.usefixtures("single_thread")

MODEL = {"options_file": str(FIXTURE_OPTIONS), "weight_file": str(FIXTURE_WEIGHTS)}


def hdf5_run(tmp_path: Path, input_file: Path, *args) -> Path:
    output = tmp_path / "single.hdf5"
    assert run_elmo(input_file, output, *args) == 0
    return output


def write_like_ray(job: EmbeddingJob, folder: Path, lines) -> None:
    """What run_ray writes, without Ray: the callable class on each chunk, pyarrow's writer."""
    import pyarrow.parquet

    embedder = ray_engine.ElmoRayEmbedder(job, ElmoEmbedder.for_job)
    folder.mkdir()
    for number, chunk in enumerate(ray_engine.input_chunks(job)):
        rows = ray_engine.chunk_rows(chunk, job.input_path)
        batch = {
            "sentence_index": np.array([row["sentence_index"] for row in rows]),
            "text": np.array([row["text"] for row in rows], dtype=object),
        }
        pyarrow.parquet.write_table(embedder(batch), folder / f"part-{number}.parquet")
    metadata = {
        "output_format": job.output_format, "columns": embedder.columns, "dim": embedder.dim,
        "num_sentences": len(lines), "sentence_vectors": job.sentence_vectors,
        "float16": job.float16,
    }
    (folder / ray_engine.METADATA_FILE).write_text(json.dumps(metadata))


@pytest.mark.parametrize(
    "output_format, flags",
    [("all", []), ("top", ["--float16"]), ("average", ["--sentence-vectors"]),
     ("all", ["--sentence-vectors"])],
)
def test_the_callable_class_gives_a_single_process_vectors(tmp_path, output_format, flags):
    # 150 lines in chunks of 4 x 8 = 32: each Ray batch is a chunk, so its batches are a single
    # process's, and the vectors the same up to the thread count's rounding (below).
    lines = corpus(150, seed=9)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = [f"--{output_format}", "--batch-size", "4", *flags]
    expected = hdf5_run(tmp_path, input_file, *args)
    job = EmbeddingJob(
        str(input_file), str(tmp_path / "out.parquet"), output_format=output_format,
        batch_size=4, sort_chunk_batches=8, float16="--float16" in flags,
        sentence_vectors="--sentence-vectors" in flags, **MODEL,
    ).checked()
    assert len(ray_engine.input_chunks(job)) == 5
    folder = tmp_path / "out.parquet"
    write_like_ray(job, folder, lines)
    with EmbeddingsFile(expected) as single, ParquetEmbeddings(folder) as parquet:
        assert len(parquet) == len(lines) and parquet.sentences() == lines
        assert parquet.sentence_vectors == ("--sentence-vectors" in flags)
        for index in range(len(lines)):
            # The command and this process may run on different thread counts, whose float32 sums
            # differ in the last bits; a float16 output then differs by at most one float16 step.
            if single[index].dtype == np.float16:
                np.testing.assert_array_max_ulp(parquet[index], single[index], maxulp=1)
            else:
                np.testing.assert_allclose(parquet[index], single[index], rtol=0, atol=1e-6)
            assert parquet[index].dtype == single[index].dtype
    np.testing.assert_array_equal(read_embeddings(folder, 7), read_embeddings(expected, 7))


def test_the_same_batches_give_the_same_bits(tmp_path):
    lines = corpus(100, seed=2)
    input_file = write_lines(tmp_path / "in.txt", lines)
    job = EmbeddingJob(str(input_file), str(tmp_path / "out.parquet"), output_format="top",
                       batch_size=5, sort_chunk_batches=4, **MODEL).checked()
    single = tmp_path / "single.hdf5"
    ElmoEmbedder.for_job(job).embed_file(
        input_file, single, "top", batch_size=5, sort_chunk_batches=4, progress=False
    )
    write_like_ray(job, tmp_path / "out.parquet", lines)
    with EmbeddingsFile(single) as left, ParquetEmbeddings(tmp_path / "out.parquet") as right:
        for index in range(len(lines)):
            np.testing.assert_array_equal(left[index], right[index])


def test_a_users_batch_of_tokens_without_indices(tmp_path):
    job = EmbeddingJob("", "", output_format="average", sentence_vectors=True, **MODEL)
    embedder = ray_engine.ElmoRayEmbedder(job, ElmoEmbedder.for_job)
    sentences = [["The", "cat", "sat", "."], ["Hello", "!"]]
    table = embedder({"tokens": np.array(sentences, dtype=object)})
    assert table.column_names == ["tokens", "average"]
    assert table.column("tokens").to_pylist() == sentences
    reference = ElmoEmbedder(**MODEL).embed_sentence_vectors(sentences, "average")
    got = np.array(table.column("average").to_pylist(), dtype=np.float32)
    np.testing.assert_allclose(got, np.stack(reference), atol=1e-6)
    with pytest.raises(Exception, match="needs a 'text' or a 'tokens' column"):
        embedder({"words": np.array(["a"])})


@pytest.fixture
def no_ray_started(monkeypatch):
    def refuse(*args):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray_engine, "connect", refuse)


def test_a_bad_line_stops_the_job_before_ray_starts(tmp_path, capsys, no_ray_started):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "", "c"])
    output = tmp_path / "out.parquet"
    assert run_elmo(input_file, output, "--top", "--ray", "local") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{input_file}" in err and "line(s) 2" in err
    assert not output.exists()


def test_an_existing_output_is_refused_as_without_ray(tmp_path, capsys, no_ray_started):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c"])
    output = tmp_path / "out.parquet"
    output.mkdir()
    (output / "mine.txt").write_text("keep")
    assert run_elmo(input_file, output, "--top", "--ray", "local") == 2
    assert capsys.readouterr().err == (
        f"allennlp elmo: error: {output} exists; --overwrite replaces it (once the new file is "
        "complete), or choose another output file\n"
    )
    assert (output / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize(
    "flags, what",
    [(["--stateful"], "stateful"), (["--layout", "flat"], "layout"),
     (["--use-sentence-keys"], "use_sentence_keys"), (["--forget-sentences"], "forget_sentences")],
)
def test_what_a_ray_job_cannot_take(tmp_path, capsys, no_ray_started, flags, what):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c"])
    assert run_elmo(input_file, tmp_path / "out.parquet", "--top", "--ray", "local", *flags) == 1
    assert f"a Ray job takes no {what}" in capsys.readouterr().err


def test_ray_workers_without_ray_is_an_error(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c"])
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--ray-workers", "2") == 1
    assert "ray_workers is for a Ray job" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()


def test_nothing_imports_ray_without_the_option(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c"])
    script = (
        "import sys, elmo_plugin\n"
        "from tests.helpers import run_elmo\n"
        f"assert run_elmo({str(input_file)!r}, {str(tmp_path / 'out.hdf5')!r}, '--top') == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'ray')\n"
        "assert not loaded, loaded\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]


# --- on a Ray cluster started here --------------------------------------------------------


@pytest.mark.slow
@in_a_process_of_its_own
def test_ray_local_writes_every_sentence_once_as_a_single_process(tmp_path, capsys):
    # 2,000 sentences in chunks of 2 x 32 lines: 32 Ray batches for 2 workers.
    lines = corpus(2000, seed=11)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = ["--top", "--batch-size", "2"]
    expected = hdf5_run(tmp_path, input_file, *args)
    output = tmp_path / "out.parquet"
    assert run_elmo(input_file, output, *args, "--ray", "local", "--ray-workers", "2") == 0
    assert "2000 sentences, Parquet, by 2 Ray workers" in capsys.readouterr().out
    import pyarrow.parquet

    indices = pyarrow.parquet.read_table(output, columns=["sentence_index"]).column(0)
    assert sorted(indices.to_pylist()) == list(range(2000))
    with EmbeddingsFile(expected) as single, ParquetEmbeddings(output) as parquet:
        assert parquet.sentences() == lines
        for index in range(len(lines)):
            np.testing.assert_allclose(parquet[index], single[index], rtol=0, atol=1e-6)
    # Again: refused without --overwrite, replaced with it.
    assert run_elmo(input_file, output, *args, "--ray", "local") == 2
    assert run_elmo(
        input_file, output, "--all", "--sentence-vectors", "--ray", "local", "--overwrite"
    ) == 0
    with ParquetEmbeddings(output) as parquet:
        assert parquet.sentence_vectors and parquet[0].shape == (3, 32)


class DyingOnce:
    """An embedder factory whose first embedder kills its worker process at its first batch
    (a marker file says it happened), as a kill -9 or the kernel's OOM killer would."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __call__(self, job: EmbeddingJob):
        embedder = ElmoEmbedder.for_job(job)
        marker = self.marker
        embed_arrays = embedder.embed_arrays

        def dying(batch, output_format):
            if not os.path.exists(marker):
                Path(marker).write_text(str(os.getpid()))
                os._exit(9)
            return embed_arrays(batch, output_format)

        embedder.embed_arrays = dying  # type: ignore[method-assign]
        return embedder


@pytest.mark.slow
@in_a_process_of_its_own
def test_a_killed_worker_is_restarted_and_the_job_completes(tmp_path):
    lines = corpus(300, seed=12)
    input_file = write_lines(tmp_path / "in.txt", lines)
    output = tmp_path / "out.parquet"
    job = EmbeddingJob(str(input_file), str(output), output_format="top", batch_size=2,
                       sort_chunk_batches=16, ray_address="local", ray_workers=2,
                       **MODEL).checked()
    marker = tmp_path / "killed"
    assert ray_engine.run_ray(job, DyingOnce(str(marker)), progress=False) == 300
    assert marker.exists()  # a worker did die
    expected = hdf5_run(tmp_path, input_file, "--top", "--batch-size", "2")
    with EmbeddingsFile(expected) as single, ParquetEmbeddings(output) as parquet:
        assert len(parquet) == 300 and parquet.sentences() == lines
        for index in range(len(lines)):
            np.testing.assert_allclose(parquet[index], single[index], rtol=0, atol=1e-6)
