// The published "Original" ELMo (2x4096_512_2048cnn_2xhighway, 93.6M parameters without the
// softmax) trained with bilm-tf's recipe, as Peters et al. (2018) trained it: 10 passes over the
// 1B Word Benchmark (768,648,884 training tokens a pass, a vocabulary of 793,471 words), 384
// rows x 20 tokens per update (bilm-tf: 128 rows on each of 3 GPUs), the LSTM state carried from
// window to window (stream batching), 8,192 sampled negatives per batch, Adagrad 0.2 with
// initial accumulator 1.0, global gradient norm 10, dropout 0.1. bilm-tf took about two weeks
// on 3 GTX 1080s and reached held-out perplexity 39.7 (forward and backward averaged).
//
// How long it takes here: PROJECTED, NOT MEASURED. The compiled TF32 step ran at 59,125
// tokens/s at 128 rows on one H100 (BENCHMARKS.md, "On a GPU"): 10 passes at that rate are 36
// hours; a day needs 89,000 tokens/s sustained. `bash benchmarks/gpu/session.sh day` measures
// the step at this batch and `allennlp train` over a stream epoch, and projects the hours on 1
// and 8 H100s (benchmarks/gpu/README.md); replace this paragraph with its numbers.
//
// Needs a GPU, your corpus and the vocabulary built from it (it has no default data):
//   allennlp elmo-vocab "1b/training-monolingual.tokenized.shuffled/*" vocab.txt
//   allennlp train training_configs/bilm_original.jsonnet --include-package elmo_plugin -s OUT \
//     -o '{"train_data_path": "1b/training-monolingual.tokenized.shuffled/*",
//          "validation_data_path": "1b/heldout.txt", "vocabulary.vocabulary_file": "vocab.txt",
//          "trainer.cuda_device": 0}'
//
// 384 rows per update on several GPUs of one machine: num_gpus=2, 3, 4, 6 or 8 (a config of your
// own calling this function, docs/pretraining.md) gives each GPU 384 / num_gpus rows (192, 128,
// 96, 64, 48) under AllenNLP's distributed training; the softmax's gradients are then dense (DDP
// all-reduces dense tensors only). Where 384 rows do not fit one GPU's memory, gradient
// accumulation keeps 384 x 20 tokens per update instead, e.g. 3 batches of 128 rows:
//   -o '{"dataset_reader.batch_size": 128, "data_loader.batch_size": 128,
//        "trainer.num_gradient_accumulation_steps": 3}'
// (the three batches are then consecutive windows of the same 128 streams, not 384 streams).
//
// The softmax of 793,471 words holds 406M weights: its gradient and Adagrad's update touch only
// the rows a step uses (sparse_softmax, exactly the dense update: dense_sparse_adagrad).
// "model.mixed_precision": true trains in bfloat16 autocast; compile and tf32 are the execution
// settings of docs/gpu.md, off until a GPU shows they learn what eager float32 learns.
local common = import "bilm_common.libsonnet";

// bilm-tf's tokens per update: 128 rows on each of 3 GPUs, windows of 20.
local rows_per_update = 384;

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
  // GPUs of this machine sharing the 384 rows of an update (AllenNLP's distributed training).
  num_gpus=1,
  compile="auto",
  tf32=false,
  sparse_softmax=true,
)
  assert std.member([1, 2, 3, 4, 6, 8], num_gpus)
         || error "num_gpus must be 1, 2, 3, 4, 6 or 8 (a divisor of 384 rows), got "
                  + std.manifestJson(num_gpus);
  common.config(
    options=options,
    train_data_path=train_data_path,
    validation_data_path=validation_data_path,
    vocabulary_file=vocabulary_file,
    mixed_precision=mixed_precision,
    cuda_device=cuda_device,
    compile=compile,
    tf32=tf32,
    sparse_softmax=sparse_softmax,
    // The data path keeps up with a GPU step: the two stream directions in two processes.
    parallel_directions=true,
    batch_size=rows_per_update / num_gpus,
    num_epochs=10,
    num_samples=8192,
    unroll_steps=20,
    batching="stream",
    checkpoint_seconds=1800,
  ) + (
    if num_gpus == 1 then {}
    else { distributed: { cuda_devices: std.range(0, num_gpus - 1) } }
  )
