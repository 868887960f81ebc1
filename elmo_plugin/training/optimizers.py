"""
Adagrad that updates only the rows a sparse gradient holds, with the dense update's arithmetic:
Adagrad leaves a row whose gradient is zero as it was, so updating the used rows of the sampled
softmax gives the dense update exactly (torch's own sparse Adagrad coalesces, a host read, and
computes in another order).
"""
from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.training.optimizers import Optimizer, make_parameter_groups
from torch.optim.adagrad import adagrad

from elmo_plugin.modules.sampled_softmax_loss import row_sums_of

# What torch's adagrad function takes from a parameter group as it is.
_GROUP_SETTINGS = ("lr", "weight_decay", "lr_decay", "eps", "foreach", "maximize", "differentiable", "fused")


@Optimizer.register("dense_sparse_adagrad")
class DenseSparseAdagrad(Optimizer, torch.optim.Adagrad):
    """
    torch's `Adagrad` (AllenNLP's ``"adagrad"``, the same parameters and state), except that the
    used rows of a sparse row gradient go through torch's own dense Adagrad code with the dense
    parameters, then back into the parameter and its accumulator: every element exactly as the
    dense update computes it, no shape that depends on the data. Registered as an `Optimizer` with
    name ``"dense_sparse_adagrad"``.

    # Parameters

    As AllenNLP's ``"adagrad"``; ``weight_decay`` must be 0 where gradients are sparse (it would
    change every row at every step).
    """

    def __init__(
        self,
        model_parameters: List[Tuple[str, torch.nn.Parameter]],
        parameter_groups: Optional[List[Tuple[List[str], Dict[str, Any]]]] = None,
        lr: float = 0.01,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        super().__init__(
            params=make_parameter_groups(model_parameters, parameter_groups), lr=lr, lr_decay=lr_decay,
            weight_decay=weight_decay, initial_accumulator_value=initial_accumulator_value, eps=eps,
        )

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params: List[torch.Tensor] = []
            grads: List[torch.Tensor] = []
            sums: List[torch.Tensor] = []
            steps: List[torch.Tensor] = []
            # (parameter, accumulator, ids, updated rows, updated accumulator rows)
            row_updates = []
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                state = self.state[parameter]
                grad = parameter.grad
                parameter_sum = state["sum"]
                if grad.is_sparse:
                    if group["weight_decay"] != 0:
                        raise RuntimeError(
                            "dense_sparse_adagrad: weight_decay changes every row at every step; "
                            "it needs dense gradients"
                        )
                    if grad.sparse_dim() != 1:
                        raise RuntimeError(
                            "dense_sparse_adagrad takes sparse gradients of rows (one sparse "
                            f"dimension), got {grad.sparse_dim()} sparse dimensions"
                        )
                    rows = row_sums_of(grad)
                    # Every position gets its row's whole gradient; repeated ids compute equal
                    # rows, so writing them back in any order gives the same result.
                    grad = rows.sums.index_select(0, rows.first)
                    row_updates.append(
                        (parameter, parameter_sum, rows.ids,
                         parameter.index_select(0, rows.ids), parameter_sum.index_select(0, rows.ids))
                    )
                    parameter, parameter_sum = row_updates[-1][3], row_updates[-1][4]
                params.append(parameter)
                grads.append(grad)
                sums.append(parameter_sum)
                steps.append(state["step"])
            adagrad(
                params, grads, sums, steps,
                has_sparse_grad=False,
                has_complex=any(torch.is_complex(p) for p in params),
                grad_scale=getattr(self, "grad_scale", None),
                found_inf=getattr(self, "found_inf", None),
                **{key: group[key] for key in _GROUP_SETTINGS},
            )
            for parameter, parameter_sum, ids, new_rows, new_sum_rows in row_updates:
                parameter.index_copy_(0, ids, new_rows)
                parameter_sum.index_copy_(0, ids, new_sum_rows)
        return loss
