// Korean NER on KLUE-NER (`ko/ner/klue/original`, KLUE's own character-tagged TSV; six types
// PS LC OG DT TI QT; ../shared/data/README.md, section 8: KLUE's official dev set, split 4,000
// train / 1,000 test). Reader `klue_ner`: Mecab morphemes as tokens (the Korean biLM's units),
// each tagged B/I/O from the entities it overlaps; model `character_span_crf_tagger`
// (allennlp-models' crf_tagger) scored as KLUE scores it, on characters: `entity_macro_f1` (KLUE's
// main NER score) and `char_macro_f1`, after mapping the predicted morpheme entities back to
// characters. About 2.2% of the entities do not start and end on morpheme boundaries (Mecab joins
// e.g. a name with a following character); those a morpheme tagger cannot get exactly right
// (docs/korean.md, "KLUE-NER").
//
// The shared split has train and test only: the configs train on a fixed 90% of train
// (`train.tsv[:90%]`) and select the epoch on the other 10% (`train.tsv[90%:]`); the test split
// is evaluated once, at the end.
local common = import "task_common.libsonnet";

function(
  use_elmo,
  data_root=common.shared_data,
  elmo=common.korean_elmo,
  // ELMo at the encoder's output too (use_elmo must be true): task_common's
  // encoder_with_elmo_at_output.
  elmo_at_output=false,
  num_epochs=10,
  cuda_device=-1,
)
  assert !elmo_at_output || use_elmo : "elmo_at_output needs use_elmo=true";
  {
  dataset_reader: {
    type: "klue_ner",
    tokenizer: { type: "korean" },
    token_indexers: common.token_indexers(use_elmo, elmo),
  },
  train_data_path: data_root + "/ko/ner/klue/original/train.tsv[:90%]",
  validation_data_path: data_root + "/ko/ner/klue/original/train.tsv[90%:]",
  test_data_path: data_root + "/ko/ner/klue/original/test.tsv",
  evaluate_on_test: true,
  model: {
    type: "character_span_crf_tagger",
    label_encoding: "BIO",
    constrain_crf_decoding: true,
    calculate_span_f1: true,
    dropout: 0.25,
    text_field_embedder: common.text_field_embedder(use_elmo, elmo, elmo_at_output),
    encoder: common.encoder_with_elmo_at_output({
      type: "lstm",
      input_size: common.embedding_dim(use_elmo, elmo),
      hidden_size: 100,
      bidirectional: true,
    }, elmo, elmo_at_output),
  } + common.regularizer(use_elmo),
  data_loader: common.data_loader(32),
  trainer: common.trainer(num_epochs, "+entity_macro_f1", cuda_device),
}
