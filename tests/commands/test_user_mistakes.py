"""
A user's mistakes on the command line, each as one line and no traceback (issue 37):

- a mistyped flag of the plugin's subcommands gets that subcommand's usage and "did you mean",
  and long options are not prefix-matched (``--al`` is not ``--all``);
- ``allennlp elmo`` with --options-file and --weight-file swapped names the mix-up;
- ``allennlp train`` with the plugin: a missing biLM, missing task data, a jsonnet error, a
  missing config, a wrong GPU are one line ``allennlp train: error: ...``, exit 1, before the
  serialization directory is made; an error found only as training starts removes the
  directory the run made.

The ``allennlp`` command runs in-process here (its ``main``, with its own argument parsing), as
the command line runs it: the one-line report is for the command, Python callers get the
exception.
"""
import json
import sys
from pathlib import Path
from typing import List, Tuple

import h5py
import numpy as np
import pytest
from allennlp.commands import main as allennlp_main
from allennlp.commands.train import train_model_from_file
from allennlp.common.checks import ConfigurationError

from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT, write_lines
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")

TASKS = REPO_ROOT / "training_configs" / "tasks"


def run_allennlp(arguments: List[str], capsys, monkeypatch) -> Tuple[int, str, str]:
    """``allennlp ARGUMENTS`` in-process: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["allennlp"] + [str(a) for a in arguments])
    capsys.readouterr()
    try:
        allennlp_main(prog="allennlp")
        status = 0
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


# -- flags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, arguments, typo, meant",
    [
        ("elmo", ["in.txt", "out.hdf5", "--all"], ["--modle", "demo_output/run/bilm"], "--model"),
        ("elmo", ["in.txt", "out.hdf5", "--all"], ["--batch-szie", "8"], "--batch-size"),
        ("elmo-vocab", ["c.txt", "v.txt"], ["--min-conut", "2"], "--min-count"),
        ("elmo-export", ["run", "out"], ["--include-softmx"], "--include-softmax"),
        ("elmo-tokenize", ["in", "out"], ["--tokenzier", "kiwi"], "--tokenizer"),
    ],
)
def test_a_mistyped_flag_gets_the_subcommands_usage_and_a_suggestion(
    command, arguments, typo, meant, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_allennlp([command] + arguments + typo, capsys, monkeypatch)
    assert status == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"usage: allennlp {command} ")
    assert lines[-1] == (
        f"allennlp {command}: error: unrecognized arguments: {typo[0]} (did you mean {meant}?)"
    )
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_long_options_are_not_prefix_matched(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_allennlp(["elmo", "in.txt", "out.hdf5", "--al"], capsys, monkeypatch)
    assert status == 2
    assert err.strip().splitlines()[-1] == (
        "allennlp elmo: error: unrecognized arguments: --al (did you mean --all?)"
    )


def test_an_extra_argument_is_the_subcommands_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_allennlp(["elmo", "a", "b", "c", "--all"], capsys, monkeypatch)
    assert status == 2
    assert err.startswith("usage: allennlp elmo ")
    assert err.strip().splitlines()[-1] == "allennlp elmo: error: unrecognized arguments: c"


# -- swapped model files ---------------------------------------------------------------------------


def test_swapped_options_and_weight_files_are_named(tmp_path, capsys, monkeypatch):
    input_file = write_lines(tmp_path / "in.txt", ["a b c"])
    status, _, err = run_allennlp(
        ["elmo", input_file, tmp_path / "out.hdf5", "--all",
         "--options-file", FIXTURE_WEIGHTS, "--weight-file", FIXTURE_OPTIONS],
        capsys, monkeypatch,
    )
    assert status == 1
    assert err.strip().splitlines()[-1] == (
        f"allennlp elmo: error: {FIXTURE_WEIGHTS} is not an options.json: this looks like an HDF5 "
        "weight file; did you swap --options-file and --weight-file?"
    )
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_an_hdf5_file_given_as_the_input_asks_whether_they_were_swapped(tmp_path, capsys, monkeypatch):
    # allennlp elmo out.hdf5 in.txt: the sentences would be overwritten.
    sentences = write_lines(tmp_path / "in.txt", ["a b c"])
    embeddings = tmp_path / "out.hdf5"
    with h5py.File(embeddings, "w") as written:
        written["0"] = np.zeros((3, 3, 32), dtype=np.float32)
    status, _, err = run_allennlp(
        ["elmo", embeddings, sentences, "--all",
         "--options-file", FIXTURE_OPTIONS, "--weight-file", FIXTURE_WEIGHTS],
        capsys, monkeypatch,
    )
    assert status == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"allennlp elmo: error: {embeddings} is an HDF5 file, not a text file of sentences: did "
        "you swap the input and the output? (the sentences come first, the HDF5 file to write "
        "second)"
    )
    assert sentences.read_text(encoding="utf-8") == "a b c\n"


def test_swapped_files_from_python_name_pythons_arguments():
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    with pytest.raises(ConfigurationError) as raised:
        ElmoEmbedder(options_file=str(FIXTURE_WEIGHTS), weight_file=str(FIXTURE_OPTIONS))
    assert str(raised.value).endswith("did you swap options_file and weight_file?")


def test_an_options_file_that_is_not_text_is_named(tmp_path):
    from elmo_plugin.model_files.bilm_tf.options import BilmOptions

    binary = tmp_path / "options.json"
    binary.write_bytes(b"\x00\x01\xff\xfe")
    with pytest.raises(ConfigurationError, match=rf"^{binary}: not an options.json \(not UTF-8"):
        BilmOptions.from_file(binary)


# -- allennlp train ------------------------------------------------------------------------------


def assert_one_line(status: int, err: str, expected_start: str) -> None:
    assert status == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"allennlp train: error: {expected_start}"), lines[0]


def test_an_elmo_config_without_its_bilm(tmp_path, capsys, monkeypatch):
    # The repository's default biLM path, in a checkout where make pretrain-small has not run.
    missing = tmp_path / "checkout" / "build" / "en_small" / "bilm"
    config = tmp_path / "config.jsonnet"
    config.write_text(
        f'local common = import "{TASKS}/task_common.libsonnet";\n'
        f'(import "{TASKS}/ner_wikiann.libsonnet")(use_elmo=true,\n'
        f'  elmo=common.english_elmo + {{options_file: "{missing}/options.json",'
        f' weight_file: "{missing}/weights.hdf5"}})\n',
        encoding="utf-8",
    )
    status, _, err = run_allennlp(
        ["train", config, "-s", tmp_path / "run"], capsys, monkeypatch
    )
    assert_one_line(status, err, f"{config}: options file not found: {missing}/options.json")
    assert "run `make pretrain-small` in the repository first" in err
    assert not (tmp_path / "run").exists()


def wikiann_data(root: Path) -> Path:
    """The task data ner_wikiann.libsonnet names, under ``root`` (one sentence each), so that the
    checks after the data's reach the mistake under test without ../shared."""
    (root / "en" / "ner" / "wikiann").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        write_lines(root / "en" / "ner" / "wikiann" / f"{split}.txt", ["Paris B-LOC", ""])
    return root


