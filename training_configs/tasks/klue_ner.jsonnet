// KLUE-NER baseline: morpheme word embeddings, a character CNN and a BiLSTM-CRF, scored on
// characters as KLUE scores it (klue_ner.libsonnet).
(import "klue_ner.libsonnet")(use_elmo=false)
