"""PyTorch's own distributed engine under torchrun (or srun's tasks): process group, rank roles, and the few
collectives the loop needs. One process without either is simply world size 1."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from lmpt.errors import LmptError
from lmpt.train.slurm import srun_task_env

STRATEGIES = ("ddp", "fsdp")
T = TypeVar("T")


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def broadcast_object(self, obj: object) -> object:
        """Rank 0's value on every rank (e.g. the run directory rank 0 decided)."""
        if not self.enabled:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather_object(self, obj: object) -> list:
        if not self.enabled:
            return [obj]
        out: list = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def any(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag true on any rank, so every rank takes the same branch (stop, checkpoint) at the same step."""
        if not self.enabled:
            return flags
        # NCCL reduces GPU tensors only; gloo reduces CPU ones
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
        tensor = torch.tensor([float(f) for f in flags], device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tuple(bool(v) for v in tensor.tolist())

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over ranks (metrics: sums and counts add up to the global batch's means)."""
        if self.enabled:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def main_first(self, work: Callable[[], T]) -> T:
        """Rank 0 does `work` first (e.g. builds caches) and the others then repeat it (reusing them). A user
        error on rank 0 is raised on every rank, so none is left waiting in a collective."""
        error: tuple[type[LmptError], str] | None = None
        result = None
        if self.is_main:
            try:
                result = work()
            except LmptError as exc:
                error = (type(exc), str(exc))  # its kind kept: a small text's is said whole by the caller
        said = cast("tuple[type[LmptError], str] | None", self.broadcast_object(error))
        if said is not None:
            raise said[0](said[1])
        return work() if not self.is_main else result  # type: ignore[return-value]

    def leave(self) -> None:
        """After a stop: leave the process group without the closing barrier (rank 0 exits to its scheduler's
        requeue and never reaches it), so a later `close` does nothing."""
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()

    def close(self) -> None:
        """On a clean exit only: a barrier, then destroy (gloo aborts at interpreter exit otherwise)."""
        if self.enabled and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def init_distributed(strategy: str) -> Distributed:
    """Join the process group torchrun describes in the environment, or the one srun's tasks form (SLURM_PROCID,
    SLURM_NTASKS, SLURM_LOCALID, the step's first node as master; set as torchrun's variables); a no-op in a plain
    launch."""
    os.environ.update(srun_task_env(os.environ))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if strategy == "fsdp" and "MASTER_ADDR" not in os.environ:
        raise LmptError("trainer.strategy=fsdp runs under torchrun: torchrun --nproc_per_node=N -m lmpt ...")
    if world_size == 1 and strategy != "fsdp":
        return Distributed()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        use_nccl = torch.cuda.is_available() and torch.cuda.device_count() > local_rank
        if use_nccl:
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if use_nccl else "gloo")
    return Distributed(rank, world_size, local_rank)


def rank_device(requested: torch.device, ctx: Distributed) -> torch.device:
    """Each rank drives its own GPU (LOCAL_RANK); CPU ranks share the CPU."""
    if requested.type == "cuda" and ctx.enabled:
        if torch.cuda.device_count() <= ctx.local_rank:
            raise LmptError(
                f"rank {ctx.rank} wants GPU {ctx.local_rank} but only {torch.cuda.device_count()} are visible: "
                "lower --nproc_per_node to the number of GPUs"
            )
        return torch.device("cuda", ctx.local_rank)
    return requested


def agree_on_run_dir(ctx: Distributed, own_dir: Path) -> Path:
    """Rank 0 decides the run directory; every rank uses it (no per-rank folders)."""
    return Path(str(ctx.broadcast_object(str(own_dir))))


def parallelize(model: torch.nn.Module, ctx: Distributed, device: torch.device, strategy: str, precision_name: str):
    """The module the loop calls. ddp: DistributedDataParallel across ranks (the model itself in one process);
    fsdp: FSDP2 `fully_shard` on every block and the root, parameters, gradients and optimizer state sharded,
    bf16 compute with fp32 gradient reduction under bf16. State dicts always come from the bare model or
    torch.distributed.checkpoint, so checkpoints carry no `module.` prefix."""
    if strategy == "fsdp":
        if precision_name == "fp16":
            raise LmptError("trainer.strategy=fsdp trains in fp32 or bf16: use trainer.precision=bf16 (or fp32)")
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        from lmpt.model.block import Block

        bf16 = precision_name == "bf16"
        # fully_shard's own default policy (parameters in their dtype) unless bf16
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
        for block in [m for m in model.modules() if isinstance(m, Block)]:
            fully_shard(block, mp_policy=policy or MixedPrecisionPolicy())
        fully_shard(model, mp_policy=policy or MixedPrecisionPolicy())
        return model
    if not ctx.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def full_model_state(model: torch.nn.Module, strategy: str) -> dict:
    """The whole model's state dict on CPU (collective under FSDP: every rank must call it)."""
    if strategy != "fsdp":
        return model.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
