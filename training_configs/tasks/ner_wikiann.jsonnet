// Baseline (no ELMo); see ner_wikiann.libsonnet.
(import "ner_wikiann.libsonnet")(use_elmo=false)
