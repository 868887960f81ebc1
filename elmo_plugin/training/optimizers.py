"""
Adagrad that updates only the rows a sparse gradient holds, with the dense update's arithmetic.

bilm-tf trains the biLM with Adagrad, and the softmax of a 793,471-word vocabulary holds 406M of
its weights. A step uses a few thousand of its rows (the targets and the negatives), and Adagrad
leaves a row whose gradient is zero exactly as it was (its squares add zero to the accumulator,
its update is zero), so updating only the used rows gives the dense update exactly. The sampled
softmax's ``sparse_gradients`` gives those rows as sparse gradients; torch's own Adagrad takes
sparse gradients too, but coalesces them (a sort whose output size the host must read, a wait on
a GPU) and computes the update in another order of operations than its dense path.
"""
from typing import Any, Dict, List, Optional, Tuple

import torch
from allennlp.training.optimizers import Optimizer, make_parameter_groups
from torch.optim.adagrad import adagrad

from elmo_plugin.modules.sampled_softmax_loss import row_sums_of


@Optimizer.register("dense_sparse_adagrad")
class DenseSparseAdagrad(Optimizer, torch.optim.Adagrad):
    """
    torch's `Adagrad` (AllenNLP's ``"adagrad"``: the same parameters, the same state, so a
    checkpoint of either resumes with the other), except for parameters with a sparse gradient
    of one sparse dimension (the sampled softmax's ``sparse_gradients``): their used rows, and
    only those, go through torch's own dense Adagrad code in the same call as the dense
    parameters, then back into the parameter and its accumulator. Every element is therefore
    computed exactly as the dense update computes it, and no shape depends on the data: a
    repeated id is updated at each of its positions from the same row sums, to the same value.

    Registered as an `Optimizer` with name ``"dense_sparse_adagrad"``.

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
            params=make_parameter_groups(model_parameters, parameter_groups),
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
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
                params,
                grads,
                sums,
                steps,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                lr_decay=group["lr_decay"],
                eps=group["eps"],
                has_sparse_grad=False,
                foreach=group["foreach"],
                maximize=group["maximize"],
                differentiable=group["differentiable"],
                has_complex=any(torch.is_complex(p) for p in params),
                fused=group["fused"],
                grad_scale=getattr(self, "grad_scale", None),
                found_inf=getattr(self, "found_inf", None),
            )
            for parameter, parameter_sum, ids, new_rows, new_sum_rows in row_updates:
                parameter.index_copy_(0, ids, new_rows)
                parameter_sum.index_copy_(0, ids, new_sum_rows)
        return loss
