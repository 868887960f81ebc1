// Korean binary sentiment: NSMC-style movie reviews (`ko/sentiment`, label 0 negative, 1
// positive; rebuilt from the raw NSMC reviews, NOT the official split, so scores are not
// comparable to published NSMC numbers: ../shared/data/README.md, section 7). Reader
// `sentiment_tsv` with the Mecab morpheme tokenizer (`korean`), allennlp's basic_classifier over
// a BiLSTM as in genre_ewt, accuracy.
//
// No validation set. The data has a train and a test split only, and the test split must not
// choose anything (neither the epoch count nor the kept epoch), or its score is no longer an
// estimate. So the configs train for a fixed number of epochs on all 150,000 training reviews,
// keep the last epoch, and evaluate once on the 50,000 test reviews. Baseline and +ELMo get the
// same epochs, so the comparison is fair.
//
// Epochs: 2 by default, a CPU-affordable choice rather than a tuned one (150,000 reviews are
// 2,344 batches of 64 per epoch); ELMO_TASK_NUM_EPOCHS=N overrides it, as for every task config.
//
// The +ELMo variant follows the Korean course: the biLM (ELMO_KO_OPTIONS_FILE /
// ELMO_KO_WEIGHT_FILE, by default the one `make pretrain-ko-small` exports to
// build/ko_small/bilm) frozen, layer normalisation before the mix, 30 bytes per token in the
// `elmo_characters` indexer (the Korean biLMs' max_characters_per_token), and its output size
// from ELMO_KO_TASK_ELMO_DIM (256 for bilm_ko_small and bilm_ko).
local common = import "task_common.libsonnet";

local elmo = {
  max_characters: 30,
  options_var: "ELMO_KO_OPTIONS_FILE",
  weight_var: "ELMO_KO_WEIGHT_FILE",
  dim_var: "ELMO_KO_TASK_ELMO_DIM",
  do_layer_norm: true,
};

function(use_elmo) {
  dataset_reader: {
    type: "sentiment_tsv",
    tokenizer: { type: "korean" },
    token_indexers: common.token_indexers(use_elmo, max_characters=elmo.max_characters),
  },
  train_data_path: common.data("ko/sentiment/train.tsv"),
  test_data_path: common.data("ko/sentiment/test.tsv"),
  evaluate_on_test: true,
  model: {
    type: "basic_classifier",
    dropout: 0.25,
    text_field_embedder: common.text_field_embedder(
      use_elmo,
      options_var=elmo.options_var,
      weight_var=elmo.weight_var,
      do_layer_norm=elmo.do_layer_norm,
    ),
    seq2vec_encoder: {
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo_dim_var=elmo.dim_var),
      hidden_size: 100,
      bidirectional: true,
    },
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(64),
  // Without validation data the metric is unused and the checkpoint kept is the last epoch's.
  trainer: common.trainer(common.epochs(2), "+accuracy"),
}
