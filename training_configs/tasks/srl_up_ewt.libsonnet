// SRL on Universal PropBank English-EWT: allennlp-models' `srl` model (BIO tags per predicate,
// span F1 by the CoNLL srl-eval.pl script). The shared data has no UP train file, so the model
// trains on dev and is tested on test, with no validation set: a fixed number of epochs.
local common = import "task_common.libsonnet";

function(
  use_elmo,
  data_root=common.shared_data,
  elmo=common.english_elmo,
  num_epochs=15,
  cuda_device=-1,
) {
  dataset_reader: { type: "universal_propbank_srl", token_indexers: common.token_indexers(use_elmo, elmo) },
  train_data_path: data_root + "/en/srl/up_ewt/en_ewt-up-dev.conllu",
  test_data_path: data_root + "/en/srl/up_ewt/en_ewt-up-test.conllu",
  evaluate_on_test: true,
  model: {
    type: "srl",
    binary_feature_dim: 50,
    embedding_dropout: 0.25,
    text_field_embedder: common.text_field_embedder(use_elmo, elmo),
    encoder: {
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo) + 50,
      hidden_size: 100,
      num_layers: 2,
      bidirectional: true,
    },
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(32),
  // 15 epochs: the training set is small (4,977 predicates); 5 left the baseline at 25 F1.
  trainer: common.trainer(num_epochs, "-loss", cuda_device),
}
