"""
How AllenNLP finds the plugin, checked in fresh interpreters (registration is process state, so
an in-process check would pass on whatever an earlier test imported):

- through the ``.allennlp_plugins`` file, which makes AllenNLP import only the top package
  ``elmo_plugin``, so its ``__init__`` must register everything;
- through ``--include-package elmo_plugin`` (AllenNLP imports the package and its submodules);
  the subcommands too, though the ``allennlp`` command line cannot use them that way (below);
- importing the package changes nothing else in the process: no environment variables, no
  warning filters.

AllenNLP builds its subcommand parser before it reads ``--include-package``
(allennlp/commands/__init__.py): ``allennlp elmo`` from a directory without a plugins file works
through the start-up hook that installing the plugin adds (tests/patches/test_startup_hook.py).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

# Every name the plugin registers, by AllenNLP base class.
REGISTERED = {
    "allennlp.data.DatasetReader": [
        "bilm_corpus",
        "token_tag_conll",
        "conllu_tagging",
        "conllu_sentence_genre",
        "universal_propbank_srl",
        "sentiment_tsv",
        "klue_ner",
    ],
    "allennlp.data.TokenIndexer": ["elmo_characters", "elmoformanylangs_characters"],
    "allennlp.data.Tokenizer": ["korean", "mecab_ko", "kiwi"],
    "allennlp.data.Vocabulary": ["from_bilm_tf_file"],
    "allennlp.models.Model": ["elmo_bilm", "character_span_crf_tagger"],
    "allennlp.modules.TokenEmbedder": ["elmo_token_embedder"],
    "allennlp.modules.TextFieldEmbedder": ["elmo_input_output"],
    "allennlp.modules.Seq2SeqEncoder": ["elmo_at_output"],
    "allennlp.modules.Seq2VecEncoder": ["elmo_at_output"],
    "allennlp.training.learning_rate_schedulers.LearningRateScheduler": [
        "reduce_on_plateau",
        "linear_decay_over_corpus",
    ],
    "allennlp.training.callbacks.TrainerCallback": [
        "keep_freed_memory",
        "check_training_settings",
        "count_batches_per_epoch",
    ],
    "allennlp.training.Trainer": ["gradient_descent"],
    "allennlp.training.Checkpointer": ["default"],
    "allennlp.training.metrics.Metric": ["klue_ner_f1"],
    "elmo_plugin.modules.scalar_mix.ScalarMix": ["softmax", "single_layer"],
    "allennlp.commands.Subcommand": [
        "elmo", "elmo-vocab", "elmo-export", "elmo-tokenize", "elmo-score", "elmo-adapt", "elmo-task-text",
    ],
}

# Prints, as JSON, which of REGISTERED each class resolves to the plugin (module elmo_plugin.*).
CHECK = """
import importlib, json, sys
registered = json.loads(sys.argv[1])
found = {}
for base_path, names in registered.items():
    module, _, name = base_path.rpartition(".")
    try:
        base = getattr(importlib.import_module(module), name)
    except ImportError:
        found[base_path] = []  # elmo_plugin not imported: its ScalarMix base is unknown
        continue
    found[base_path] = [
        n for n in names
        if n in base.list_available()
        and base.resolve_class_name(n)[0].__module__.startswith("elmo_plugin")
    ]
print(json.dumps(found))
"""


def run_python(code: str, *args: str, cwd: Path) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ELMO_")}
    # The checkout, importable from any directory (as an installed package would be).
    environment["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_everything_is_registered_through_the_plugins_file(tmp_path):
    (tmp_path / ".allennlp_plugins").write_text("elmo_plugin\n", encoding="utf-8")
    found = json.loads(
        run_python(
            "from allennlp.common.plugins import import_plugins\nimport_plugins()\n" + CHECK,
            json.dumps(REGISTERED),
            cwd=tmp_path,
        )
    )
    assert found == REGISTERED


def test_everything_is_registered_through_include_package(tmp_path):
    # What `--include-package elmo_plugin` does (allennlp/commands/__init__.py, main).
    found = json.loads(
        run_python(
            "from allennlp.common.util import import_module_and_submodules\n"
            "import_module_and_submodules('elmo_plugin')\n" + CHECK,
            json.dumps(REGISTERED),
            cwd=tmp_path,
        )
    )
    assert found == REGISTERED


def test_importing_the_package_sets_no_environment_variables_or_warning_filters(tmp_path):
    # AllenNLP and torch are imported first: what they do at import is theirs, not ours.
    code = """
