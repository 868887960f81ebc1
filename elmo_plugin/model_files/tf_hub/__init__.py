"""TF-Hub ELMo modules (SavedModels with bilm-tf's variables), read without TensorFlow."""
