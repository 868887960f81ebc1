"""
Makes ``tests/fixtures/bilm_tf_checkpoint/``: a tiny biLM trained for a few batches by bilm-tf's own
training code (``bilm.training.train``, Adagrad as bilm-tf sets it up), saved by its
``tf.train.Saver``, then dumped by its own ``dump_weights``; what
``elmo_plugin.model_files.bilm_tf.checkpoint`` is tested against.

It needs TensorFlow and a copy of bilm-tf (github.com/allenai/bilm-tf), not the plugin's environment::

    python3.11 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu==2.21.0 tf-keras==2.21.0 h5py numpy
    /tmp/tfenv/bin/python scripts/make_bilm_tf_checkpoint_fixture.py --bilm-tf /tmp/bilm-tf \\
        --output tests/fixtures/bilm_tf_checkpoint

bilm-tf is TensorFlow 1 code. It runs unchanged on TensorFlow 2 through ``tf.compat.v1`` with
``TF_USE_LEGACY_KERAS=1`` (its RNN cells come from tf-keras), once its ``import tensorflow as tf``
lines import ``tensorflow.compat.v1`` and switch v2 behaviour off: this script makes that
substitution in a temporary copy of bilm-tf's package and leaves the given directory alone.
"""
import argparse
import glob
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Dict, List, Tuple

# Before TensorFlow is imported anywhere: bilm-tf's LSTMCell is the Keras 2 (tf-keras) one, and the
# fixture is made on the CPU whatever the machine has.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEED = 13

# The architecture: every part bilm-tf has (several filters, a highway layer, the projection of the
# token vector, two LSTM layers with a projection, both clips and the skip connection), at sizes
# that keep the files a few kilobytes.
OPTIONS = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 8]],
        "max_characters_per_token": 50,
        "n_characters": 261,
        "n_highway": 1,
    },
    "dropout": 0.1,
    "lstm": {
        "cell_clip": 3,
        "dim": 16,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 8,
        "use_skip_connections": True,
    },
    "all_clip_norm_val": 10.0,
    "n_epochs": 1,
    "batch_size": 4,
    "unroll_steps": 5,
    "n_negative_samples_batch": 16,
}
# bilm-tf trains int(n_train_tokens / (batch_size * unroll_steps)) batches an epoch and saves after
# the last one: this many.
NUM_BATCHES = 6
NUM_SENTENCES = 300

# What reference.npz holds, as TensorFlow's checkpoint reader returns them: these variables and their
# Adagrad accumulators (``<name>/Adagrad``), and the global step.
REFERENCE_VARIABLES = [
    "lm/char_embed",
    "lm/CNN/W_cnn_1",
    "lm/CNN/b_cnn_1",
    "lm/CNN_high_0/W_carry",
    "lm/CNN_high_0/b_transform",
    "lm/CNN_proj/W_proj",
    "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/kernel",
    "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/bias",
    "lm/RNN_1/rnn/multi_rnn_cell/cell_0/lstm_cell/projection/kernel",
    "lm/softmax/W",
    "lm/softmax/b",
]

# The words of the generated corpus (a seeded toy grammar): made-up text, so that nothing of a real
# corpus is shipped, with a few long and non-ASCII words for the character CNN.
SUBJECTS = ["the cat", "a dog", "the old farmer", "my neighbour", "the children", "a bird", "the café owner"]
VERBS = ["sees", "likes", "follows", "finds", "carries", "visits", "forgets"]
OBJECTS = ["the river", "a small house", "the bright garden", "an extraordinarily-long-word", "the naïve king",
           "a letter", "the market"]
ENDINGS = [".", "today .", "again .", "near the road .", "because it rains ."]


