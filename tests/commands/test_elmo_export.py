"""
``allennlp elmo-export`` with bad inputs and interruptions: every error is one line naming the
path, and the output directory always holds one whole export, the old one or the new one
(exporting is tested in tests/export/test_archive_to_bilm_tf.py and tests/model_files/bilm_tf/test_directory.py).
"""
import os
from pathlib import Path

import h5py
import pytest

from tests.helpers import REPO_ROOT, run_export

LEGACY_ARCHIVE = REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz"
EXPORT = ["options.json", "vocabulary.txt", "weights.hdf5"]



def _contents(directory: Path):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_an_existing_file_as_output_is_one_error_line_and_kept(tmp_path, capsys):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    assert run_export(LEGACY_ARCHIVE, a_file) == 1
    assert capsys.readouterr().err == (
        f"allennlp elmo-export: error: {a_file} exists and is not a directory\n"
    )
    assert a_file.read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_truncated_archive_is_one_error_line_naming_it(tmp_path, capsys):
    truncated = tmp_path / "model.tar.gz"
    truncated.write_bytes(LEGACY_ARCHIVE.read_bytes()[:20_000])
    assert run_export(truncated, tmp_path / "out") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith(
        f"allennlp elmo-export: error: {truncated}: the model archive is damaged or incomplete "
        "(EOFError"
    )
    assert not (tmp_path / "out").exists()


def test_exporting_again_without_the_softmax_leaves_no_stale_softmax(tmp_path, capsys):
    out = tmp_path / "out"
    assert run_export(LEGACY_ARCHIVE, out, "--include-softmax") == 0
    assert sorted(os.listdir(out)) == sorted(EXPORT + ["softmax.hdf5"])
    assert run_export(LEGACY_ARCHIVE, out) == 0
    assert sorted(os.listdir(out)) == EXPORT
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary directory left
    capsys.readouterr()


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, RuntimeError])
def test_an_export_stopped_between_files_leaves_the_old_set(
    tmp_path, capsys, monkeypatch, interruption
):
    out = tmp_path / "out"
    assert run_export(LEGACY_ARCHIVE, out, "--include-softmax", "--n-characters", "261") == 0
    before = _contents(out)
    capsys.readouterr()

    # Stopped after options.json and weights.hdf5 were written, while the softmax is written:
    # the new files must not end up next to the old ones.
    original_file = h5py.File

    def file_that_stops_at_the_softmax(name, *args, **kwargs):
        # hdf5_for_writing opens HDF5 through a file object that knows its path.
        if os.path.basename(getattr(name, "path", name)) == "softmax.hdf5":
            raise interruption("stopped")
        return original_file(name, *args, **kwargs)

    monkeypatch.setattr(h5py, "File", file_that_stops_at_the_softmax)
    if interruption is KeyboardInterrupt:
        assert run_export(LEGACY_ARCHIVE, out, "--include-softmax") == 130
        assert capsys.readouterr().err == (
            f"allennlp elmo-export: error: interrupted; {out} was left as it was.\n"
        )
    else:
        with pytest.raises(RuntimeError):
            run_export(LEGACY_ARCHIVE, out, "--include-softmax")
    assert _contents(out) == before  # options.json still says n_characters 261
    assert sorted(os.listdir(tmp_path)) == ["out"]
