// The same model as genre_ewt.jsonnet plus ELMo (our pretrained English biLM, frozen).
(import "genre_ewt.libsonnet")(use_elmo=true)