def generated_sentences(count: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    return [
        " ".join([rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(ENDINGS)])
        for _ in range(count)
    ]


def vocabulary_of(sentences: List[str]) -> List[str]:
    """bilm-tf's vocabulary: the special tokens, then the tokens by descending frequency (ties by
    token, so that the file is the same every time)."""
    counts = Counter(token for sentence in sentences for token in sentence.split())
    return ["<S>", "</S>", "<UNK>"] + sorted(counts, key=lambda token: (-counts[token], token))


def patched_bilm_copy(bilm_tf: str, destination: str) -> str:
    """A copy of bilm-tf's ``bilm`` package whose modules use TensorFlow's v1 API; the directory
    to put on ``sys.path``."""
    source = os.path.join(bilm_tf, "bilm")
    if not os.path.isfile(os.path.join(source, "training.py")):
        sys.exit(f"{bilm_tf} is not a bilm-tf checkout (no bilm/training.py)")
    target = os.path.join(destination, "bilm")
    shutil.copytree(source, target)
    for path in glob.glob(os.path.join(target, "*.py")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        text = re.sub(
            r"^import tensorflow as tf$",
            "import tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()",
            text,
            flags=re.MULTILINE,
        )
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return destination


def bilm_tf_revision(bilm_tf: str, given: str) -> str:
    if given:
        return given
    try:
        return subprocess.run(
            ["git", "-C", bilm_tf, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (an exported tree)"


def train_and_dump(work: str, options: Dict, vocabulary_file: str, corpus_file: str) -> Tuple[str, str]:
    """Runs bilm-tf's ``train`` as its ``bin/train_elmo.py`` does, then ``dump_weights``; the save
    directory and the weight file."""
    import numpy as np
    import tensorflow.compat.v1 as tf
    from bilm.data import BidirectionalLMDataset
    from bilm.training import dump_weights, load_vocab, train

    random.seed(SEED)
    np.random.seed(SEED)
    tf.reset_default_graph()
    tf.set_random_seed(SEED)
    vocab = load_vocab(vocabulary_file, options["char_cnn"]["max_characters_per_token"])
    data = BidirectionalLMDataset(corpus_file, vocab, test=False, shuffle_on_load=True)
    save_dir = os.path.join(work, "save")
    log_dir = os.path.join(work, "log")
    os.makedirs(save_dir)
    os.makedirs(log_dir)
    train(options, data, 1, save_dir, log_dir)
    tf.reset_default_graph()
    weight_file = os.path.join(work, "weights.hdf5")
    dump_weights(save_dir, weight_file)
    return save_dir, weight_file


def write_reference(prefix: str, path: str) -> List[str]:
    """The variables of `REFERENCE_VARIABLES`, their accumulators and ``global_step``, as
    ``tf.train.load_checkpoint`` reads them; the names written."""
    import numpy as np
    import tensorflow as tf2

    reader = tf2.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    names = []
    for name in REFERENCE_VARIABLES:
        for key in (name, name + "/Adagrad"):
            if key not in shapes:
                sys.exit(f"{prefix}: no variable {key!r}; the checkpoint has {sorted(shapes)}")
            names.append(key)
    names.append("global_step")
    np.savez(path, **{name: np.asarray(reader.get_tensor(name)) for name in names})
    return names


README = """\
# A bilm-tf training checkpoint

What `tests/model_files/bilm_tf/test_checkpoint.py` reads without TensorFlow: a tiny character-CNN biLM
(two filters, one highway layer, two LSTM layers of 16 cells projected to 8, clips and skip
connections) trained for {num_batches} batches by bilm-tf's own `bilm.training.train` (Adagrad, initial
accumulator 1.0, as bilm-tf sets it up) on {num_sentences} generated sentences, and saved by its
`tf.train.Saver`:

- `model.ckpt-{step}.index`, `.data-00000-of-00001`, `checkpoint`: the checkpoint as saved (the
  `checkpoint` file names it by the absolute path of the directory it was trained in, which no
  longer exists, as in most published checkpoints). The saver's `model.ckpt-{step}.meta` (the
  training graph, about 1.6 MB) is left out: restoring the variables does not need it;
- `options.json`: the options bilm-tf's `train` wrote beside it;
- `vocabulary.txt`: the vocabulary it was trained with (`<S>`, `</S>`, `<UNK>`, then the generated
  corpus's {vocabulary_size_minus_3} tokens by descending frequency);
- `weights.hdf5`: what bilm-tf's own `dump_weights` wrote from that checkpoint;
- `reference.npz`: these variables and their Adagrad accumulators (`NAME/Adagrad`), and
  `global_step`, as TensorFlow's `tf.train.load_checkpoint` reads them:
{reference_names}
- `LICENSE`: bilm-tf's licence (Apache-2.0), whose code made these files.

Made with `scripts/make_bilm_tf_checkpoint_fixture.py` (bilm-tf's `import tensorflow as tf` lines read as
`import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()` in a temporary copy, with
`TF_USE_LEGACY_KERAS=1`):

```
python3.11 -m venv /tmp/tfenv
/tmp/tfenv/bin/pip install tensorflow-cpu==2.21.0 tf-keras==2.21.0 h5py numpy
{command}
```

(tf-keras depends on the `tensorflow` package, so pip installs `tensorflow` 2.21.0 beside
`tensorflow-cpu`; the script hides any GPU.)

Versions: Python {python}, TensorFlow {tensorflow}, tf-keras {tf_keras}, h5py {h5py}, numpy {numpy};
bilm-tf {bilm_tf_revision}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm-tf", required=True, help="a checkout or exported tree of allenai/bilm-tf")
    parser.add_argument("--output", required=True, help="the fixture directory to (re)write")
    parser.add_argument("--bilm-tf-revision", default="", help="the bilm-tf commit, for the README")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="bilm_tf_checkpoint_")
    sys.path.insert(0, patched_bilm_copy(os.path.abspath(args.bilm_tf), os.path.join(work, "source")))

    sentences = generated_sentences(NUM_SENTENCES, SEED)
    corpus_file = os.path.join(work, "train.txt")
    with open(corpus_file, "w", encoding="utf-8") as handle:
        handle.write("\n".join(sentences) + "\n")
    vocabulary = vocabulary_of(sentences)
    vocabulary_file = os.path.join(work, "vocabulary.txt")
    with open(vocabulary_file, "w", encoding="utf-8") as handle:
        handle.write("\n".join(vocabulary) + "\n")

    options = json.loads(json.dumps(OPTIONS))
    options["n_tokens_vocab"] = len(vocabulary)
    options["n_train_tokens"] = NUM_BATCHES * options["batch_size"] * options["unroll_steps"]
    save_dir, weight_file = train_and_dump(work, options, vocabulary_file, corpus_file)

    import h5py
    import numpy as np
    import tensorflow as tf2
    import tf_keras

    prefix = tf2.train.latest_checkpoint(save_dir)
    step = int(prefix.rsplit("-", 1)[1])
    output = args.output
    if os.path.isdir(output):
        shutil.rmtree(output)
    os.makedirs(output)
    # The graph (``.meta``, a megabyte even for this model) is left out: restoring the variables
    # never needs it, and neither does the plugin.
    kept = glob.glob(prefix + ".index") + glob.glob(prefix + ".data-*")
    for path in kept + [os.path.join(save_dir, name) for name in ("checkpoint", "options.json")]:
        shutil.copy(path, output)
    shutil.copy(vocabulary_file, os.path.join(output, "vocabulary.txt"))
    shutil.copy(weight_file, os.path.join(output, "weights.hdf5"))
    shutil.copy(os.path.join(args.bilm_tf, "LICENSE"), os.path.join(output, "LICENSE"))
    write_reference(prefix, os.path.join(output, "reference.npz"))

    command = (
        "/tmp/tfenv/bin/python scripts/make_bilm_tf_checkpoint_fixture.py "
        + " ".join(arg for arg in sys.argv[1:])
    )
    with open(os.path.join(output, "README.md"), "w", encoding="utf-8") as handle:
        handle.write(
            README.format(
                num_batches=NUM_BATCHES,
                num_sentences=NUM_SENTENCES,
                step=step,
                vocabulary_size_minus_3=len(vocabulary) - 3,
                reference_names="\n".join(f"  - `{name}`" for name in REFERENCE_VARIABLES),
                command=command,
                python=platform.python_version(),
                tensorflow=tf2.__version__,
                tf_keras=tf_keras.__version__,
                h5py=h5py.__version__,
                numpy=np.__version__,
                bilm_tf_revision=bilm_tf_revision(args.bilm_tf, args.bilm_tf_revision),
            )
        )
    shutil.rmtree(work)
    print(f"wrote {output}: " + ", ".join(sorted(os.listdir(output))))


if __name__ == "__main__":
    main()
