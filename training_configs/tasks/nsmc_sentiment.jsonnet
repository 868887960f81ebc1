// Baseline (no ELMo); see nsmc_sentiment.libsonnet.
(import "nsmc_sentiment.libsonnet")(use_elmo=false)
