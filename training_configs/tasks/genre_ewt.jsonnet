// Baseline (no ELMo); see genre_ewt.libsonnet.
(import "genre_ewt.libsonnet")(use_elmo=false)
