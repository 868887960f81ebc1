// The Korean biLM at a CPU size: `bilm_small.jsonnet`'s recipe (512 character filters, 1 highway
// layer, 2 LSTM layers of 512 cells projected to 128, Adam with linear decay) with the course's
// 30 bytes per token, on all 642,072 reviews of ../shared/data/ko/lm tokenized into Mecab
// morphemes (BENCHMARKS.md, "Korean"). Three epochs by default; `make pretrain-ko` instead runs
// it one epoch at a time (num_epochs=1), each later epoch a warm restart of the one before
// (continue_from, learning_rate=0.001), about 75 minutes per epoch on 2 cores. The defaults
// below are where `make tokenize-ko` and the vocabulary step of `make pretrain-ko` put the
// files.
local paths = import "paths.libsonnet";
local common = import "bilm_common.libsonnet";

function(
  train_data_path=paths.in_repository("build/ko/tokens/train/*.txt"),
  validation_data_path=paths.in_repository("build/ko/tokens/heldout/heldout.txt"),
  vocabulary_file=paths.in_repository("build/ko/vocabulary.txt"),
  num_epochs=3,
  // Updates per epoch over which the learning rate decays: null counts the training corpus's
  // batches when training starts (the shared corpus: 3,165 for en/lm, 9,972 for the tokenized
  // Korean reviews), so another corpus gets its own schedule; a number is used as given.
  steps_per_epoch=null,
  mixed_precision=false,
  cuda_device=-1,
  learning_rate=0.002,
  // A finished run (its serialization directory) to start from instead of random weights:
  // more epochs on top of it, all weights (softmax included) copied by AllenNLP's `pretrained`
  // initializer, with a fresh optimizer and a new linear decay from `learning_rate` (a warm
  // restart). The new run's model.tar.gz does not need the old run (AllenNLP drops
  // `initializer` when loading an archive).
  continue_from=null,
)
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
    train_data_path=train_data_path,
    validation_data_path=validation_data_path,
    vocabulary_file=vocabulary_file,
    batch_size=64,
    num_epochs=num_epochs,
    num_samples=1024,
    max_sentence_length=200,
    checkpoint_seconds=600,
    optimizer={ type: "adam", lr: learning_rate },
    learning_rate_scheduler=common.linear_decay(steps_per_epoch),
    mixed_precision=mixed_precision,
    cuda_device=cuda_device,
  ) + (
    if continue_from == null then {}
    else {
      model+: {
        initializer: {
          regexes: [[".*", { type: "pretrained", weights_file_path: continue_from + "/best.th" }]],
        },
      },
    }
  )
