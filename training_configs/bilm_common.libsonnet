// What every biLM pretraining config shares; each config passes its model options and sizes.
// Environment variables (defaults in elmo_plugin/config_defaults.py, set when the plugin loads):
//   ELMO_TRAIN_DATA       glob of tokenized files, one sentence per line
//   ELMO_VALIDATION_DATA  held-out file(s), same format (perplexity is computed on them)
//   ELMO_VOCABULARY       bilm-tf vocabulary file (allennlp elmo-vocab builds one)
//   ELMO_BATCHING         "sentences" (default) or "stream" (bilm-tf's packing, state carried)
//   ELMO_MIXED_PRECISION  "true": train in bfloat16 autocast (the model's mixed_precision)
//   ELMO_CUDA_DEVICE, ELMO_NUM_WORKERS, and per config ELMO_BATCH_SIZE, ELMO_NUM_EPOCHS, ...
{
  env(name):: std.extVar(name),
  int(name):: std.parseInt(std.extVar(name)),

  config(options, batch_size, num_epochs, num_samples, max_sentence_length=400,
         unroll_steps=20, checkpoint_seconds=null, batching=null,
         optimizer={ type: "adagrad", lr: 0.2, initial_accumulator_value: 1.0 },
         learning_rate_scheduler=null)::
    local batching_mode = if batching == null then $.env("ELMO_BATCHING") else batching;
    local stream = batching_mode == "stream";
    local reader = {
      type: "bilm_corpus",
      mode: batching_mode,
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
      train_data_path: $.env("ELMO_TRAIN_DATA"),
      validation_data_path: $.env("ELMO_VALIDATION_DATA"),
      vocabulary: { type: "from_bilm_tf_file", vocabulary_file: $.env("ELMO_VOCABULARY") },
      model: {
        type: "elmo_bilm",
        num_samples: num_samples,
        options: options,
        mixed_precision: std.asciiLower($.env("ELMO_MIXED_PRECISION")) == "true",
      },
      data_loader: {
        num_workers: $.int("ELMO_NUM_WORKERS"),
        // Read lazily in chunks (a corpus larger than memory trains) and reshuffle each epoch;
        // a multiple of batch_size so that stream rows stay aligned.
        max_instances_in_memory: 100 * batch_size,
      } + (
        if stream then
          // Row i of a batch continues row i of the previous batch: keep the reader's order.
          { batch_size: batch_size, shuffle: false }
        else
          // Sentences of similar length together: little padding, so little wasted compute.
          { batch_sampler: { type: "bucket", batch_size: batch_size, sorting_keys: ["tokens"] } }
      ),
      // A plain loader: the bucket sampler draws from Python's random generator even when not
      // shuffling, which would make a resumed run (`allennlp train -r`) diverge.
      validation_data_loader: { batch_size: 64, shuffle: false },
      trainer: {
        num_epochs: num_epochs,
        cuda_device: $.int("ELMO_CUDA_DEVICE"),
        grad_norm: 10.0,
        // bilm-tf's recipe by default: Adagrad 0.2, initial accumulator 1.0.
        optimizer: optimizer,
        validation_metric: "-ppl",
        // keep_freed_memory: glibc keeps freed activations for the next step instead of
        // faulting their pages in again (about 30% faster Original-size steps on CPU).
        callbacks: [{ type: "tensorboard" }, { type: "keep_freed_memory" }],
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
}
