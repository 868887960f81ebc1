"""
What ``allennlp elmo-export`` writes: a training run's or a task model's biLM in bilm-tf's format
(`archive_to_bilm_tf`), or any biLM the plugin loads as one ONNX graph (`onnx_export`, with the
biLM's forward written for it in `scan_forward`). Nothing here is imported by ``import
elmo_plugin`` beyond the command's own needs, and PyTorch's private scan only while exporting.
"""
