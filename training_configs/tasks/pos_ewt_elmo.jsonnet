// The same model as pos_ewt.jsonnet plus ELMo (our pretrained English biLM, frozen).
(import "pos_ewt.libsonnet")(use_elmo=true)
