// The published "Original" ELMo (2x4096_512_2048cnn_2xhighway, 93.6M parameters without the
// softmax) and bilm-tf's recipe: Adagrad 0.2 with initial accumulator 1.0,
// global gradient norm 10, batches of 128 rows cut into windows of 20 tokens with the LSTM state
// carried between windows (stream batching), 8192 sampled negatives, dropout 0.1, 10 epochs.
// On the 1B Word Benchmark (vocabulary of 793,471 tokens) this is two weeks of 3 GTX 1080s in
// bilm-tf. Needs a GPU, and your corpus and vocabulary (it has no default data):
//   allennlp train training_configs/bilm_original.jsonnet --include-package elmo_plugin -s OUT \
//     -o '{"train_data_path": "1b/training-monolingual.tokenized.shuffled/*",
//          "validation_data_path": "1b/heldout.txt", "vocabulary.vocabulary_file": "vocab.txt",
//          "trainer.cuda_device": 0, "model.mixed_precision": true}'
// "model.mixed_precision": true trains in bfloat16 autocast where the device has bfloat16
// arithmetic (2.3x faster steps on a CPU with AVX512-BF16; not yet measured on a GPU).
//
// On one GPU (issue 36): the LSTM recurrence of the fixed-shape windows can run compiled
// (compile: true, or "reduce-overhead" for CUDA graphs; "auto" compiles only where measured
// faster, which no GPU has been yet), and float32 products in TF32 (tf32, off until measured; a
// CUDA setting, nothing on a CPU). TO BE MEASURED on an H100 (`bash benchmarks/gpu/session.sh
// compiled`): which batch size (128 or 256 rows) and which of compile / tf32 /
// mixed_precision is fastest at the same perplexity; the values below are bilm-tf's recipe and
// the defaults until then.
local common = import "bilm_common.libsonnet";

local options = {
  bidirectional: true,
  char_cnn: {
    activation: "relu",
    embedding: { dim: 16 },
    filters: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
    max_characters_per_token: 50,
    n_characters: 261,
    n_highway: 2,
  },
  lstm: {
    dim: 4096,
    projection_dim: 512,
    n_layers: 2,
    cell_clip: 3,
    proj_clip: 3,
    use_skip_connections: true,
  },
  dropout: 0.1,
  // The recipe's own keys, kept so the exported options.json reads like the released one.
  all_clip_norm_val: 10.0,
  n_epochs: 10,
  batch_size: 128,
  unroll_steps: 20,
  n_negative_samples_batch: 8192,
};

function(
  train_data_path=null,
  validation_data_path=null,
  vocabulary_file=null,
  mixed_precision=false,
  cuda_device=-1,
  // TO BE MEASURED on an H100 (see above): the fastest exact setting, and batch 128 or 256.
  compile="auto",
  tf32=false,
  batch_size=128,
)
common.config(
  options=options,
  train_data_path=train_data_path,
  validation_data_path=validation_data_path,
  vocabulary_file=vocabulary_file,
  mixed_precision=mixed_precision,
  cuda_device=cuda_device,
  compile=compile,
  tf32=tf32,
  batch_size=batch_size,
  num_epochs=10,
  num_samples=8192,
  unroll_steps=20,
  batching="stream",
  checkpoint_seconds=1800,
)
