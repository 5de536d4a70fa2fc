"""The target run on Ray Train: one ``TorchTrainer.fit()`` with a worker per device, DDP."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mutune.errors import SearchError

__all__ = ["DataParallel", "mup_lr_groups", "refuse_sharded", "train_worker"]


class DataParallel:
    """Data parallelism for :func:`~mutune.training.run.run_loop` over the
    initialised ``torch.distributed`` process group (rank ``rank`` of ``world``)."""

    def __init__(self, rank: int, world: int, *, device: Any = None,
                 stop: Callable[[], bool] | None = None):
        self.rank, self.world, self.device = int(rank), int(world), device
        self._stop = stop

    @property
    def lead(self) -> bool:
        """Whether this worker evaluates and checkpoints (rank 0)."""
        return self.rank == 0

    def wrap(self, model: Any) -> Any:
        """``DistributedDataParallel(model)`` (its parameters are the model's own tensors)."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        if self._on_cuda():
            index = self.device.index
            return DDP(model, device_ids=None if index is None else [index])
        return DDP(model)

    def shard(self, x: Any, y: Any) -> tuple[Any, Any]:
        """Rows ``[rank·B/world, (rank+1)·B/world)`` of a batch of B rows."""
        n = int(x.shape[0])
        if n % self.world:
            raise SearchError(f"the target's batch of {n} rows does not split into "
                              f"{self.world} equal shares: make target.batch_size (or "
                              f"train.batch_size) a multiple of target.num_workers")
        k = n // self.world
        return x[self.rank * k:(self.rank + 1) * k], y[self.rank * k:(self.rank + 1) * k]

    def any(self, *flags: bool) -> tuple[bool, ...]:
        """Each flag OR-ed over the workers (one all-reduce)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor([1.0 if f else 0.0 for f in flags],
                         device=self.device if self._on_cuda() else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return tuple(bool(v > 0) for v in t.tolist())

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over the workers (one float64 all-reduce)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64,
                         device=self.device if self._on_cuda() else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return [float(v) for v in t.tolist()]

    def share(self, obj: Any) -> Any:
        """The leading worker's ``obj`` on every worker (a broadcast of one object)."""
        import torch.distributed as dist

        box = [obj if self.lead else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def stop_requested(self) -> bool:
        """Whether the driver asked the run to stop (the leading worker asks, all agree)."""
        ask = bool(self._stop()) if (self.lead and self._stop is not None) else False
        return bool(self.share(ask))

    def _on_cuda(self) -> bool:
        return self.device is not None and getattr(self.device, "type", "cpu") == "cuda"


def mup_lr_groups(optimizer: Any) -> list[tuple[float, list[tuple[int, ...]]]]:
    """Each parameter group's (learning rate, parameter shapes), in group order: what a μP
    optimizer built on a DDP-wrapped model must share with the unwrapped model's."""
    return [(float(g["lr"]), [tuple(p.shape) for p in g["params"]])
            for g in optimizer.param_groups]


def refuse_sharded(model: Any) -> None:
    """Refuse ``target.parallelism: fsdp``: FSDP's flat parameters drop mup's ``infshape``
    (microsoft/mup#59), so a sharded μP model's per-parameter learning rates (and mup's
    readout scaling) would silently become standard parametrization's.

    Raises:
        ConfigError: always, naming the parameters that would lose their width metadata."""
    from mutune.errors import ConfigError

    names = [n for n, p in model.named_parameters()
             if hasattr(p, "infshape") and p.infshape.ninf() > 0]
    shown = ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
    raise ConfigError(
        "target.parallelism = 'fsdp': FSDP cannot shard a μP model — its flat parameters "
        f"drop mup's width metadata (infshape) of {shown or 'the parameters'} "
        "(microsoft/mup#59), so the μP learning rates would be lost. Use 'ddp' (every worker "
        "holds the whole model) on devices the target fits.")


def _worker_parallel(config: dict[str, Any], ctx: Any, stop: Any) -> DataParallel:
    """This worker's :class:`DataParallel`, on its GPU when the trial asked for GPUs."""
    import ray
    import torch

    from mutune.proxies.device import select_device

    dev = select_device(prefer_cuda=bool(config.get("gpus", 0)))
    device = None
    if dev.kind == "cuda":      # this worker's GPU (Ray Train sets CUDA_VISIBLE_DEVICES)
        import ray.train.torch

        device = ray.train.torch.get_device()
        torch.cuda.set_device(device)
    return DataParallel(ctx.get_world_rank(), ctx.get_world_size(), device=device,
                        stop=lambda: bool(ray.get(stop.get.remote())))


def train_worker(config: dict[str, Any]) -> None:
    """Ray Train's ``train_loop_per_worker``: :func:`~mutune.training.run.run_loop` on this worker,
    reporting through ``ray.train.report``; the run's end goes in a last ``{"ended": status}``."""
    import contextlib
    import tempfile

    import ray.train

    from mutune.training import run_loop

    ctx = ray.train.get_context()
    task, stop = config.pop("task"), config.pop("stop_flag")
    node = ray.get_runtime_context().get_node_id()
    parallel = _worker_parallel(config, ctx, stop)

    from mutune.search.trial.remote_trial import RemoteTier, restore_dir_for

    # ``ray.storage``: the leading worker uploads in the background; Ray Train keeps only the
    # final checkpoint; a restarted group restores from the node's cache or remote storage
    remote = RemoteTier.for_trial(config, str(config["point"].get("key") or "target"),
                                  str(config.get("owner") or ""))

    from mutune.search.backends.ray_train_upload import storage_mover

    # without the remote tier a folder is a scratch copy: moved into Ray's storage, not copied
    upload = {} if remote is not None else {"checkpoint_upload_fn": storage_mover(ctx)}

    def report(metrics: dict[str, Any], folder: Path | None) -> None:
        metrics["node_id"] = node
        if remote is not None:
            remote.checkpointed(metrics, folder)
            folder = remote.for_ray(folder, int(metrics.get("step", 0)))
        ckpt = ray.train.Checkpoint.from_directory(str(folder)) if folder else None
        ray.train.report(metrics, checkpoint=ckpt,
                         **{k: v for k, v in upload.items() if ckpt and v})

    with tempfile.TemporaryDirectory(prefix="mutune-ckpt-") as tmp, \
            contextlib.ExitStack() as stack:
        restore_dir = restore_dir_for(ray.train.get_checkpoint(), config["point"], remote, tmp,
                                      stack)
        # Ray Train holds a reported checkpoint in its storage before ``report`` returns
        # (synchronous upload; moved there without the remote tier): the folders are
        # scratch copies
        status = run_loop(config, task, report=report, parallel=parallel,
                          restore_dir=restore_dir,
                          checkpoint_root=str(remote.cache_dir) if remote else tmp,
                          scratch_checkpoints=remote is None)
        if remote is not None:     # the leading worker clears the cache of a finished run
            remote.close(finished=parallel.lead and status == "completed")
    ray.train.report({"ended": status})


