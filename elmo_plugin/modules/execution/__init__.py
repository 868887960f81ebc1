"""
How the modules that define ELMo are computed fast on a given device and precision.

The modules one level up (`CharacterEncoder`, `Highway`, `ProjectedLstmLayer`, `ElmoBiLstm`,
`ElmoBiLm`, `ScalarMix`, `Elmo`) say what is computed, in plain PyTorch, with no branch on the
device, the dtype, autocast or gradients. Where a computation has a faster way, the module makes
one call into this package with its weights, clips and tensors (not itself, as ``nn.LSTM``'s
kernels take them) and the `plan.ExecutionPlan` it was handed, and the call decides here, once,
how to run it:

- `plan`: the execution plan (products' dtype, compile mode, TF32), built once from the device
  and the settings; ``None`` is plain PyTorch;
- `bfloat16`: the one question whether a device multiplies in bfloat16 (asked by inference's
  ``precision`` and by pretraining's ``mixed_precision`` alike);
- `weight_copies`: frozen weights' copies in the products' dtype, kept between calls;
- `linear`: the highway and projection layers' products, with those copies;
- `character_convolutions`: the max-pooled character convolutions over the windows that can
  differ, beside the plain ``nn.Conv1d`` definition they equal;
- `lstm_layer` and `lstm_recurrence`: one LSTM layer's run (rows sorted and packed, the input
  product for all steps at once), the step defined once, its in-place loop for training (with a
  hand-written backward) and inference, beside the plain step-by-step definition they equal;
- `compiled_step`: that definition compiled with ``torch.compile`` for batches without padding
  (training's fixed-shape windows, inference batches of one length), where the plan asks for it;
  chosen once per layer call by `lstm_layer`.

Each fast path names the plain one it must equal (`fast_paths`), and one test runs every pair.
"""
