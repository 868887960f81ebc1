"""
How the modules that define ELMo are computed fast on a given device and precision.

The modules one level up (`CharacterEncoder`, `Highway`, `ProjectedLstmLayer`, `ElmoBiLstm`,
`ElmoBiLm`, `ScalarMix`, `Elmo`) say what is computed, in plain PyTorch, with no branch on the
device, the dtype, autocast or gradients. Where a computation has a faster way, the module makes
one call into this package, and the call decides here, once, how to run it:

- `bfloat16`: the one question whether a device multiplies in bfloat16 (asked by inference's
  ``precision`` and by pretraining's ``mixed_precision`` alike);
- `weight_copies`: frozen weights' copies in autocast's dtype, kept between calls;
- `linear`: ``layer(inputs)`` for the highway and projection layers, with those copies;
- `character_convolutions`: the max-pooled character convolutions over the windows that can
  differ, beside the plain ``nn.Conv1d`` definition they equal;
- `lstm_layer` and `lstm_recurrence`: one LSTM layer's run (rows sorted and packed, the input
  product for all steps at once), its training loop with a hand-written backward and its
  inference loop, beside the plain step-by-step definition they equal;
- `compiled_step`: that recurrence compiled with ``torch.compile`` for batches without padding
  (training's fixed-shape windows, inference batches of one length), where a ``compile`` setting
  asks for it (`compiled_step.compiling`); chosen once per layer call by `lstm_layer`;
- `float32_products`: TF32 for float32 products on a CUDA GPU (training's and inference's ``tf32``
  options; nothing on a CPU).

Each fast path sits beside the plain one it must equal, and tests compare the two.
"""
