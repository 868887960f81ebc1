// The same model as srl_up_ewt.jsonnet plus ELMo (our pretrained English biLM, frozen).
(import "srl_up_ewt.libsonnet")(use_elmo=true)
