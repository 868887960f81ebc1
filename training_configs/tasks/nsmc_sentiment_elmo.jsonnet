// The same model as nsmc_sentiment.jsonnet plus ELMo (our pretrained Korean biLM, frozen).
(import "nsmc_sentiment.libsonnet")(use_elmo=true)
