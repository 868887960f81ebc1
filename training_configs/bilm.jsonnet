// Pretrain a biLM:
//   allennlp train training_configs/bilm.jsonnet --include-package elmo_plugin -s OUT
//   allennlp elmo-export OUT/model.tar.gz OUT/bilm   (options.json + weights.hdf5)
//
// Every path and size comes from an environment variable; unset ones get the defaults in
// elmo_plugin/config_defaults.py (the built-in sample corpus, a tiny model, 5 epochs: a few
// minutes on 2 CPU cores). For your own corpus:
//   allennlp elmo-vocab "corpus/train/*.txt" vocab.txt --include-package elmo_plugin
//   ELMO_TRAIN_DATA="corpus/train/*.txt" ELMO_VALIDATION_DATA=corpus/heldout.txt \
//   ELMO_VOCABULARY=vocab.txt allennlp train training_configs/bilm.jsonnet ...
local env(name) = std.extVar(name);
local int(name) = std.parseInt(env(name));
local batching = env("ELMO_BATCHING");
local batch_size = int("ELMO_BATCH_SIZE");
local stream = batching == "stream";

local reader = {
  type: "bilm_corpus",
  mode: batching,
  max_characters_per_token: 50,
  max_sentence_length: 400,
  batch_size: batch_size,
  unroll_steps: int("ELMO_UNROLL_STEPS"),
};

{
  dataset_reader: reader,
  // Validation reads sentences one per row, so its perplexity is comparable across modes.
  validation_dataset_reader: reader + { mode: "sentences", shuffle: false },
  train_data_path: env("ELMO_TRAIN_DATA"),
  validation_data_path: env("ELMO_VALIDATION_DATA"),
  vocabulary: {
    type: "from_bilm_tf_file",
    vocabulary_file: env("ELMO_VOCABULARY"),
  },
  model: {
    type: "elmo_bilm",
    num_samples: int("ELMO_NUM_SAMPLES"),
    options: {
      char_cnn: {
        activation: "relu",
        embedding: { dim: 8 },
        filters: [[1, 16], [2, 16], [3, 32], [4, 64]],
        max_characters_per_token: 50,
        n_characters: 261,
        n_highway: 1,
      },
      lstm: {
        dim: int("ELMO_LSTM_DIM"),
        projection_dim: int("ELMO_PROJECTION_DIM"),
        n_layers: 2,
        cell_clip: 3,
        proj_clip: 3,
        use_skip_connections: true,
      },
      dropout: 0.1,
    },
  },
  data_loader: {
    batch_size: batch_size,
    // Stream rows must stay in order: row i of a batch continues row i of the previous one.
    shuffle: !stream,
    num_workers: int("ELMO_NUM_WORKERS"),
    // Read lazily in chunks (a corpus larger than memory trains) and reshuffle every epoch;
    // a multiple of batch_size so that stream rows stay aligned.
    max_instances_in_memory: 100 * batch_size,
  },
  validation_data_loader: { batch_size: 64, shuffle: false },
  trainer: {
    num_epochs: int("ELMO_NUM_EPOCHS"),
    cuda_device: int("ELMO_CUDA_DEVICE"),
    grad_norm: 10.0,
    optimizer: { type: "adagrad", lr: 0.2, initial_accumulator_value: 1.0 },
    validation_metric: "-ppl",
    callbacks: [{ type: "tensorboard" }],
  },
}
