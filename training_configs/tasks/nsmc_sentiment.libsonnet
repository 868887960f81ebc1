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
// 2,344 batches of 64 per epoch); the function's num_epochs (or -o '{"trainer.num_epochs": N}')
// changes it.
//
// pooled=true (nsmc_sentiment_elmo_pooled.jsonnet) replaces the BiLSTM by the mean over the
// tokens (AllenNLP's `boe` encoder, averaged): with ELMo, the classifier then sees the sentence
// vector that `allennlp elmo --sentence-vectors` writes (plus the mean of the word vectors),
// under the learned layer mix; only the mix, the word vectors and the output layer are trained.
//
// The +ELMo variant follows the Korean course: the Korean biLM (`korean_elmo` in
// task_common.libsonnet: what `make pretrain-ko` exports to build/ko/bilm) frozen, layer
// normalisation before the mix, 30 bytes per token in the `elmo_characters` indexer.
local common = import "task_common.libsonnet";

function(
  use_elmo,
  data_root=common.shared_data,
  elmo=common.korean_elmo,
  // ELMo at the encoder's output too (use_elmo must be true): task_common's
  // encoder_with_elmo_at_output.
  elmo_at_output=false,
  // The mean over the tokens instead of the BiLSTM (no ELMo at the output then).
  pooled=false,
  num_epochs=2,
  cuda_device=-1,
)
  assert !elmo_at_output || use_elmo : "elmo_at_output needs use_elmo=true";
  assert !(pooled && elmo_at_output) : "pooled has no encoder output to add ELMo to";
  {
  dataset_reader: {
    type: "sentiment_tsv",
    tokenizer: { type: "korean" },
    token_indexers: common.token_indexers(use_elmo, elmo),
  },
  train_data_path: data_root + "/ko/sentiment/train.tsv",
  test_data_path: data_root + "/ko/sentiment/test.tsv",
  evaluate_on_test: true,
  model: {
    type: "basic_classifier",
    dropout: 0.25,
    text_field_embedder: common.text_field_embedder(use_elmo, elmo, elmo_at_output),
    seq2vec_encoder: if pooled then {
      type: "boe",
      embedding_dim: common.embedding_dim(use_elmo, elmo),
      averaged: true,
    } else common.encoder_with_elmo_at_output({
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo),
      hidden_size: 100,
      bidirectional: true,
    }, elmo, elmo_at_output),
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(64),
  // Without validation data the metric is unused and the checkpoint kept is the last epoch's.
  trainer: common.trainer(num_epochs, "+accuracy", cuda_device),
}
