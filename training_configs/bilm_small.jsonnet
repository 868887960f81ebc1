// A biLM that trains on ../shared/data/en/lm (5.0M tokens) on 2 CPU cores in about 70 minutes:
// ELMo's architecture at a size a CPU can afford (512 char filters, 1 highway layer, 2 LSTM
// layers of 512 cells projected to 128, skip connections, clips 3), two epochs by default
// (BENCHMARKS.md, Run 3, trained three: held-out perplexity 104).
// `make pretrain-small` builds the vocabulary, trains, exports and evaluates (see docs/pretraining.md):
//   allennlp train training_configs/bilm_small.jsonnet --include-package elmo_plugin -s OUT \
//     -o '{"vocabulary.vocabulary_file": "vocab.txt"}'
// On another corpus set train_data_path and validation_data_path; the learning rate's decay
// follows the corpus (its batches are counted when training starts: steps_per_epoch below).
local paths = import "paths.libsonnet";
local common = import "bilm_common.libsonnet";

function(
  train_data_path=paths.shared_data + "/en/lm/train/*.txt",
  validation_data_path=paths.shared_data + "/en/lm/heldout.txt",
  vocabulary_file=paths.in_repository("build/en_small/vocabulary.txt"),
  num_epochs=2,
  // Updates per epoch over which the learning rate decays: null counts the training corpus's
  // batches when training starts (the shared corpus: 3,165 for en/lm, 9,972 for the tokenized
  // Korean reviews), so another corpus gets its own schedule; a number is used as given.
  steps_per_epoch=null,
  mixed_precision=false,
  cuda_device=-1,
)
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
    train_data_path=train_data_path,
    validation_data_path=validation_data_path,
    vocabulary_file=vocabulary_file,
    batch_size=64,
    num_epochs=num_epochs,
    num_samples=1024,
    max_sentence_length=200,
    checkpoint_seconds=600,
    // Not bilm-tf's Adagrad 0.2: the recipe was tuned for ~1M updates, and one CPU epoch here is
    // 3,165. Measured on 400 updates (benchmarks/log.md, Run 1): held-out perplexity 378 with Adam 0.002
    // against 966 with Adagrad 0.2 (and 431 for Adagrad after the whole epoch).
    optimizer={ type: "adam", lr: 0.002 },
    learning_rate_scheduler=common.linear_decay(steps_per_epoch),
    mixed_precision=mixed_precision,
    cuda_device=cuda_device,
  )
