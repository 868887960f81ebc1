// Baseline (no ELMo); see pos_ewt.libsonnet.
(import "pos_ewt.libsonnet")(use_elmo=false)
