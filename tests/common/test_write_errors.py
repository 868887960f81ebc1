"""
A full disk or a file-size limit while a command writes its output: one line naming the file and
the operating system's error, exit 1, no temporary file left, the earlier output unchanged, no
crash. The limit is real: ``RLIMIT_FSIZE`` (``ulimit -f``) with SIGXFSZ ignored, set in a child
process that runs the four commands through AllenNLP's own ``main`` (one interpreter start for
all of them).
"""
import io
import json
import os
import subprocess
import sys
import tarfile

import h5py
import numpy as np
import pytest

from elmo_plugin.common.write_errors import hdf5_for_writing
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT

LEGACY_ARCHIVE = REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz"

CHILD = r"""
import contextlib, io, json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from allennlp.commands import main
cases = json.loads(sys.argv[1])
results = {}
for name, limit, argv in cases:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    sys.argv = ["allennlp"] + argv
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(prog="allennlp")
            code = 0
        except SystemExit as exit:
            code = exit.code
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    results[name] = [code, stderr.getvalue()]
print(json.dumps(results))
"""


def _error_lines(stderr: str):
    return [line for line in stderr.splitlines() if "error" in line.lower()]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs RLIMIT_FSIZE (POSIX)")
@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_every_command_reports_a_write_that_does_not_fit_on_one_line(tmp_path):
    (tmp_path / ".allennlp_plugins").write_text("elmo_plugin\n", encoding="utf-8")
    sentences = tmp_path / "sentences.txt"
    sentences.write_text(
        "".join(f"the cat number {i} sat on the mat .\n" for i in range(300)), encoding="utf-8"
    )
    korean = tmp_path / "raw"
    korean.mkdir()
    (korean / "ko.txt").write_text(
        "".join(f"안녕하세요 반갑습니다 {i}\n" for i in range(3000)), encoding="utf-8"
    )
    run = tmp_path / "run"  # a serialization directory (the archive unpacked, best.th)
    with tarfile.open(LEGACY_ARCHIVE) as archive:
        archive.extractall(run, filter="data")
    (run / "best.th").write_bytes((run / "weights.th").read_bytes())

    # Earlier outputs that a failed run must leave as they were.
    earlier_hdf5 = tmp_path / "embeddings.hdf5"
    earlier_hdf5.write_bytes(b"earlier embeddings")
    earlier_vocabulary = tmp_path / "vocabulary.txt"
    earlier_vocabulary.write_text("<S>\n</S>\n<UNK>\nearlier\n", encoding="utf-8")
    earlier_export = tmp_path / "bilm"
    earlier_export.mkdir()
    (earlier_export / "options.json").write_text("{}", encoding="utf-8")

    cases = [
        ["elmo", 20_000, ["elmo", str(sentences), str(earlier_hdf5), "--all", "--overwrite",
                          "--options-file", str(FIXTURE_OPTIONS),
                          "--weight-file", str(FIXTURE_WEIGHTS)]],
        ["elmo-vocab", 1_000, ["elmo-vocab", str(sentences), str(earlier_vocabulary),
                               "--no-progress"]],
        ["elmo-tokenize", 5_000, ["elmo-tokenize", str(korean / "*.txt"), str(tmp_path / "tokens"),
                                  "--workers", "1", "--no-progress"]],
        ["elmo-export", 30_000, ["elmo-export", str(run), str(earlier_export)]],
    ]
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cases)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]  # no crash (it was a segfault, 139)
    results = json.loads(child.stdout.strip().splitlines()[-1])

    expected_files = {
        "elmo": earlier_hdf5,
        "elmo-vocab": earlier_vocabulary,
        "elmo-tokenize": tmp_path / "tokens" / "ko.txt",
        "elmo-export": earlier_export / "weights.hdf5",
    }
    for name, (code, stderr) in results.items():
        errors = _error_lines(stderr)
        assert code == 1, (name, stderr[-2000:])
        assert "Traceback" not in stderr, (name, stderr[-2000:])
        assert errors == [
            f"allennlp {name}: error: cannot write {expected_files[name]}: File too large (EFBIG); "
            + errors[0].split("(EFBIG); ", 1)[1]
        ], (name, stderr)
    # The earlier outputs are unchanged, and no temporary file is left anywhere.
    assert earlier_hdf5.read_bytes() == b"earlier embeddings"
    assert earlier_vocabulary.read_text(encoding="utf-8") == "<S>\n</S>\n<UNK>\nearlier\n"
    assert sorted(os.listdir(earlier_export)) == ["options.json"]
    assert not (tmp_path / "tokens" / "ko.txt").exists()
    leftovers = [path for path in tmp_path.rglob("*") if path.name.endswith((".tmp", ".old"))]
    assert leftovers == []


def test_hdf5_for_writing_writes_what_h5py_writes(tmp_path):
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b/c": np.ones(5)}
    with hdf5_for_writing(str(tmp_path / "x.hdf5")) as output:
        for name, value in arrays.items():
            output.file.create_dataset(name, data=value)
    with h5py.File(tmp_path / "x.hdf5", "r") as written:
        for name, value in arrays.items():
            np.testing.assert_array_equal(written[name][()], value)


def test_hdf5_for_writing_raises_the_first_os_error_with_the_file_name(tmp_path, monkeypatch):
    path = str(tmp_path / "x.hdf5")
    calls = {"n": 0}
    real_write = io.FileIO.write

    class FullDisk(io.FileIO):
        def write(self, data):
            calls["n"] += 1
            if calls["n"] > 3:
                raise OSError(28, "No space left on device")
            return real_write(self, data)

    monkeypatch.setattr(
        "elmo_plugin.common.write_errors.open", lambda p, m, buffering: FullDisk(p, "w+b"), raising=False
    )
    with pytest.raises(OSError) as raised:
        with hdf5_for_writing(path) as output:
            for index in range(50):
                output.file.create_dataset(str(index), data=np.zeros((100, 100)))
                output.file.flush()
    assert raised.value.errno == 28 and raised.value.filename == path
