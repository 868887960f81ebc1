// nsmc_sentiment_elmo.jsonnet with the mean over the tokens (ELMo's sentence vector, under the
// learned layer mix) instead of the BiLSTM: the pooled ELMo classifier.
(import "nsmc_sentiment.libsonnet")(use_elmo=true, pooled=true)
