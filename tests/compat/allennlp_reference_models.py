"""
Trains tiny task models with PLAIN AllenNLP 2.10 (its own ``elmo_token_embedder`` and
``elmo_characters``; elmo_plugin is not imported) and records what they predict, as the reference
for `tests/compat/test_allennlp_archives.py`.

Run as a script in a directory without a ``.allennlp_plugins`` file (AllenNLP's plugin discovery
is never called here either):

    python allennlp_reference_models.py OPTIONS_JSON WEIGHTS_HDF5 OUTPUT_DIRECTORY

It writes ``OUTPUT_DIRECTORY/<name>/model.tar.gz`` for each model of `MODELS`, the data files
``tagging.txt``, ``classification.jsonl`` and ``sentences.txt`` (the tagging sentences, plain),
and ``reference.json``: per model the outputs of ``Predictor.predict_batch_instance`` on its data
file and the metrics of ``allennlp.training.util.evaluate`` (both in batches of 3), and the layers that
the fine-tuned model's biLM computes for each line of ``sentences.txt``.

AllenNLP's ELMo LSTM is stateful (the state of one batch starts the next); elmo_plugin's default
is stateless. The reference is recorded statelessly (the state is reset before every biLM run),
which is what the plugin computes by default; the stateful case is compared in
`tests/compat/test_allennlp_api.py`.
"""
import json
import os
import sys

import torch

OPTIONS, WEIGHTS, OUTPUT = sys.argv[1:4]
BATCH_SIZE = 3  # for predicting and evaluating

WORDS = ["the", "dog", "cat", "runs", "sleeps", "a", "big", "small", "house", "quickly", "."]
TAGS = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "house": "NOUN", "runs": "VERB",
        "sleeps": "VERB", "big": "ADJ", "small": "ADJ", "quickly": "ADV", ".": "PUNCT"}


def make_data() -> None:
    generator = torch.Generator().manual_seed(0)
    sentences = []
    for _ in range(8):
        length = int(torch.randint(2, 8, (1,), generator=generator))
        sentences.append([WORDS[int(i)] for i in torch.randint(0, len(WORDS), (length,), generator=generator)])
    # An unseen word and a long token, so that the character CNN is not only fed cached words.
    sentences[3].append("Pneumonoultramicroscopic")
    with open(os.path.join(OUTPUT, "tagging.txt"), "w", encoding="utf-8") as out:
        for sentence in sentences:
            out.write(" ".join(f"{w}###{TAGS.get(w, 'X')}" for w in sentence) + "\n")
    with open(os.path.join(OUTPUT, "sentences.txt"), "w", encoding="utf-8") as out:
        out.write("".join(" ".join(sentence) + "\n" for sentence in sentences))
    with open(os.path.join(OUTPUT, "classification.jsonl"), "w", encoding="utf-8") as out:
        for sentence in sentences:
            label = "animal" if ("dog" in sentence or "cat" in sentence) else "other"
            out.write(json.dumps({"text": " ".join(sentence), "label": label}) + "\n")


def elmo(**extra):
    return {"type": "elmo_token_embedder", "options_file": OPTIONS, "weight_file": WEIGHTS,
            "dropout": 0.2, **extra}


TAGGING_READER = {"type": "sequence_tagging", "token_indexers": {"elmo": {"type": "elmo_characters"}}}
TRAINER = {"num_epochs": 1, "optimizer": {"type": "adam", "lr": 0.05}, "cuda_device": -1}


def tagger(model_type: str, embedder: dict, output_dim: int = 32, **extra) -> dict:
    return {
        "dataset_reader": TAGGING_READER,
        "train_data_path": os.path.join(OUTPUT, "tagging.txt"),
        "model": {
            "type": model_type,
            "text_field_embedder": {"token_embedders": {"elmo": embedder}},
            "encoder": {"type": "lstm", "input_size": output_dim, "hidden_size": 4,
                        "bidirectional": True},
            **extra,
        },
        "data_loader": {"batch_size": 4},
        "trainer": TRAINER,
    }


