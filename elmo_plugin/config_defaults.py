"""
Defaults for the environment variables that ``training_configs/*.jsonnet`` read.

Jsonnet's ``std.extVar`` has no default value, and AllenNLP passes the environment to jsonnet as
external variables. The ``allennlp`` command imports plugins (``--include-package elmo_plugin``
or ``.allennlp_plugins``) before it evaluates the config, so setting missing ``ELMO_*`` variables
here gives every config a working default: the built-in sample corpus and a tiny model. A
variable that is already set is never changed.
"""
import os
from typing import Dict

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_SAMPLE = os.path.join(_PACKAGE, "sample_corpus")
# In a source checkout (`pip install -e .`), the repository and the shared data beside it.
_REPOSITORY = os.path.dirname(_PACKAGE)
_SMALL_BILM = os.path.join(_REPOSITORY, "build", "en_small", "bilm")
_KO_SMALL_BILM = os.path.join(_REPOSITORY, "build", "ko_small", "bilm")

DEFAULTS: Dict[str, str] = {
    # Data: a glob of tokenized files (one sentence per line), and the bilm-tf vocabulary file.
    "ELMO_TRAIN_DATA": os.path.join(_SAMPLE, "train.txt"),
    "ELMO_VALIDATION_DATA": os.path.join(_SAMPLE, "heldout.txt"),
    "ELMO_VOCABULARY": os.path.join(_SAMPLE, "vocabulary.txt"),
    # Batching: "sentences" (one sentence per row, no state between sentences) or "stream"
    # (bilm-tf's continuous streams cut into ELMO_UNROLL_STEPS windows, state carried).
    "ELMO_BATCHING": "sentences",
    "ELMO_BATCH_SIZE": "32",
    "ELMO_UNROLL_STEPS": "20",
    "ELMO_NUM_EPOCHS": "5",
    "ELMO_NUM_SAMPLES": "64",
    # Model size (bilm.jsonnet only).
    "ELMO_LSTM_DIM": "128",
    "ELMO_PROJECTION_DIM": "32",
    # Epochs of bilm_small.jsonnet and of bilm_ko_small.jsonnet (BENCHMARKS.md has both runs).
    "ELMO_SMALL_NUM_EPOCHS": "2",
    "ELMO_KO_SMALL_NUM_EPOCHS": "1",
    # bilm_small.jsonnet's learning rate decays linearly to zero over this many updates per
    # epoch: the batch count of ../shared/data/en/lm/train (202,527 sentences, batches of 64).
    "ELMO_SMALL_STEPS_PER_EPOCH": "3165",
    # The same for bilm_ko_small.jsonnet: the 198,819 reviews with Hangul among the 200,000 that
    # `make tokenize-ko-small` tokenizes, in chunks of 6,400 then batches of 64.
    "ELMO_KO_SMALL_STEPS_PER_EPOCH": "3107",
    # Downstream task configs (training_configs/tasks/): the data root, the biLM that the +ELMo
    # variants load (the English biLM `make pretrain-small` exports) and its output size.
    "ELMO_TASK_DATA": os.path.join(os.path.dirname(_REPOSITORY), "shared", "data"),
    "ELMO_OPTIONS_FILE": os.path.join(_SMALL_BILM, "options.json"),
    "ELMO_WEIGHT_FILE": os.path.join(_SMALL_BILM, "weights.hdf5"),
    "ELMO_TASK_ELMO_DIM": "256",
    # The same for the Korean task configs (nsmc_sentiment_elmo.jsonnet): the Korean biLM that
    # `make pretrain-ko-small` exports (bilm_ko_small: 2 x projection_dim 128 = 256; the
    # course's bilm_ko model has the same size).
    "ELMO_KO_OPTIONS_FILE": os.path.join(_KO_SMALL_BILM, "options.json"),
    "ELMO_KO_WEIGHT_FILE": os.path.join(_KO_SMALL_BILM, "weights.hdf5"),
    "ELMO_KO_TASK_ELMO_DIM": "256",
    "ELMO_TASK_NUM_EPOCHS": "",
    # "true": biLM training in bfloat16 autocast (ElmoBilmModel's mixed_precision).
    "ELMO_MIXED_PRECISION": "false",
    "ELMO_CUDA_DEVICE": "-1",
    "ELMO_NUM_WORKERS": "0",
}


def set_environment_defaults() -> None:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