import json, os, warnings
import allennlp.commands, allennlp.models, allennlp.training, torch, h5py
environment, filters = dict(os.environ), list(warnings.filters)
import elmo_plugin
print(json.dumps({
    "environment": sorted(set(os.environ.items()) ^ set(environment.items())),
    "filters": [str(f) for f in warnings.filters if f not in filters],
}))
"""
    changes = json.loads(run_python(code, cwd=tmp_path))
    assert changes == {"environment": [], "filters": []}


# Makes allennlp_models impossible to import, as in an environment without allennlp-models.
WITHOUT_ALLENNLP_MODELS = """
import sys
class BlockAllennlpModels:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "allennlp_models":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, BlockAllennlpModels)
"""
TASK_COMPONENTS = {"klue_ner", "token_tag_conll", "conllu_tagging", "conllu_sentence_genre",
                   "universal_propbank_srl", "sentiment_tsv", "character_span_crf_tagger", "klue_ner_f1"}


def test_the_core_registers_without_allennlp_models_and_the_tasks_say_what_they_need(tmp_path):
    code = WITHOUT_ALLENNLP_MODELS + """
import elmo_plugin
assert "allennlp_models" not in sys.modules and "elmo_plugin.tasks" not in sys.modules
assert "KlueNerReader" not in elmo_plugin.__all__
""" + CHECK + """
try:
    from elmo_plugin import KlueNerReader
except ModuleNotFoundError as error:
    assert error.name == "allennlp_models", error
else:
    raise AssertionError("KlueNerReader imported without allennlp-models")
"""
    found = json.loads(run_python(code, json.dumps(REGISTERED), cwd=tmp_path))
    expected = {base: [name for name in names if name not in TASK_COMPONENTS]
                for base, names in REGISTERED.items()}
    assert found == expected


def test_with_allennlp_models_import_elmo_plugin_registers_the_tasks_for_archives(tmp_path):
    # A Python user's `import elmo_plugin` then load_archive() of a task model: its names resolve.
    code = """
import sys
import elmo_plugin
from elmo_plugin import KlueNerReader, tasks
assert KlueNerReader is tasks.KlueNerReader and set(elmo_plugin.TASK_NAMES) == set(tasks.__all__)
assert set(elmo_plugin.TASK_NAMES) <= set(elmo_plugin.__all__)
""" + CHECK
    found = json.loads(run_python(code, json.dumps(REGISTERED), cwd=tmp_path))
    assert found == REGISTERED


def test_embedding_works_without_allennlp_models(tmp_path):
    # ElmoEmbedder and `allennlp elmo` (the command as AllenNLP runs it, the plugin imported by
    # the plugins file) give the same vectors as in this process, where allennlp-models is there.
    import h5py
    import numpy as np

    from elmo_plugin import ElmoEmbedder
    from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS

    (tmp_path / "in.txt").write_text("the dog runs .\na cat\n", encoding="utf-8")
    (tmp_path / ".allennlp_plugins").write_text("elmo_plugin\nelmo_plugin.tasks\n", encoding="utf-8")
    code = WITHOUT_ALLENNLP_MODELS + f"""
from allennlp.commands import main
sys.argv = ["allennlp", "elmo", "in.txt", "out.hdf5", "--all", "--options-file", {str(FIXTURE_OPTIONS)!r},
            "--weight-file", {str(FIXTURE_WEIGHTS)!r}]
try:
    main(prog="allennlp")
except SystemExit as end:
    assert not end.code, end.code
from elmo_plugin import ElmoEmbedder
import numpy
vectors = ElmoEmbedder({str(FIXTURE_OPTIONS)!r}, {str(FIXTURE_WEIGHTS)!r}).embed_sentence(["a", "cat"])
numpy.save("vectors.npy", vectors)
assert "allennlp_models" not in sys.modules
print("done")
"""
    assert run_python(code, cwd=tmp_path) == "done"
    embedder = ElmoEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS))
    with h5py.File(tmp_path / "out.hdf5", "r") as written:
        for key, sentence in (("0", "the dog runs ."), ("1", "a cat")):
            np.testing.assert_allclose(written[key][()], embedder.embed_sentence(sentence.split()), atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "vectors.npy"), embedder.embed_sentence(["a", "cat"]), atol=1e-6)


@pytest.mark.slow
def test_allennlp_train_of_the_bilm_config_works_without_allennlp_models(tmp_path):
    from tests.training_configs.test_bilm_configs import write_sample_subset

    data = write_sample_subset(tmp_path / "data", train_lines=40, heldout_lines=10)
    overrides = {"train_data_path": data["train_data_path"],
                 "validation_data_path": data["validation_data_path"], "trainer.num_epochs": 1}
    config = REPO_ROOT / "training_configs" / "bilm.jsonnet"
    code = WITHOUT_ALLENNLP_MODELS + f"""
import elmo_plugin
from allennlp.commands import main
sys.argv = ["allennlp", "train", {str(config)!r}, "-s", "run", "-o", {json.dumps(json.dumps(overrides))}]
main(prog="allennlp")
assert "allennlp_models" not in sys.modules
print("done")
"""
    assert run_python(code, cwd=tmp_path) == "done"
    assert (tmp_path / "run" / "model.tar.gz").is_file()
