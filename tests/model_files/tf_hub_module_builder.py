"""
Builds an ELMo module as TF-Hub publishes them, from a bilm-tf ``options.json`` and
``weights.hdf5``, with TensorFlow. Run by a Python that has TensorFlow (``build/tf-venv``, see
docs/models.md), never imported by the tests themselves, which run it as a script
(`tests/model_files/test_tf_hub.py`)::

    build/tf-venv/bin/python tests/model_files/tf_hub_module_builder.py OPTIONS WEIGHTS OUT \
        [--format tf1-hub|tf2] [--dump-variables VARIABLES.npz]

``tf1-hub`` (the default) is the format of ``google/elmo/2``, ``/3`` and DeepPavlov's modules: a
SavedModel built in graph mode, its checkpoint keyed by the variables' names, with
``tfhub_module.pb`` beside it. The variables carry the real modules' names (the biLM under
``bilm/``, TensorFlow's ``LSTMCell`` names ``rnn/lstm_cell/kernel``, ``bias`` and
``projection/kernel`` inside bilm-tf's ``RNN_{d}/RNN/MultiRNNCell/Cell{l}`` scopes, the padded
262-row ``char_embed``, and the module's layer mix ``aggregation/weights`` and ``scaling``); the
graph holds the character convolutions as bilm-tf builds them (convolution, max-pool over the
token, activation, in scope ``bilm/CNN``), which is where a module keeps its activation and its
characters per token. ``tf2`` is a SavedModel of TensorFlow 2 (``tf.saved_model.save``), whose
checkpoint is keyed by object paths and names the variables in its object graph, and whose graph
(the same convolutions) is a ``tf.function``'s.

``--dump-variables`` writes every variable as TensorFlow's own checkpoint reader
(``tf.train.load_checkpoint``) reads it back, by checkpoint key, for the tests to compare the
plugin's reader with.
"""
import argparse
import json
import os

import h5py
import numpy as np
import tensorflow as tf


def hub_variables(options: dict, weights: h5py.File) -> dict:
    """The module's variables by name, from the bilm-tf weight file's datasets."""
    char_embed = weights["char_embed"][...]
    variables = {
        # The module's ids are shifted by one, id 0 being padding, as in bilm-tf's inference graph.
        "bilm/char_embed": np.concatenate([np.zeros((1, char_embed.shape[1]), np.float32), char_embed]),
        # The layer mix of the module's "elmo" output (not part of the bilm-tf files).
        "aggregation/weights": np.zeros(options["lstm"]["n_layers"] + 1, np.float32),
        "aggregation/scaling": np.float32(1.0),
    }
    for name in ("CNN", "CNN_proj") + tuple(f"CNN_high_{k}" for k in range(options["char_cnn"]["n_highway"])):
        if name in weights:
            for key, dataset in weights[name].items():
                variables[f"bilm/{name}/{key}"] = dataset[...]
    cell_names = {"W_0": "kernel", "B": "bias", "W_P_0": "projection/kernel"}
    for direction in (0, 1):
        for layer in range(options["lstm"]["n_layers"]):
            scope = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}"
            for file_name, hub_name in cell_names.items():
                variables[f"bilm/{scope}/rnn/lstm_cell/{hub_name}"] = weights[f"{scope}/LSTMCell/{file_name}"][...]
    return variables


def character_cnn(options: dict, char_embed, kernels, biases, ids):
    """The character convolutions as bilm-tf's graph has them, in scope ``bilm/CNN``: each
    convolution max-pooled over the token, then the activation."""
    char_cnn = options["char_cnn"]
    max_chars = char_cnn["max_characters_per_token"]
    activation = {"relu": tf.nn.relu, "tanh": tf.nn.tanh}[char_cnn["activation"]]
    with tf.name_scope("bilm"):
        embedded = tf.nn.embedding_lookup(char_embed, ids)
        with tf.name_scope("CNN"):
            pooled = []
            for (width, _), kernel, bias in zip(char_cnn["filters"], kernels, biases):
                convolved = tf.nn.conv2d(embedded, kernel, strides=[1, 1, 1, 1], padding="VALID") + bias
                convolved = tf.compat.v1.nn.max_pool(
                    convolved, [1, 1, max_chars - width + 1, 1], [1, 1, 1, 1], "VALID"
                )
                pooled.append(tf.squeeze(activation(convolved), axis=2))
            return tf.concat(pooled, axis=2, name="token_features")


def cnn_variables(options: dict, made: dict):
    count = len(options["char_cnn"]["filters"])
    return (
        made["bilm/char_embed"],
        [made[f"bilm/CNN/W_cnn_{index}"] for index in range(count)],
        [made[f"bilm/CNN/b_cnn_{index}"] for index in range(count)],
    )


def build_tf1_hub(options: dict, variables: dict, output: str) -> None:
    v1 = tf.compat.v1
    max_chars = options["char_cnn"]["max_characters_per_token"]
    graph = tf.Graph()
    with graph.as_default():
        made = {name: v1.get_variable(name, initializer=value) for name, value in variables.items()}
        ids = v1.placeholder(tf.int32, (None, None, max_chars), name="character_ids")
        token_features = character_cnn(options, *cnn_variables(options, made), ids)
        signature = v1.saved_model.signature_def_utils.predict_signature_def(
            {"character_ids": ids}, {"token_features": token_features}
        )
        builder = v1.saved_model.Builder(output)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(session, [], signature_def_map={"default": signature})
        builder.save()
    # The TF1 Hub format's marker: a ModuleDef with format 3 (FORMAT_V3).
    with open(os.path.join(output, "tfhub_module.pb"), "wb") as handle:
        handle.write(b"\x08\x03")


def build_tf2(options: dict, variables: dict, output: str) -> None:
    module = tf.Module()
    made = {name: tf.Variable(value, name=name) for name, value in variables.items()}
    module.bilm_variables = list(made.values())
    max_chars = options["char_cnn"]["max_characters_per_token"]

    @tf.function(input_signature=[tf.TensorSpec([None, None, max_chars], tf.int32)])
    def token_features(ids):
        return {"token_features": character_cnn(options, *cnn_variables(options, made), ids)}

    module.token_features = token_features
    tf.saved_model.save(module, output, signatures={"default": token_features})


def dump_variables(output: str, path: str) -> None:
    reader = tf.train.load_checkpoint(os.path.join(output, "variables", "variables"))
    arrays = {
        key: reader.get_tensor(key)
        for key, dtype in reader.get_variable_to_dtype_map().items()
        if dtype in (tf.float32, tf.float16, tf.float64)
    }
    np.savez(path, **arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("options_file")
    parser.add_argument("weight_file")
    parser.add_argument("output_directory")
    parser.add_argument("--format", choices=("tf1-hub", "tf2"), default="tf1-hub")
    parser.add_argument("--dump-variables", metavar="NPZ")
    args = parser.parse_args()
    with open(args.options_file, encoding="utf-8") as handle:
        options = json.load(handle)
    with h5py.File(args.weight_file, "r") as weights:
        variables = hub_variables(options, weights)
    if args.format == "tf1-hub":
        build_tf1_hub(options, variables, args.output_directory)
    else:
        build_tf2(options, variables, args.output_directory)
    if args.dump_variables:
        dump_variables(args.output_directory, args.dump_variables)


if __name__ == "__main__":
    main()
