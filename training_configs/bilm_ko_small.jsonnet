// The Korean biLM at a CPU size: `bilm_small.jsonnet`'s recipe (512 character filters, 1 highway
// layer, 2 LSTM layers of 512 cells projected to 128, Adam with linear decay, one epoch) with the
// course's 30 bytes per token. `make pretrain-ko-small` tokenizes 200,000 reviews of
// ../shared/data/ko/lm with Mecab, builds the vocabulary (100,000 most frequent morphemes at
// most), trains (about an hour on 2 cores), exports to build/ko_small/bilm and evaluates.
local common = import "bilm_common.libsonnet";

common.config(
  options={
    char_cnn: {
      activation: "relu",
      embedding: { dim: 16 },
      filters: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]],
      max_characters_per_token: 30,
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
  num_epochs=std.parseInt(std.extVar("ELMO_KO_SMALL_NUM_EPOCHS")),
  num_samples=1024,
  max_sentence_length=200,
  checkpoint_seconds=600,
  optimizer={ type: "adam", lr: 0.002 },
  // Linear decay to zero over the run; the lazy loader can't count its batches, so the count
  // comes from ELMO_KO_SMALL_STEPS_PER_EPOCH (default 3107: the 198,819 tokenized reviews that
  // `make tokenize-ko-small` writes, in batches of 64).
  learning_rate_scheduler={
    type: "polynomial_decay",
    power: 1.0,
    warmup_steps: 0,
    end_learning_rate: 0.0,
    num_steps_per_epoch: std.parseInt(std.extVar("ELMO_KO_SMALL_STEPS_PER_EPOCH")),
  },
)
