// What every biLM pretraining config shares; each config passes its model options and sizes.
//
// Every config is a complete AllenNLP config with defaults: `allennlp train CONFIG` runs as it is.
// Change values with AllenNLP's overrides, e.g.
//   -o '{"train_data_path": "corpus/train/*.txt", "validation_data_path": "corpus/heldout.txt",
//        "vocabulary.vocabulary_file": "vocab.txt", "trainer.num_epochs": 3,
//        "model.mixed_precision": true, "trainer.cuda_device": 0}'
// or import the config's function into your own config and call it with arguments
// (docs/pretraining.md).
//
// The arguments are checked here, when the config is read: a wrong value (0 epochs, a batch size
// of 2.5, a number given as a string) is one error naming the argument, before `allennlp train`
// creates the serialization directory, instead of an obscure failure later ("best.th does not
// exist" after 0 epochs). AllenNLP's -o overrides are applied after this, so the plugin checks
// what they can change that matters most again (`trainer.num_epochs`, in the
// `check_training_settings` callback).
local is_integer(value) = std.isNumber(value) && value == std.floor(value);
local integer_at_least(name, value, minimum) =
  is_integer(value) && value >= minimum
  || error name + " must be an integer >= " + minimum + ", got " + std.manifestJson(value);
local null_or_integer_at_least(name, value, minimum) =
  value == null || integer_at_least(name, value, minimum);
local positive_number_or_null(name, value) =
  value == null || std.isNumber(value) && value > 0
  || error name + " must be a number > 0 or null, got " + std.manifestJson(value);
local boolean(name, value) =
  std.isBoolean(value) || error name + " must be true or false, got " + std.manifestJson(value);