def test_a_missing_elmo_weight_file_with_an_explicit_width(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.jsonnet"
    config.write_text(
        f'(import "{TASKS}/ner_wikiann.libsonnet")(use_elmo=true, '
        f'data_root="{wikiann_data(tmp_path / "data")}", elmo={{'
        f'options_file: "{FIXTURE_OPTIONS}", weight_file: "{tmp_path}/nope.hdf5"}})\n',
        encoding="utf-8",
    )
    status, _, err = run_allennlp(["train", config, "-s", tmp_path / "run"], capsys, monkeypatch)
    assert_one_line(status, err, f"ELMo weight_file {tmp_path}/nope.hdf5 does not exist")
    assert not (tmp_path / "run").exists()


def test_a_typo_in_the_elmo_object_names_the_key_and_the_keys_it_takes(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.jsonnet"
    config.write_text(
        f'(import "{TASKS}/ner_wikiann.libsonnet")(use_elmo=true, '
        f'data_root="{wikiann_data(tmp_path / "data")}", elmo={{ modle: "small" }})\n',
        encoding="utf-8",
    )
    status, _, err = run_allennlp(["train", config, "-s", tmp_path / "run"], capsys, monkeypatch)
    assert_one_line(
        status, err,
        f"{config}: elmo has the unknown key(s) `modle`; it takes `model`, `options_file`, "
        "`weight_file`, `output_dim`, `max_characters_per_token`, `do_layer_norm`",
    )
    assert not (tmp_path / "run").exists()


def test_a_jsonnet_error_of_several_lines_is_kept_whole(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.jsonnet"
    config.write_text(
        'local elmo = { model: "a", extra: [1, 2] };\n'
        '{ model: error "elmo is wrong: got " + std.manifestJson(elmo) + "\\nsee docs/tasks.md" }\n',
        encoding="utf-8",
    )
    status, _, err = run_allennlp(["train", config, "-s", tmp_path / "run"], capsys, monkeypatch)
    # The message of three lines (the object shown over several), joined; the stack trace left out.
    assert_one_line(
        status, err,
        f'{config}: elmo is wrong: got {{ "extra": [ 1, 2 ], "model": "a" }} see docs/tasks.md',
    )
    assert err.strip().endswith("see docs/tasks.md")


def test_missing_task_data(tmp_path, capsys, monkeypatch):
    config = TASKS / "pos_ewt.jsonnet"
    status, _, err = run_allennlp(
        ["train", config, "-s", tmp_path / "run",
         "-o", json.dumps({"train_data_path": f"{tmp_path}/data/en/pos/en_ewt-ud-train.conllu"})],
        capsys, monkeypatch,
    )
    assert_one_line(
        status, err,
        f"train_data_path: the data file {tmp_path}/data/en/pos/en_ewt-ud-train.conllu does not exist",
    )
    assert "UD_English-EWT" in err
    assert not (tmp_path / "run").exists()


def test_missing_data_read_in_part_names_the_file(tmp_path, capsys, monkeypatch):
    # klue_ner reads "train.tsv[:90%]": the file named is train.tsv.
    config = tmp_path / "c.jsonnet"
    config.write_text(
        f'(import "{TASKS}/klue_ner.libsonnet")(use_elmo=false, data_root="{tmp_path}/data")\n',
        encoding="utf-8",
    )
    status, _, err = run_allennlp(["train", config, "-s", tmp_path / "run"], capsys, monkeypatch)
    assert_one_line(
        status, err,
        f"train_data_path: the data file {tmp_path}/data/ko/ner/klue/original/train.tsv does not exist",
    )
    assert "KLUE-NER" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"trainer.num_epochs": 0}, "{config}: num_epochs must be an integer >= 1, got 0"),
        ({"train_data_path": "{tmp}/corpus/*.txt"}, "train_data_path: no files match"),
        (
            {"vocabulary.vocabulary_file": "{tmp}/vocab.txt"},
            "vocabulary.vocabulary_file {tmp}/vocab.txt does not exist",
        ),
    ],
)
def test_bilm_config_mistakes(overrides, expected, tmp_path, capsys, monkeypatch):
    config = REPO_ROOT / "training_configs" / "bilm.jsonnet"
    if "trainer.num_epochs" in overrides:
        # A config argument: asserted by bilm_common.libsonnet when the config is read.
        config = tmp_path / "c.jsonnet"
        config.write_text(
            f'(import "{REPO_ROOT}/training_configs/bilm.jsonnet")(num_epochs=0)\n', encoding="utf-8"
        )
        overrides = {}
    overrides = {k: v.replace("{tmp}", str(tmp_path)) for k, v in overrides.items()}
    arguments = ["train", config, "-s", tmp_path / "run"]
    if overrides:
        arguments += ["-o", json.dumps(overrides)]
    status, _, err = run_allennlp(arguments, capsys, monkeypatch)
    assert_one_line(status, err, expected.replace("{config}", str(config)).replace("{tmp}", str(tmp_path)))
    assert not (tmp_path / "run").exists()


