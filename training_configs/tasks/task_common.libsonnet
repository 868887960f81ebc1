// What the downstream task configs share: the baseline's word + character embeddings, the
// ELMo additions, the trainer. Each task is a function in its .libsonnet file; its two .jsonnet
// configs call it with use_elmo false and true, and are otherwise the same.
//
// Every task function takes, besides use_elmo (all with defaults):
//   data_root    the root of the task data (default ../shared/data beside the repository)
//   elmo         the biLM of the +ELMo variant: `english_elmo` or `korean_elmo` below, or your own
//                object with the same fields
//   num_epochs   the number of training epochs (default: the task's own)
//   cuda_device  -1 for the CPU
// Change them in a config of your own, e.g. for another biLM (imports are found relative to the
// file that imports, so from a config outside the repository give the repository's path):
//   (import "/path/to/elmo_plugin/training_configs/tasks/ner_wikiann.libsonnet")(
//     use_elmo=true, elmo={ model: "runs/my_bilm/bilm" })
// `elmo` needs either `model` or `options_file` + `weight_file`; its width is read from the
// model (an `output_dim` given must agree with it); `max_characters_per_token` (50) and
// `do_layer_norm` (false) have defaults.
// or change single values of a config with AllenNLP's -o (`-o '{"trainer.num_epochs": 1}'`).
local paths = import "../paths.libsonnet";
{
  shared_data:: paths.shared_data,

  // The biLMs: `model` is what elmo_token_embedder loads (a directory with options.json and
  // weights.hdf5, a training run, or a published model's name), `max_characters_per_token` its
  // bytes per token; its width is read from it (`output_dim` below).
  english_elmo:: {
    // `make pretrain-small` exports it there.
    options_file: paths.english_bilm + "/options.json",
    weight_file: paths.english_bilm + "/weights.hdf5",
    max_characters_per_token: 50,
    do_layer_norm: false,
  },
  korean_elmo:: {
    // `make pretrain-ko` exports it there.
    options_file: paths.korean_bilm + "/options.json",
    weight_file: paths.korean_bilm + "/weights.hdf5",
    max_characters_per_token: 30,
    // As in the Korean course.
    do_layer_norm: true,
  },

  word_dim:: 100,
  character_dim:: 64,

  // The three edits that add ELMo to a model (docs/tasks.md):
  // 1. an `elmo_characters` indexer next to the model's own indexers,
  token_indexers(use_elmo, elmo):: {
    tokens: { type: "single_id", lowercase_tokens: true },
    token_characters: { type: "characters", min_padding_length: 3 },
  } + (
    if use_elmo then {
      elmo: { type: "elmo_characters", max_characters_per_token: $.max_characters_per_token(elmo) },
    } else {}
  ),

  // 2. an `elmo_token_embedder` under the same key,
  text_field_embedder(use_elmo, elmo, elmo_at_output=false)::
    if elmo_at_output then $.elmo_input_output_embedder(elmo)
    else {
      token_embedders: {
        tokens: { type: "embedding", embedding_dim: $.word_dim },
        token_characters: {
          type: "character_encoding",
          // Rows for the characters (AllenNLP's default namespace is "tokens": with fewer words than
          // characters, as in a tiny data set, an index error).
          embedding: { embedding_dim: 16, vocab_namespace: "token_characters" },
          encoder: { type: "cnn", embedding_dim: 16, num_filters: $.character_dim, ngram_filter_sizes: [3] },
        },
      } + (
        if use_elmo then { elmo: { type: "elmo_token_embedder" } + $.elmo_parameters(elmo) } else {}
      ),
    },

  // How ELMo is loaded and mixed, for `elmo_token_embedder` and `elmo_input_output` alike.
  // The keys an `elmo` object takes; any other (a typo: `modle`) is refused, naming both.
  elmo_keys:: ["model", "options_file", "weight_file", "output_dim", "max_characters_per_token",
               "do_layer_norm"],
  checked_elmo(elmo)::
    local unknown = [key for key in std.objectFields(elmo) if std.length(std.find(key, $.elmo_keys)) == 0];
    local quoted(keys) = std.join(", ", ["`" + key + "`" for key in keys]);
    if unknown == [] then elmo
    else error "elmo has the unknown key(s) " + quoted(unknown) + "; it takes " + quoted($.elmo_keys),

  // The biLM's fields that have defaults (the published English models' values).
  max_characters_per_token(elmo):: std.get($.checked_elmo(elmo), "max_characters_per_token", 50),

  elmo_parameters(given_elmo)::
    local elmo = $.checked_elmo(given_elmo);
    {
      do_layer_norm: std.get(elmo, "do_layer_norm", false),
      dropout: 0.5,
    } + (
      if std.objectHas(elmo, "model") then { model: elmo.model }
      else if std.objectHas(elmo, "options_file") && std.objectHas(elmo, "weight_file") then
        { options_file: elmo.options_file, weight_file: elmo.weight_file }
      else error "elmo needs `model` (a directory with options.json and weights.hdf5, a training "
                 + "run, or a published model's name) or `options_file` and `weight_file`; got "
                 + std.manifestJson(elmo)
    ),

  // ELMo at the input and the output of the task's encoder (the paper's section 3.3;
  // docs/tasks.md, "ELMo at the encoder's output"): the baseline's embeddings plus two mixes of one biLM run,
  // the second of which `encoder_with_elmo_at_output` puts beside the encoder's output.
  elmo_input_output_embedder(elmo):: {
    type: "elmo_input_output",
    text_field_embedder: $.text_field_embedder(false, elmo),
    elmo: $.elmo_parameters(elmo),
  },
  encoder_with_elmo_at_output(encoder, elmo, elmo_at_output)::
    if elmo_at_output then { type: "elmo_at_output", encoder: encoder, elmo_dim: $.output_dim(elmo) }
    else encoder,

  // 3. the encoder's input grown by ELMo's size.
  embedding_dim(use_elmo, elmo)::
    $.word_dim + $.character_dim + (if use_elmo then $.output_dim(elmo) else 0),

  // The biLM's output width, read from the model by the plugin (elmo_plugin/training/
  // config_functions.py) when the config is read; a given `output_dim` must agree with it.
  // Without the plugin (std.native gives null) only a given `output_dim` works.
  output_dim(given_elmo)::
    local elmo = $.checked_elmo(given_elmo);
    local read_width = std.native("elmo_output_dim");
    if read_width != null then
      read_width(std.manifestJsonEx({
        [field]: elmo[field]
        for field in ["model", "options_file", "weight_file", "output_dim"]
        if std.objectHas(elmo, field)
      }, ""))
    else if std.objectHas(elmo, "output_dim") then elmo.output_dim
    else error "elmo needs `output_dim`, the biLM's output size (2 x projection_dim), when the "
               + "config is read without elmo_plugin; got " + std.manifestJson(elmo),

  // The paper's penalty on the layer weights, lambda * ||s||^2 (lambda = 0.001).
  regularizer(use_elmo)::
    if use_elmo then { regularizer: { regexes: [["scalar_parameters", { type: "l2", alpha: 0.001 }]] } }
    else {},

  data_loader(batch_size):: {
    batch_sampler: { type: "bucket", batch_size: batch_size, sorting_keys: ["tokens"] },
  },

  trainer(num_epochs, validation_metric, cuda_device):: {
    num_epochs: num_epochs,
    cuda_device: cuda_device,
    optimizer: { type: "adam", lr: 0.001 },
    grad_norm: 5.0,
    validation_metric: validation_metric,
    // Only the best model is kept: the disk holds a copy of the frozen biLM per checkpoint.
    checkpointer: { keep_most_recent_by_count: 1 },
  },
}