{
  config(
    options,
    train_data_path,
    validation_data_path,
    vocabulary_file,
    batch_size,
    num_epochs,
    num_samples,
    batching="sentences",
    max_sentence_length=400,
    unroll_steps=20,
    checkpoint_seconds=null,
    // bilm-tf's Adagrad by default: dense_sparse_adagrad where the softmax's gradients are sparse.
    optimizer=null,
    sparse_softmax=false,
    // Stream batching: the forward and backward streams made in two processes of their own.
    parallel_directions=false,
    learning_rate_scheduler=null,
    mixed_precision=false,
    cuda_device=-1,
    num_workers=0,
    compile="auto",
    tf32=false,
  )::
    assert batching == "sentences" || batching == "stream" :
           "batching must be \"sentences\" or \"stream\", got " + std.manifestJson(batching);
    assert integer_at_least("num_epochs", num_epochs, 1);
    assert integer_at_least("batch_size", batch_size, 1);
    assert integer_at_least("num_samples", num_samples, 1);
    assert integer_at_least("unroll_steps", unroll_steps, 1);
    assert null_or_integer_at_least("max_sentence_length", max_sentence_length, 1);
    assert positive_number_or_null("checkpoint_seconds", checkpoint_seconds);
    assert integer_at_least("num_workers", num_workers, 0);
    assert integer_at_least("cuda_device", cuda_device, -1);
    assert boolean("mixed_precision", mixed_precision);
    assert boolean("tf32", tf32);
    assert boolean("sparse_softmax", sparse_softmax);
    assert boolean("parallel_directions", parallel_directions);
    assert std.member([true, false, "auto", "default", "reduce-overhead", "max-autotune",
                       "max-autotune-no-cudagraphs"], compile)
           || error "compile must be true, false, \"auto\" or a torch.compile mode, got "
                    + std.manifestJson(compile);
    local stream = batching == "stream";
    local reader = {
      type: "bilm_corpus",
      mode: batching,
      max_characters_per_token: options.char_cnn.max_characters_per_token,
      max_sentence_length: max_sentence_length,
      batch_size: batch_size,
      unroll_steps: unroll_steps,
    };
    {
      dataset_reader: reader,
      // Validation always reads one sentence per row from zero state, as embedding does, so
      // its perplexity is comparable across batching modes.
      validation_dataset_reader: reader + { mode: "sentences", shuffle: false },
      train_data_path: train_data_path,
      validation_data_path: validation_data_path,
      vocabulary: { type: "from_bilm_tf_file", vocabulary_file: vocabulary_file },
      model: {
        type: "elmo_bilm",
        num_samples: num_samples,
        options: options,
        // bfloat16 autocast in training where the device has bfloat16 arithmetic (docs/gpu.md).
        mixed_precision: mixed_precision,
        // The LSTM recurrence compiled for stream batching's fixed-shape windows ("auto": where
        // measured faster, docs/gpu.md), and TF32 float32 products on a CUDA GPU.
        compile: compile,
        tf32: tf32,
        // Sparse gradients of the softmax's rows that a step uses (its targets and negatives),
        // for an optimizer that updates only those: at a large vocabulary the dense update of
        // the whole softmax costs more than the rest of the step (docs/pretraining.md).
        sparse_softmax_gradients: sparse_softmax,
      },
      data_loader:
        if stream then
          // The stream windows' tensors made directly (elmo_plugin/data/stream_batches.py: the
          // same tensors as AllenNLP's loader, ten times as fast and more), in the reader's order:
          // row i of a batch continues row i of the previous batch.
          { type: "bilm_stream", batch_size: batch_size }
          + (if parallel_directions then { parallel_directions: true } else {})
        else {
          num_workers: num_workers,
          // Read lazily in chunks (a corpus larger than memory trains) and reshuffle each epoch.
          max_instances_in_memory: 100 * batch_size,
          // Sentences of similar length together: little padding, so little wasted compute.
          batch_sampler: { type: "bucket", batch_size: batch_size, sorting_keys: ["tokens"] },
        },
      // A plain loader: the bucket sampler draws from Python's random generator even when not
      // shuffling, which would make a resumed run (`allennlp train -r`) diverge.
      validation_data_loader: { batch_size: 64, shuffle: false },
      trainer: {
        num_epochs: num_epochs,
        cuda_device: cuda_device,
        grad_norm: 10.0,
        // bilm-tf's recipe by default: Adagrad 0.2, initial accumulator 1.0; with sparse softmax
        // gradients its row by row form, which updates exactly as Adagrad does.
        optimizer: if optimizer != null then optimizer else {
          type: if sparse_softmax then "dense_sparse_adagrad" else "adagrad",
          lr: 0.2,
          initial_accumulator_value: 1.0,
        },
        validation_metric: "-ppl",
        // keep_freed_memory: glibc keeps freed activations for the next step instead of
        // faulting their pages in again (about 30% faster Original-size steps on CPU).
        callbacks: [
          { type: "tensorboard" },
          { type: "keep_freed_memory" },
          { type: "check_training_settings" },
          // Counts the batches per epoch for linear_decay_over_corpus (a no-op otherwise).
          { type: "count_batches_per_epoch" },
        ],
      } + (
        if learning_rate_scheduler == null then {}
        else { learning_rate_scheduler: learning_rate_scheduler }
      ) + (
        if checkpoint_seconds == null then {}
        else {
          // Mid-epoch checkpoints: `allennlp train -r` after a kill resumes from the last one.
          checkpointer: { save_every_num_seconds: checkpoint_seconds, keep_most_recent_by_count: 2 },
        }
      ),
    },

  // Adam with a linear decay to zero over the run, for the CPU-sized configs: with a few
  // thousand updates per epoch, the last ones at a small step size are worth more than a constant
  // rate (benchmarks/log.md, bilm_small Runs 1 and 2). The decay spans the corpus actually trained
  // on: with `steps_per_epoch` null (the default) the `count_batches_per_epoch` callback counts
  // the training data's batches when training starts (elmo_plugin/training/corpus_schedule.py),
  // so `-o '{"train_data_path": ...}'` on another corpus needs nothing else; a number is used as
  // given.
  linear_decay(steps_per_epoch=null)::
    assert null_or_integer_at_least("steps_per_epoch", steps_per_epoch, 1);
    { type: "linear_decay_over_corpus", end_learning_rate: 0.0 }
    + (if steps_per_epoch == null then {} else { num_steps_per_epoch: steps_per_epoch }),
}
