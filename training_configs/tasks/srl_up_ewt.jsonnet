// Baseline (no ELMo); see srl_up_ewt.libsonnet.
(import "srl_up_ewt.libsonnet")(use_elmo=false)
