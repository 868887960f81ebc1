// A biLM that trains on ../shared/data/en/lm (5.0M tokens) on 2 CPU cores in about 70 minutes:
// ELMo's architecture at a size a CPU can afford (512 char filters, 1 highway layer, 2 LSTM
// layers of 512 cells projected to 128, skip connections, clips 3), two epochs by default
// (ELMO_SMALL_NUM_EPOCHS; BENCHMARKS.md, Run 3, trained three: held-out perplexity 104).
// `make pretrain-small` builds the vocabulary, trains, exports and evaluates (see README).
//   ELMO_TRAIN_DATA="../shared/data/en/lm/train/*.txt" \
//   ELMO_VALIDATION_DATA=../shared/data/en/lm/heldout.txt ELMO_VOCABULARY=vocab.txt \
//   allennlp train training_configs/bilm_small.jsonnet --include-package elmo_plugin -s OUT
local common = import "bilm_common.libsonnet";

common.config(
  options={
    char_cnn: {
      activation: "relu",
      embedding: { dim: 16 },
      filters: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]],
      max_characters_per_token: 50,
      n_characters: 261,
      n_highway: 1,
    },
    lstm: {
      dim: 512,
      projection_dim: 128,
      n_layers: 2,
      cell_clip: 3,
      proj_clip: 3,
      use_skip_connections: true,
    },
    dropout: 0.1,
  },
  batch_size=64,
  num_epochs=std.parseInt(std.extVar("ELMO_SMALL_NUM_EPOCHS")),
  num_samples=1024,
  max_sentence_length=200,
  checkpoint_seconds=600,
  // Not bilm-tf's Adagrad 0.2: the recipe was tuned for ~1M updates, and one CPU epoch here is
  // 3,165. Measured on 400 updates (BENCHMARKS.md): held-out perplexity 378 with Adam 0.002
  // against 966 with Adagrad 0.2 (and 431 for Adagrad after the whole epoch).
  optimizer={ type: "adam", lr: 0.002 },
  // Linear decay to zero over the run: with so few updates, the last ones at a small step size
  // are worth more than a constant rate. The lazy loader can't count its batches, so the count
  // comes from ELMO_SMALL_STEPS_PER_EPOCH (default 3165: 202,527 sentences of
  // ../shared/data/en/lm/train in batches of 64); set it when you train on another corpus.
  learning_rate_scheduler={
    type: "polynomial_decay",
    power: 1.0,
    warmup_steps: 0,
    end_learning_rate: 0.0,
    num_steps_per_epoch: std.parseInt(std.extVar("ELMO_SMALL_STEPS_PER_EPOCH")),
  },
)
