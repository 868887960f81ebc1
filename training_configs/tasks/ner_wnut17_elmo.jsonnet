// The same model as ner_wnut17.jsonnet plus ELMo (our pretrained English biLM, frozen; or the
// biLM adapted to the task's text: elmo={ model: "runs/task_elmo/bilm" }, docs/adapting.md).
(import "ner_wnut17.libsonnet")(use_elmo=true)