MODELS = {
    "simple_tagger": tagger("simple_tagger", elmo()),
    "crf_tagger": tagger("crf_tagger", elmo(do_layer_norm=True)),
    "projection": tagger("simple_tagger", elmo(projection_dim=8), output_dim=8),
    "vocab_to_cache": tagger("simple_tagger", elmo(vocab_to_cache=WORDS)),
    "fine_tuned": tagger("simple_tagger", elmo(requires_grad=True)),
    "classifier": {
        "dataset_reader": {"type": "text_classification_json", "tokenizer": {"type": "whitespace"},
                           # basic_classifier returns the token ids of a single_id indexer.
                           "token_indexers": {"elmo": {"type": "elmo_characters"},
                                              "tokens": {"type": "single_id"}}},
        "train_data_path": os.path.join(OUTPUT, "classification.jsonl"),
        "model": {
            "type": "basic_classifier",
            "text_field_embedder": {"token_embedders": {"elmo": elmo(), "tokens": {"type": "empty"}}},
            "seq2vec_encoder": {"type": "boe", "embedding_dim": 32, "averaged": True},
        },
        "data_loader": {"batch_size": 4},
        "trainer": TRAINER,
    },
}


def main() -> None:
    torch.set_num_threads(1)
    import allennlp_models.tagging  # noqa: F401  (crf_tagger)
    from allennlp.commands.train import train_model
    from allennlp.common import Params
    from allennlp.data.data_loaders import MultiProcessDataLoader
    from allennlp.data.token_indexers import TokenIndexer
    from allennlp.data.token_indexers.elmo_indexer import ELMoTokenCharactersIndexer
    from allennlp.models.archival import load_archive
    from allennlp.modules.elmo import batch_to_ids
    from allennlp.modules.elmo_lstm import ElmoLstm
    from allennlp.modules.token_embedders import TokenEmbedder
    from allennlp.modules.token_embedders.elmo_token_embedder import ElmoTokenEmbedder
    from allennlp.predictors import Predictor
    from allennlp.training.util import evaluate

    def check_plain() -> None:
        assert "elmo_plugin" not in sys.modules, "elmo_plugin was imported"
        assert TokenEmbedder.by_name("elmo_token_embedder") is ElmoTokenEmbedder
        assert TokenIndexer.by_name("elmo_characters") is ELMoTokenCharactersIndexer

    check_plain()
    os.makedirs(OUTPUT, exist_ok=True)
    make_data()
    reference = {"plain_allennlp": True, "models": {}}
    for name, config in MODELS.items():
        directory = os.path.join(OUTPUT, name)
        train_model(Params(json.loads(json.dumps(config))), directory, force=True)
        archive = load_archive(os.path.join(directory, "model.tar.gz"))
        model = archive.model.eval()
        for module in model.modules():
            if isinstance(module, ElmoLstm):
                module.register_forward_pre_hook(lambda m, _: m.reset_states())
        # The base Predictor: the taggers' own (sentence_tagger) loads a spaCy model.
        predictor = Predictor(model, archive.dataset_reader)
        data_path = config["train_data_path"]
        instances = list(archive.dataset_reader.read(data_path))
        # Batches of BATCH_SIZE, as the tests predict and evaluate: with do_layer_norm the mix
        # normalises over the whole batch, so results depend on which sentences share a batch.
        outputs = [
            output
            for start in range(0, len(instances), BATCH_SIZE)
            for output in predictor.predict_batch_instance(instances[start : start + BATCH_SIZE])
        ]
        loader = MultiProcessDataLoader(archive.dataset_reader, data_path, batch_size=BATCH_SIZE)
        loader.index_with(model.vocab)
        metrics = evaluate(model, loader, cuda_device=-1)
        reference["models"][name] = {
            "archive": os.path.join(directory, "model.tar.gz"),
            "data": data_path,
            "predictions": outputs,
            "metrics": {key: float(value) for key, value in metrics.items()
                        if isinstance(value, (int, float))},
            "state_dict_keys": sorted(model.state_dict()),
        }
        if name == "fine_tuned":
            # What the fine-tuned biLM computes (AllenNLP's _ElmoBiLm), sentence by sentence: the
            # reference for exporting it (`allennlp elmo-export` + `allennlp elmo --all`).
            bilm = model.text_field_embedder.token_embedder_elmo._elmo._elmo_lstm
            with open(os.path.join(OUTPUT, "sentences.txt"), encoding="utf-8") as lines:
                sentences = [line.split() for line in lines]
            layers = []
            with torch.no_grad():
                for sentence in sentences:
                    activations = bilm(batch_to_ids([sentence]))["activations"]
                    layers.append(torch.stack([a[0, 1:-1] for a in activations]).tolist())
            reference["fine_tuned_bilm_layers"] = layers
    check_plain()
    with open(os.path.join(OUTPUT, "reference.json"), "w", encoding="utf-8") as out:
        json.dump(reference, out)


if __name__ == "__main__":
    main()
