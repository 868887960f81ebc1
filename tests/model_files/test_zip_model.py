"""
Models as the NLPL repository distributes them: a ZIP with ``options.json`` and ``model.hdf5``
(and ``vocab.txt``, ``meta.json``), given as the model wherever one is taken, and the folder it
unpacks to. Built here from the golden fixture, whose own files are the reference: the ZIP must
give exactly their vectors. Unpacked once into the cache, keyed by content, safely when several
processes ask at once; a ZIP that is not a model is one line naming what is wrong.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, Optional

import h5py
import numpy as np
import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.token_embedders import TokenEmbedder

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.resolve import resolve_model
from elmo_plugin.model_files.zip_model import CACHE_FOLDER, unpacked_zip_model
from elmo_plugin.modules.elmo import Elmo
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT, run_elmo, run_export, write_lines

pytestmark = pytest.mark.usefixtures("single_thread")

SENTENCES = [["The", "cat", "sat", "."], ["Hello", "!"], ["밥", "을", "먹었다"], []]
META = {"id": 999, "corpus": [{"description": "the golden fixture", "language": "eng"}]}


def nlpl_members() -> Dict[str, bytes]:
    return {
        "meta.json": json.dumps(META).encode("utf-8"),
        "model.hdf5": FIXTURE_WEIGHTS.read_bytes(),
        "options.json": FIXTURE_OPTIONS.read_bytes(),
        "vocab.txt": "<S>\n</S>\n<UNK>\nthe\ncat\n".encode("utf-8"),
    }


def write_zip(path: Path, members: Optional[Dict[str, bytes]] = None, folder: str = "") -> Path:
    """An NLPL-style ZIP of ``members`` (by default the fixture as NLPL names its files)."""
    members = nlpl_members() if members is None else members
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(folder + name, data)
    return path


def model_folders(cache_dir: Path):
    root = cache_dir / CACHE_FOLDER
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@pytest.fixture(scope="module")
def reference() -> list:
    return ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).embed_batch(SENTENCES)


def assert_identical(embedder: ElmoEmbedder, reference: list) -> None:
    for ours, theirs in zip(embedder.embed_batch(SENTENCES), reference, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_a_zip_and_its_unpacked_folder_give_the_vectors_of_their_files(tmp_path, cache_dir, reference):
    model = write_zip(tmp_path / "999.zip")
    assert_identical(ElmoEmbedder(model=str(model)), reference)
    assert_identical(ElmoEmbedder(model=model), reference)  # a Path too
    # The folder a user unpacked by hand: options.json + model.hdf5.
    folder = tmp_path / "999"
    with zipfile.ZipFile(model) as archive:
        archive.extractall(folder)
    assert_identical(ElmoEmbedder(model=str(folder)), reference)
    # A zipped folder, and a zipped elmo-export directory (weights.hdf5), load the same.
    nested = write_zip(tmp_path / "nested.zip", folder="999/")
    assert_identical(ElmoEmbedder(model=str(nested)), reference)
    members = nlpl_members()
    exported = write_zip(tmp_path / "export.zip", {"options.json": members["options.json"],
                                                   "weights.hdf5": members["model.hdf5"]})
    assert_identical(ElmoEmbedder(model=str(exported)), reference)

    # Elmo and elmo_token_embedder take it as model=.
    ids = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).elmo_bilm.character_ids.batch_to_ids(SENTENCES)
    expected = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 1, dropout=0.0).eval()(ids)
    actual = Elmo(model=str(model), dropout=0.0).eval()(ids)
    assert torch.equal(actual["elmo_representations"][0], expected["elmo_representations"][0])
    embedder = TokenEmbedder.from_params(
        Params({"type": "elmo_token_embedder", "model": str(model), "dropout": 0.0})
    ).eval()
    assert torch.equal(embedder(ids), expected["elmo_representations"][0])


def test_allennlp_elmo_with_a_zip(tmp_path, cache_dir):
    model = write_zip(tmp_path / "999.zip")
    sentences = write_lines(tmp_path / "in.txt", [" ".join(s) for s in SENTENCES[:3]])
    assert run_elmo(sentences, tmp_path / "zip.hdf5", "--all", "--model", model, model_files=False) == 0
    assert run_elmo(sentences, tmp_path / "files.hdf5", "--all") == 0
    with h5py.File(tmp_path / "zip.hdf5", "r") as ours, h5py.File(tmp_path / "files.hdf5", "r") as theirs:
        assert sorted(ours) == sorted(theirs)
        for key in theirs:
            np.testing.assert_array_equal(ours[key][()], theirs[key][()])


def test_onnx_export_loads_a_zip(tmp_path, cache_dir):
    from elmo_plugin.export.onnx_export import load_exported_module

    exported = load_exported_module(str(write_zip(tmp_path / "999.zip")))
    reference = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).elmo_bilm.state_dict()
    state = exported.bilm.state_dict()
    assert set(state) == set(reference)
    assert all(torch.equal(state[name], value) for name, value in reference.items())


def test_the_bilm_tf_export_of_a_zip_says_it_is_one_already(tmp_path, capsys):
    model = write_zip(tmp_path / "999.zip")
    assert run_export(model, tmp_path / "out") == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"allennlp elmo-export: error: {model} is a ZIP of a bilm-tf model already")
    assert not (tmp_path / "out").exists()


def test_unpacked_once_into_the_cache_keyed_by_content(tmp_path, cache_dir, caplog):
    model = write_zip(tmp_path / "999.zip")
    with caplog.at_level("INFO", logger="elmo_plugin.model_files.zip_model"):
        files = resolve_model(model)
        unpacked = Path(files.options_file).parent
        assert unpacked.parent == cache_dir / CACHE_FOLDER
        assert sorted(os.listdir(unpacked)) == ["meta.json", "model.hdf5", "options.json", "vocab.txt"]
        assert (unpacked / "model.hdf5").read_bytes() == FIXTURE_WEIGHTS.read_bytes()
        assert str(model) in files.description
        first = os.stat(unpacked / "model.hdf5")
        # Again, and a copy under another name in another place: the same unpacked files.
        copy = tmp_path / "elsewhere" / "renamed.zip"
        copy.parent.mkdir()
        shutil.copy(model, copy)
        os.utime(copy, (1, 1))
        assert resolve_model(model) == files
        assert resolve_model(copy).options_file == files.options_file
    unpacking = [r for r in caplog.records if r.getMessage().startswith("Unpacking")]
    assert len(unpacking) == 1
    assert os.stat(unpacked / "model.hdf5").st_mtime_ns == first.st_mtime_ns
    # Other content is another model.
    members = nlpl_members()
    members["meta.json"] = b"{}"
    other = resolve_model(write_zip(tmp_path / "other.zip", members))
    assert Path(other.options_file).parent != unpacked
    assert len(model_folders(cache_dir)) == 2
    # A folder whose files were removed by hand is unpacked again.
    (unpacked / "model.hdf5").unlink()
    assert Path(resolve_model(model).weight_file).read_bytes() == FIXTURE_WEIGHTS.read_bytes()


# Each process imports, says it is ready, waits for the start file, then unpacks. Separate
# interpreters, not forks of this one: a fork of a test process that has run threads of its own
# (a Ray driver's) can deadlock in the child (docs/implementation.md, "Sentence vectors and the Ray engine").
_UNPACK_WHEN_TOLD = """
import os, sys, time
from elmo_plugin.model_files.zip_model import unpacked_zip_model
path, cache_dir, ready, start = sys.argv[1:]
open(ready, "w").close()
while not os.path.exists(start):
    time.sleep(0.005)
