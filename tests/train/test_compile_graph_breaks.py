"""torch.compile without graph breaks (issue #24, point 5): what `trainer.compile` compiles of a training step (the
model's stack, `LanguageModel.compile_parts`, and its sparse head) traces as whole graphs for every objective, on
the batches training makes. `torch._dynamo.explain` counts the breaks; a break would also be a host sync on a GPU
(the padding check, `bool((ids == pad).any())`, now answered on the host when the batch is made)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch._dynamo
from omegaconf import OmegaConf

from lmpt.config.schema import ModelConfig
from lmpt.data.sampler import StepLayout
from lmpt.data.sampling import training_sampler
from lmpt.model.build import padded_vocab_size
from lmpt.model.head import rows_loss
from lmpt.objectives.registry import OBJECTIVES, build_objective
from lmpt.train.batches import StepBatches

SEQ_LEN = 32
TINY = OmegaConf.structured(ModelConfig(name="tiny", d_model=32, n_layers=2, n_heads=2, ffn_dim=64, max_seq_len=64))
CONFIGS = {name: OBJECTIVES[name].config_class for name in ("clm", "mlm", "nsp", "span", "prefix", "ul2-mixture")}


def compiled_calls(objective_name: str, data, input_padded_known: bool = True) -> tuple[list, list]:
    """The calls a training step makes into the compiled parts: (body args, head args) of one real batch."""
    objective = build_objective(CONFIGS[objective_name](), data.tokenizer, SEQ_LEN, "auto")
    torch.manual_seed(0)
    model = objective.build_model(TINY, padded_vocab_size(data.tokenizer.vocab_size)).train()
    sampler = training_sampler(data, objective.window_length, StepLayout(4), seed=0)
    batch = StepBatches(sampler, objective, start_step=0, max_steps=1)[0][0]
    if not input_padded_known:
        batch = replace(batch, input_padded=None, decoder_padded=None)
    body_calls, head_calls = [], []
    model.body.register_forward_pre_hook(lambda _, args, kwargs: body_calls.append((args, kwargs)), with_kwargs=True)

    def head(*args):
        head_calls.append(args)
        return rows_loss(*args)

    model.loss_of_rows = head
    objective.loss(model(batch), batch)
    return [(model.body, args, kwargs) for args, kwargs in body_calls], head_calls


def graph_breaks(fn, *args, **kwargs) -> int:
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args, **kwargs)
    return explained.graph_break_count


@pytest.mark.parametrize("objective", list(CONFIGS))
def test_training_step_compiles_without_graph_breaks(objective: str, shakespeare) -> None:
    body_calls, head_calls = compiled_calls(objective, shakespeare)
    assert body_calls and head_calls
    for body, args, kwargs in body_calls:
        assert graph_breaks(body, *args, **kwargs) == 0, f"{objective}: the stack breaks the graph"
    for args in head_calls:
        assert graph_breaks(rows_loss, *args) == 0, f"{objective}: the head breaks the graph"


def test_padding_looked_up_on_the_device_would_break_the_graph(shakespeare) -> None:
    """Without the host's note the stack must look at the ids itself: the break the test above would catch."""
    (body, args, kwargs), *_ = compiled_calls("span", shakespeare, input_padded_known=False)[0]
    assert graph_breaks(body, *args, **kwargs) >= 1
