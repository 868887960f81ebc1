// Baseline (no ELMo); see ner_wnut17.libsonnet.
(import "ner_wnut17.libsonnet")(use_elmo=false)
