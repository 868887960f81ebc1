// Sentence classification: the genre of an English-EWT sentence (answers, email, newsgroup,
// reviews, weblog; the prefix of its sent_id), allennlp's basic_classifier, accuracy.
// Chosen because it is labelled English text already in ../shared/data; no download needed.
local common = import "task_common.libsonnet";

function(
  use_elmo,
  data_root=common.shared_data,
  elmo=common.english_elmo,
  num_epochs=4,
  cuda_device=-1,
) {
  dataset_reader: { type: "conllu_sentence_genre", token_indexers: common.token_indexers(use_elmo, elmo) },
  train_data_path: data_root + "/en/pos/en_ewt-ud-train.conllu",
  validation_data_path: data_root + "/en/pos/en_ewt-ud-dev.conllu",
  test_data_path: data_root + "/en/pos/en_ewt-ud-test.conllu",
  evaluate_on_test: true,
  model: {
    type: "basic_classifier",
    dropout: 0.25,
    text_field_embedder: common.text_field_embedder(use_elmo, elmo),
    seq2vec_encoder: {
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo),
      hidden_size: 100,
      bidirectional: true,
    },
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(32),
  trainer: common.trainer(num_epochs, "+accuracy", cuda_device),
}
