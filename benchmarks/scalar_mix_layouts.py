"""
What keeping ``ScalarMix.scalar_parameters`` as AllenNLP's ``ParameterList`` costs against one
vector (elmo_plugin 0.1's layout): the forward (and backward) time of the mix, on CPU, one
thread, for ELMo's three layers at two sizes. Prints a markdown table.

    .venv/bin/python benchmarks/scalar_mix_layouts.py

The vector variant is the 0.1 computation (``softmax(vector)``); the list variant is
`elmo_plugin.modules.scalar_mix.ScalarMix` as it is now (``softmax(cat(list))``). The rest of
the mix (stack + tensordot) is the same code in both.
"""
import timeit
from pathlib import Path

import torch

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix

# The golden test fixture's tiny biLM.
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "elmo_allennlp"


class VectorMix(ScalarMix):
    """ScalarMix with the 0.1 layout: one (num_layers,) parameter."""

    def __init__(self, num_layers: int) -> None:
        super().__init__(num_layers)
        del self.scalar_parameters
        self.scalar_parameters = torch.nn.Parameter(torch.zeros(num_layers))  # type: ignore

    def layer_weights(self) -> torch.Tensor:
        return torch.softmax(self.scalar_parameters, dim=0)  # type: ignore


def per_call_us(function, repeats: int) -> float:
    function()
    best = min(timeit.repeat(function, number=repeats, repeat=5))
    return best / repeats * 1e6


def main() -> None:
    torch.set_num_threads(1)
    print("| layers x (batch, time, dim) | what | vector (us) | list (us) | list - vector (us) |")
    print("|---|---|---:|---:|---:|")
    for shape, repeats in (((3, 5, 32), 2000), ((32, 20, 1024), 50)):
        layers = [torch.randn(*shape, requires_grad=True) for _ in range(3)]
        mask = torch.ones(shape[:2], dtype=torch.bool)
        for name, variant in (("weights only", "weights"), ("forward", "forward"),
                              ("forward + backward", "backward")):
            times = []
            for mix in (VectorMix(3), ScalarMix(3)):
                if variant == "weights":
                    run = mix.layer_weights
                elif variant == "forward":
                    def run(mix=mix):
                        with torch.no_grad():
                            mix(layers, mask)
                else:
                    def run(mix=mix):
                        mix(layers, mask).sum().backward()
                times.append(per_call_us(run, repeats))
            print(f"| 3 x {shape} | {name} | {times[0]:.1f} | {times[1]:.1f} | "
                  f"{times[1] - times[0]:+.1f} |")
    # For scale: a whole ELMo forward of the smallest model there is (the golden test fixture:
    # 16-dimensional projections), a batch of 3 sentences of 10 tokens.
    elmo = Elmo(str(FIXTURES / "options.json"), str(FIXTURES / "lm_weights.hdf5"), 1, dropout=0.0)
    ids = batch_to_ids([["word"] * 10] * 3)

    def run_elmo():
        with torch.no_grad():
            elmo(ids)

    print(f"\nWhole Elmo forward, test fixture biLM, batch 3 x 10 tokens: "
          f"{per_call_us(run_elmo, 50):.0f} us")


if __name__ == "__main__":
    main()
