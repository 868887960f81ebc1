// Pretrain a (tiny, by default) biLM:
//   allennlp train training_configs/bilm.jsonnet --include-package elmo_plugin -s OUT
//   allennlp elmo-export OUT OUT/bilm          (options.json + weights.hdf5 + vocabulary.txt)
//
// By default it trains on the built-in sample corpus (elmo_plugin/sample_corpus): a tiny model,
// a minute on 2 CPU cores. For your own corpus:
//   allennlp elmo-vocab "corpus/train/*.txt" vocab.txt --include-package elmo_plugin
//   allennlp train training_configs/bilm.jsonnet --include-package elmo_plugin -s OUT \
//     -o '{"train_data_path": "corpus/train/*.txt", "validation_data_path": "corpus/heldout.txt",
//          "vocabulary.vocabulary_file": "vocab.txt"}'
// The function's parameters are the knobs; a config of your own can call it with others:
//   (import "training_configs/bilm.jsonnet")(lstm_dim=256, batching="stream")
local paths = import "paths.libsonnet";
local common = import "bilm_common.libsonnet";

function(
  train_data_path=paths.sample_corpus + "/train.txt",
  validation_data_path=paths.sample_corpus + "/heldout.txt",
  vocabulary_file=paths.sample_corpus + "/vocabulary.txt",
  batching="sentences",
  batch_size=32,
  num_epochs=5,
  num_samples=64,
  unroll_steps=20,
  lstm_dim=128,
  projection_dim=32,
  mixed_precision=false,
  cuda_device=-1,
  // The softmax's used rows only, in its gradient and in Adagrad's update (exactly the dense
  // update; false: dense gradients, the reference).
  sparse_softmax=true,
  num_workers=0,
)
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
        dim: lstm_dim,
        projection_dim: projection_dim,
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
    batching=batching,
    batch_size=batch_size,
    num_epochs=num_epochs,
    num_samples=num_samples,
    unroll_steps=unroll_steps,
    mixed_precision=mixed_precision,
    cuda_device=cuda_device,
    sparse_softmax=sparse_softmax,
    num_workers=num_workers,
  )
