// What the downstream task configs share: the baseline's word + character embeddings, the
// ELMo additions, the trainer. Each task has two configs that differ only in `use_elmo`.
//
// Environment variables (defaults in elmo_plugin/config_defaults.py):
//   ELMO_TASK_DATA          root of the task data (default ../shared/data next to the repo)
//   ELMO_OPTIONS_FILE       bilm-tf options.json of the biLM   (default build/en_small/bilm/...;
//   ELMO_WEIGHT_FILE        bilm-tf weights.hdf5 of the biLM    `make pretrain-small` makes them)
//   ELMO_TASK_ELMO_DIM      the biLM's output size, 2 x projection_dim (256 for bilm_small)
//   ELMO_KO_OPTIONS_FILE, ELMO_KO_WEIGHT_FILE, ELMO_KO_TASK_ELMO_DIM
//                           the same for the Korean biLM (build/ko_small/bilm/...; made by
//                           `make pretrain-ko-small`), read by the Korean task configs
//   ELMO_TASK_NUM_EPOCHS    overrides every task's epoch count ("" keeps each config's own)
//   ELMO_CUDA_DEVICE        -1 for the CPU
{
  data(path):: std.extVar("ELMO_TASK_DATA") + "/" + path,

  epochs(default)::
    if std.extVar("ELMO_TASK_NUM_EPOCHS") == "" then default
    else std.parseInt(std.extVar("ELMO_TASK_NUM_EPOCHS")),

  word_dim:: 100,
  character_dim:: 64,

  // The three edits that add ELMo to a model (README, "Adding ELMo to a model"). Their defaults
  // are the English biLM's; a task on another biLM passes its own (nsmc_sentiment.libsonnet).
  // 1. an `elmo_characters` indexer next to the model's own indexers; `max_characters` is the
  //    biLM's max_characters_per_token (null: the indexer's default, 50, as the English biLM),
  token_indexers(use_elmo, max_characters=null):: {
    tokens: { type: "single_id", lowercase_tokens: true },
    token_characters: { type: "characters", min_padding_length: 3 },
  } + (
    if use_elmo then {
      elmo: { type: "elmo_characters" } + (
        if max_characters == null then {} else { max_characters_per_token: max_characters }
      ),
    } else {}
  ),

  // 2. an `elmo_token_embedder` under the same key, its biLM files named by the environment
  //    variables `options_var` and `weight_var`,
  text_field_embedder(
    use_elmo,
    options_var="ELMO_OPTIONS_FILE",
    weight_var="ELMO_WEIGHT_FILE",
    do_layer_norm=false,
  ):: {
    token_embedders: {
      tokens: { type: "embedding", embedding_dim: $.word_dim },
      token_characters: {
        type: "character_encoding",
        embedding: { embedding_dim: 16 },
        encoder: { type: "cnn", embedding_dim: 16, num_filters: $.character_dim, ngram_filter_sizes: [3] },
      },
    } + (
      if use_elmo then {
        elmo: {
          type: "elmo_token_embedder",
          options_file: std.extVar(options_var),
          weight_file: std.extVar(weight_var),
          do_layer_norm: do_layer_norm,
          dropout: 0.5,
        },
      } else {}
    ),
  },

  // 3. the encoder's input grown by ELMo's size, read from the environment variable `elmo_dim_var`.
  embedding_dim(use_elmo, elmo_dim_var="ELMO_TASK_ELMO_DIM")::
    $.word_dim + $.character_dim + (if use_elmo then std.parseInt(std.extVar(elmo_dim_var)) else 0),

  // The paper's penalty on the layer weights, lambda * ||s||^2 (lambda = 0.001).
  regularizer(use_elmo)::
    if use_elmo then { regularizer: { regexes: [["scalar_parameters", { type: "l2", alpha: 0.001 }]] } }
    else {},

  data_loader(batch_size):: {
    batch_sampler: { type: "bucket", batch_size: batch_size, sorting_keys: ["tokens"] },
  },

  trainer(num_epochs, validation_metric):: {
    num_epochs: num_epochs,
    cuda_device: std.parseInt(std.extVar("ELMO_CUDA_DEVICE")),
    optimizer: { type: "adam", lr: 0.001 },
    grad_norm: 5.0,
    validation_metric: validation_metric,
    // Only the best model is kept: the disk holds a copy of the frozen biLM per checkpoint.
    checkpointer: { keep_most_recent_by_count: 1 },
  },
}
