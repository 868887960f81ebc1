// Continue pretraining a trained biLM on your own text (docs/adapting.md): `allennlp elmo-adapt`
// runs this config; the same by hand is a config of your own that calls its function,
//   (import "training_configs/bilm_adapt.jsonnet")(start_from="original",
//     train_data_path="my_text/train/*.txt", validation_data_path="my_text/dev.txt")
// and `allennlp train THAT.jsonnet --include-package elmo_plugin -s OUT`.
// start_from is anything `allennlp elmo --model` takes: an elmo_bilm run or its model.tar.gz, an
// export with its softmax (`allennlp elmo-export RUN DIR --include-softmax`), a published name
// ("original" comes with its published softmax), a bilm-tf training checkpoint (model.ckpt-N or its
// directory; source_vocabulary when its vocabulary file does not lie beside it), or a biLM without a
// softmax (a TF-Hub module, another published size), whose new softmax trains first, the biLM frozen.
// The architecture is the source's (read when the config is read); the vocabulary is the source's,
// re-sorted by the new corpus's counts (the order the sampled softmax's sampler assumes), each word
// keeping its softmax row; extend_vocabulary=N adds the corpus's words seen N times or more.
local common = import "bilm_common.libsonnet";

function(
  start_from=null,
  train_data_path=null,
  validation_data_path=null,
  // One epoch, as the paper fine-tuned its biLM on a task's text (Supplement A.1).
  num_epochs=1,
  extend_vocabulary=null,
  source_vocabulary=null,
  // null: the recipe below (Adam for a source without Adagrad accumulators, bilm-tf's Adagrad 0.2
  // going on with a checkpoint's).
  learning_rate=null,
  batch_size=64,
  // null: 8192 negatives as bilm-tf for a vocabulary of more than 100,000 words, else 1024.
  num_samples=null,
  // Epochs of the softmax alone before num_epochs of everything; null: one for a source without a
  // softmax, none otherwise.
  softmax_first_epochs=null,
  // Held-out text of the source's domain, measured at the start and after every epoch: what
  // adapting costs there.
  source_validation_data_path=null,
  // Measure validation_data_path every this many batches too (long epochs); null: per epoch only.
  validate_every_num_batches=null,
  checkpoint_seconds=600,
  cuda_device=-1,
)
  assert start_from != null : "start_from must name the language model to adapt (a run, an export with its softmax, a published model's name, a bilm-tf checkpoint, any ELMo model)";
  assert train_data_path != null : "train_data_path must name the new corpus (a glob of tokenized files, one sentence a line)";
  assert validation_data_path != null : "validation_data_path must name held-out text of the new corpus, which chooses the best epoch";
  assert extend_vocabulary == null || std.isNumber(extend_vocabulary) && extend_vocabulary >= 1
         : "extend_vocabulary must be a minimum count >= 1 or null, got " + std.manifestJson(extend_vocabulary);
  local read_source = std.native("elmo_adaptation_source");
  assert read_source != null : "bilm_adapt.jsonnet reads its source with the plugin: --include-package elmo_plugin";
  local source = read_source(std.manifestJson({ start_from: start_from, source_vocabulary: source_vocabulary }));
  local large = source.vocabulary_size != null && source.vocabulary_size > 100000;
  local adagrad = source.has_adagrad;
  local first = if softmax_first_epochs != null then softmax_first_epochs else if source.has_softmax then 0 else 1;
  local config = common.config(
    options=source.options,
    train_data_path=train_data_path,
    validation_data_path=validation_data_path,
    vocabulary_file=null,
    batch_size=batch_size,
    // The epochs of the softmax alone come first, before num_epochs of everything.
    num_epochs=first + num_epochs,
    num_samples=if num_samples != null then num_samples else if large then 8192 else 1024,
    checkpoint_seconds=checkpoint_seconds,
    // Above 100,000 words only the softmax rows a step uses are updated (their sparse gradients,
    // the optimizers' row by row forms): the dense update would cost more than the rest of a step.
    sparse_softmax=large,
    optimizer=if adagrad then { type: if large then "dense_sparse_adagrad" else "adagrad",
                                lr: if learning_rate != null then learning_rate else 0.2,
                                initial_accumulator_value: 1.0 }
              else { type: if large then "dense_sparse_adam" else "adam",
                     lr: if learning_rate != null then learning_rate else 0.001 },
    learning_rate_scheduler=if adagrad then null else common.linear_decay(),
    cuda_device=cuda_device,
  );
  config + {
    vocabulary: {
      type: "adapted_from_source",
      source: start_from,
      corpus: train_data_path,
      [if extend_vocabulary != null then "extend_min_count"]: extend_vocabulary,
      [if source_vocabulary != null then "source_vocabulary_file"]: source_vocabulary,
    },
    model+: {
      start_from: start_from,
      [if source_vocabulary != null then "source_vocabulary_file"]: source_vocabulary,
    },
    trainer+: {
      callbacks+: [{
        type: "continue_pretraining",
        softmax_first_epochs: first,
        [if source_validation_data_path != null then "source_validation_data_path"]: source_validation_data_path,
        [if source_validation_data_path != null then "source_validation_reader"]: config.validation_dataset_reader,
        [if validate_every_num_batches != null then "validate_every_num_batches"]: validate_every_num_batches,
      }],
    },
  }