def test_a_missing_config_and_bad_overrides(tmp_path, capsys, monkeypatch):
    status, _, err = run_allennlp(
        ["train", tmp_path / "nope.jsonnet", "-s", tmp_path / "run"], capsys, monkeypatch
    )
    assert_one_line(status, err, f"the config file {tmp_path}/nope.jsonnet does not exist")
    status, _, err = run_allennlp(
        ["train", REPO_ROOT / "training_configs" / "bilm.jsonnet", "-s", tmp_path / "run",
         "-o", "{trainer.num_epochs: }"],
        capsys, monkeypatch,
    )
    assert_one_line(status, err, "-o {trainer.num_epochs: }: not a JSON (or jsonnet) object")
    assert not (tmp_path / "run").exists()


def test_an_existing_run_directory_is_one_line_and_kept(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("mine", encoding="utf-8")
    status, _, err = run_allennlp(
        ["train", REPO_ROOT / "training_configs" / "bilm.jsonnet", "-s", run], capsys, monkeypatch
    )
    assert_one_line(status, err, f"Serialization directory ({run}) already exists")
    assert (run / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_recover_with_other_settings_is_one_line_naming_them_and_the_way_on_trains(tmp_path, capsys, monkeypatch):
    # AllenNLP logs a line per differing key, then "Training configuration does not match the
    # configuration we're recovering from." A common wish: train a finished run longer.
    bilm = REPO_ROOT / "training_configs" / "bilm.jsonnet"
    data = write_sample_subset(tmp_path / "data", train_lines=20, heldout_lines=4)
    settings = {"train_data_path": data["train_data_path"], "validation_data_path": data["validation_data_path"],
                "trainer.num_epochs": 1}
    run = tmp_path / "run"
    status, _, err = run_allennlp(["train", bilm, "-s", run, "-o", json.dumps(settings)], capsys, monkeypatch)
    assert status == 0, err
    files = sorted(path.name for path in run.iterdir())
    longer = json.dumps({**settings, "trainer.num_epochs": 3})
    status, _, err = run_allennlp(["train", bilm, "-s", run, "-o", longer, "--recover"], capsys, monkeypatch)
    from_weights = {"model": {"type": "from_archive", "archive_file": str(run / "model.tar.gz")}}
    assert (status, err) == (1, (
        f"allennlp train: error: --recover goes on with the settings of {run / 'config.json'}, and these "
        "differ (trainer.num_epochs 3 here, 1 in the run): give the config and -o that started the run, "
        f"or train a new run (another -s) from its weights: -o '{json.dumps(from_weights)}'\n"
    ))
    assert sorted(path.name for path in run.iterdir()) == files
    status, _, err = run_allennlp(["train", bilm, "-s", tmp_path / "longer", "-o",
                                   json.dumps({**settings, **from_weights})], capsys, monkeypatch)
    assert status == 0, err


def test_a_corpus_without_sentences_removes_the_run_directory(tmp_path, capsys, monkeypatch):
    # Found only when the reader reads, after AllenNLP made the directory.
    data = write_sample_subset(tmp_path / "data", train_lines=6, heldout_lines=4)
    Path(data["train_data_path"]).write_text("\n\n", encoding="utf-8")
    overrides = {
        "train_data_path": data["train_data_path"],
        "validation_data_path": data["validation_data_path"],
        "vocabulary.vocabulary_file": data["vocabulary_file"],
        "trainer.num_epochs": 1,
    }
    status, _, err = run_allennlp(
        ["train", REPO_ROOT / "training_configs" / "bilm.jsonnet", "-s", tmp_path / "run",
         "-o", json.dumps(overrides)],
        capsys, monkeypatch,
    )
    assert status == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("allennlp train: error: bilm_corpus: ")
    assert "no sentences" in err
    assert not (tmp_path / "run").exists()


def test_python_callers_get_the_exception(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        train_model_from_file(str(tmp_path / "nope.jsonnet"), str(tmp_path / "run"))
