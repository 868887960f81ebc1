// NER on WNUT-17 "Emerging and Rare Entities" (tweets, Reddit, YouTube and StackExchange comments;
// six types, BIO): allennlp-models' crf_tagger, span F1. The text of a domain a general biLM
// knows little of: the task of docs/adapting.md's protocol (the biLM fine-tuned on train.txt's
// tokens, chosen by dev.txt's perplexity, then frozen here).
local common = import "task_common.libsonnet";

function(
  use_elmo,
  data_root=common.shared_data,
  elmo=common.english_elmo,
  // 2,915 training sentences: more epochs than WikiANN's 20,000, the best kept by dev F1.
  num_epochs=10,
  cuda_device=-1,
) {
  dataset_reader: { type: "token_tag_conll", token_indexers: common.token_indexers(use_elmo, elmo) },
  train_data_path: data_root + "/en/ner/wnut17/train.txt",
  validation_data_path: data_root + "/en/ner/wnut17/dev.txt",
  test_data_path: data_root + "/en/ner/wnut17/test.txt",
  evaluate_on_test: true,
  model: {
    type: "crf_tagger",
    label_encoding: "BIO",
    constrain_crf_decoding: true,
    calculate_span_f1: true,
    dropout: 0.25,
    text_field_embedder: common.text_field_embedder(use_elmo, elmo),
    encoder: {
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo),
      hidden_size: 100,
      bidirectional: true,
    },
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(32),
  trainer: common.trainer(num_epochs, "+f1-measure-overall", cuda_device),
}
