// The same model as klue_ner.jsonnet plus ELMo (our pretrained Korean biLM, frozen).
(import "klue_ner.libsonnet")(use_elmo=true)
