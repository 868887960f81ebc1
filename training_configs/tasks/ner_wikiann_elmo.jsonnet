// The same model as ner_wikiann.jsonnet plus ELMo (our pretrained English biLM, frozen).
(import "ner_wikiann.libsonnet")(use_elmo=true)
