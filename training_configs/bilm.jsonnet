// Pretrain a (tiny, by default) biLM:
//   allennlp train training_configs/bilm.jsonnet --include-package elmo_plugin -s OUT
//   allennlp elmo-export OUT OUT/bilm          (options.json + weights.hdf5 + vocabulary.txt)
//
// Unset environment variables take the defaults in elmo_plugin/config_defaults.py: the built-in
// sample corpus and a tiny model, a few minutes on 2 CPU cores. For your own corpus:
//   allennlp elmo-vocab "corpus/train/*.txt" vocab.txt --include-package elmo_plugin
//   ELMO_TRAIN_DATA="corpus/train/*.txt" ELMO_VALIDATION_DATA=corpus/heldout.txt \
//   ELMO_VOCABULARY=vocab.txt allennlp train training_configs/bilm.jsonnet ...
local common = import "bilm_common.libsonnet";

common.config(
  options={
    char_cnn: {
      activation: "relu",
      embedding: { dim: 8 },
      filters: [[1, 16], [2, 16], [3, 32], [4, 64]],
      max_characters_per_token: 50,
      n_characters: 261,
      n_highway: 1,
    },
    lstm: {
      dim: common.int("ELMO_LSTM_DIM"),
      projection_dim: common.int("ELMO_PROJECTION_DIM"),
      n_layers: 2,
      cell_clip: 3,
      proj_clip: 3,
      use_skip_connections: true,
    },
    dropout: 0.1,
  },
  batch_size=common.int("ELMO_BATCH_SIZE"),
  num_epochs=common.int("ELMO_NUM_EPOCHS"),
  num_samples=common.int("ELMO_NUM_SAMPLES"),
  unroll_steps=common.int("ELMO_UNROLL_STEPS"),
)
