"""
How the modules that define ELMo (one level up, plain PyTorch with no branch on device, dtype or
gradients) are computed fast on a given device and precision. A module makes one call here with
its weights, clips and tensors and its `plan.ExecutionPlan` (None: plain PyTorch), and the call
decides how to run it. Each fast path names the plain definition it must equal (`fast_paths`),
and one test runs every pair.
"""
