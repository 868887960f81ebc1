"""
TF-Hub ELMo modules (``google/elmo/2``, ``/3``, DeepPavlov's): SavedModels whose variables carry
bilm-tf's names, read into the bilm-tf layout without TensorFlow
(`elmo_plugin.model_files.tf_hub.elmo_module.read_tf_hub_module`).
"""