print(unpacked_zip_model(path, cache_dir))
"""


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_processes_asking_at_once_unpack_it_once(tmp_path, cache_dir):
    model = write_zip(tmp_path / "999.zip")
    start = tmp_path / "start"
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _UNPACK_WHEN_TOLD, str(model), str(cache_dir), str(tmp_path / f"ready{n}"),
             str(start)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
        )
        for n in range(3)
    ]
    try:
        deadline = time.monotonic() + 300
        while not all((tmp_path / f"ready{n}").exists() for n in range(3)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes), [
                p.communicate()[1][-2000:] for p in processes if p.poll() is not None
            ]
            time.sleep(0.01)
        start.touch()
        outputs = [p.communicate(timeout=300) for p in processes]
    finally:
        for p in processes:
            p.kill()
    assert [p.returncode for p in processes] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    folders = [out.strip() for out, _ in outputs]
    assert len(set(folders)) == 1
    assert model_folders(cache_dir) == [os.path.basename(folders[0])]
    leftovers = [name for name in os.listdir(cache_dir / CACHE_FOLDER) if name.endswith(".tmp")]
    assert leftovers == []
    assert (Path(folders[0]) / "model.hdf5").read_bytes() == FIXTURE_WEIGHTS.read_bytes()


def test_an_interrupted_unpacking_leaves_nothing_that_is_used(tmp_path, cache_dir, monkeypatch):
    import elmo_plugin.model_files.zip_model as zip_model

    model = write_zip(tmp_path / "999.zip")

    def interrupted(path, kind):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(zip_model, "file_problem", interrupted)
        resolve_model(model)
    assert model_folders(cache_dir) == []
    # What a killed process leaves (its temporary folder) is removed by the next one.
    folder = unpacked_zip_model(str(model), str(cache_dir))
    shutil.rmtree(folder)
    stale = Path(folder + ".12345.tmp")
    stale.mkdir()
    (stale / "model.hdf5").write_bytes(b"half")
    assert resolve_model(model).options_file == os.path.join(folder, "options.json")
    assert not stale.exists()


def corrupt(members: Dict[str, bytes], **changes: Optional[bytes]) -> Dict[str, bytes]:
    members = dict(members)
    for name, data in changes.items():
        name = name.replace("_", ".")
        if data is None:
            del members[name]
        else:
            members[name] = data
    return members


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"options_json": None}, "is not an ELMo model ZIP: it has no options.json (it holds meta.json, "
                                 "model.hdf5, vocab.txt); an NLPL ELMo ZIP holds options.json and model.hdf5"),
        ({"model_hdf5": None}, "is not an ELMo model ZIP: it has no model.hdf5 (it holds meta.json, "
                               "options.json, vocab.txt)"),
        ({"model_hdf5": None, "options_json": None}, "it has no options.json and no model.hdf5"),
        ({"model_hdf5": b"<html>Not found</html>"}, ": its model.hdf5 is not a bilm-tf weight file: the "
                                                     "server sent an HTML or XML page"),
        ({"model_hdf5": b"\x00" * 64}, ": its model.hdf5 is not a bilm-tf weight file: not an HDF5 file (64 bytes)"),
        ({"options_json": b"{\"lstm\": {}}"}, ": its options.json is not a bilm-tf options file: it is JSON but "
                                              "not ELMo options"),
    ],
)
def test_a_zip_that_is_not_a_model_is_one_line_naming_what_is_wrong(tmp_path, cache_dir, changes, expected):
    model = write_zip(tmp_path / "bad.zip", corrupt(nlpl_members(), **changes))
    with pytest.raises(ConfigurationError) as info:
        ElmoEmbedder(model=str(model))
    message = str(info.value)
    assert message.startswith(str(model)) and expected in message and "\n" not in message
    # Nothing of it in the cache: no model, no temporary folder.
    unpacked = cache_dir / CACHE_FOLDER
    leftovers = [n for n in os.listdir(unpacked) if not n.endswith(".lock")] if unpacked.exists() else []
    assert leftovers == []


def test_an_elmoformanylangs_zip_is_named_as_one(tmp_path, cache_dir):
    from tests.documentation.shell_sandbox import elmoformanylangs_zip

    elmoformanylangs_zip(tmp_path / "161.zip")
    with pytest.raises(ConfigurationError, match=r"161.zip is not an ELMo model ZIP: it has no options.json "
                       r"and no model.hdf5 \(it holds .*\); an ELMoForManyLangs model's ZIP: unpack it"):
        resolve_model(tmp_path / "161.zip")


def test_a_damaged_zip_is_one_line(tmp_path, cache_dir):
    whole = write_zip(tmp_path / "whole.zip").read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ConfigurationError, match=r"cut.zip: the ZIP archive is damaged or incomplete \(") as info:
        resolve_model(cut)
    assert "\n" not in str(info.value)
    # A member whose bytes changed after zipping (its CRC-32 no longer matches).
    model = write_zip(tmp_path / "flipped.zip")
    data = bytearray(model.read_bytes())
    offset = data.index(b"options.json") + len("options.json")  # the first member's data
    data[offset + 4] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(ConfigurationError, match="flipped.zip: the ZIP archive is damaged"):
        resolve_model(model)
    assert model_folders(cache_dir) == []


def test_the_command_reports_a_bad_zip_on_one_line(tmp_path, cache_dir, capsys):
    model = write_zip(tmp_path / "bad.zip", corrupt(nlpl_members(), model_hdf5=None))
    sentences = write_lines(tmp_path / "in.txt", ["a b"])
    assert run_elmo(sentences, tmp_path / "out.hdf5", "--top", "--model", model, model_files=False) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"allennlp elmo: error: {model} is not an ELMo model ZIP: it has no model.hdf5")
    assert sorted(os.listdir(tmp_path)) == ["bad.zip", "in.txt"]


def test_a_zip_by_url_is_downloaded_once_and_unpacked(tmp_path, cache_dir, model_server, reference):
    model_server.files["/repository/20/999.zip"] = write_zip(tmp_path / "999.zip").read_bytes()
    url = f"{model_server.url}/repository/20/999.zip"
    assert_identical(ElmoEmbedder(model=url), reference)
    assert model_server.gets().count("/repository/20/999.zip") == 1
    assert resolve_model(url).options_file == resolve_model(tmp_path / "999.zip").options_file
    assert model_server.gets().count("/repository/20/999.zip") == 1
    model_server.files["/repository/20/page.zip"] = b"<html>moved</html>"
    with pytest.raises(ConfigurationError, match="page.zip did not give a ZIP archive: the server sent an HTML"):
        resolve_model(f"{model_server.url}/repository/20/page.zip")
