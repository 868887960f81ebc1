"""
How the modules that define ELMo are computed fast on a given device and precision.

The modules one level up (`CharacterEncoder`, `Highway`, `ProjectedLstmLayer`, `ElmoBiLstm`,
`ElmoBiLm`, `ScalarMix`, `Elmo`) say what is computed, in plain PyTorch, with no branch on the
device, the dtype, autocast or gradients. Where a computation has a faster way, the module makes
one call into this package with its weights, clips and tensors (not itself, as ``nn.LSTM``'s
kernels take them) and the `plan.ExecutionPlan` it was handed (None: plain PyTorch), and the
call decides here, once, how to run it: `plan` (the plan itself, built once from the device and
the settings), `bfloat16` (does a device multiply bfloat16 natively?), `weight_copies` (frozen
weights' copies in the products' dtype, kept between calls), `linear` (the highway and
projection products), `character_convolutions` (the max-pooled convolutions over the windows
that can differ), `lstm_layer` and `lstm_recurrence` (one LSTM layer's run: the step defined
once, its in-place loop for training and inference, the hand-written backward), `compiled_step`
(the plain recurrence under ``torch.compile`` for batches without padding), `carried_state` (the
LSTM state kept from one stream batch to the next). Each fast path names
the plain definition it must equal (`fast_paths`), and one test runs every pair.
"""
