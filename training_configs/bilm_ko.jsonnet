// The Korean biLM of the course this project started from: Mecab morphemes, 30 bytes per token,
// char dim 16 and ELMo's seven filters, 2 highway layers, 2 LSTM layers of 1024 cells projected
// to 128, clips 3, skip connections, a vocabulary of the 100,000 most frequent morphemes, and
// bilm-tf's recipe (Adagrad 0.2, batches of 128 rows x 20 steps, stream batching, 8192 samples).
// A GPU model; `bilm_ko_small.jsonnet` is its CPU-sized sibling. It reads the files that
// `make tokenize-ko` and the vocabulary step of `make pretrain-ko` write (docs/korean.md):
//   allennlp train training_configs/bilm_ko.jsonnet --include-package elmo_plugin -s OUT \
//     -o '{"trainer.cuda_device": 0}'
local paths = import "paths.libsonnet";
local common = import "bilm_common.libsonnet";

function(
  train_data_path=paths.in_repository("build/ko/tokens/train/*.txt"),
  validation_data_path=paths.in_repository("build/ko/tokens/heldout/heldout.txt"),
  vocabulary_file=paths.in_repository("build/ko/vocabulary.txt"),
  mixed_precision=false,
  cuda_device=-1,
  // The softmax's used rows only, in its gradient and in Adagrad's update (exactly the dense
  // update; false: dense gradients, the reference).
  sparse_softmax=true,
)
  common.config(
    options={
      bidirectional: true,
      char_cnn: {
        activation: "relu",
        embedding: { dim: 16 },
        filters: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        max_characters_per_token: 30,
        n_characters: 261,
        n_highway: 2,
      },
      lstm: {
        dim: 1024,
        projection_dim: 128,
        n_layers: 2,
        cell_clip: 3,
        proj_clip: 3,
        use_skip_connections: true,
      },
      dropout: 0.1,
      all_clip_norm_val: 10.0,
      n_epochs: 10,
      batch_size: 128,
      unroll_steps: 20,
      n_negative_samples_batch: 8192,
    },
    train_data_path=train_data_path,
    validation_data_path=validation_data_path,
    vocabulary_file=vocabulary_file,
    batch_size=128,
    num_epochs=10,
    num_samples=8192,
    unroll_steps=20,
    batching="stream",
    checkpoint_seconds=1800,
    mixed_precision=mixed_precision,
    cuda_device=cuda_device,
    sparse_softmax=sparse_softmax,
    // The data path keeps up with a GPU step: the two stream directions in two processes.
    parallel_directions=true,
  )
