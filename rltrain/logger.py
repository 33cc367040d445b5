"""Metric logging to every sink at once: console, JSONL, TensorBoard, wandb.

* console: a `tqdm` progress bar over iterations whose postfix shows SPS and
  the latest episodic return (``console=False`` disables it);
* ``metrics.jsonl`` in the run folder: one JSON object per :meth:`Logger.log`
  call with every metric (always written; appended to on resume), and
  ``args.json`` beside it: the run's arguments (a resumed segment's replace them);
* TensorBoard event files in the run folder (``torch.utils.tensorboard``);
* wandb when ``track=True``; offline when ``WANDB_MODE`` says so or when the
  wandb server cannot be reached.  Metrics are plotted against
  ``global_step`` and the ``perf/*`` phase timings are declared so that they
  come out as their own panel group.

Metric names follow CleanRL (``charts/episodic_return``, ``losses/value_loss``)
plus ``perf/...`` for phase timings.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

from tqdm.auto import tqdm

from rltrain.checkpoint import write_atomically

__all__ = ["Logger", "wandb_mode"]


def wandb_mode(host: str = "api.wandb.ai", timeout: float = 2.0) -> str:
    """``$WANDB_MODE`` if set, else ``"online"`` if ``host:443`` answers, else ``"offline"``."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return "online"
    except OSError:
        return "offline"


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN/inf
    return v


class Logger:
    """Fan-out metric logger; see the module docstring."""

    def __init__(
        self,
        run_dir: str | Path,
        config: Mapping[str, Any],
        *,
        total_iterations: int,
        start_iteration: int = 0,
        track: bool = False,
        wandb_project: str = "rltrain",
        wandb_entity: Optional[str] = None,
        wandb_group: Optional[str] = None,
        wandb_tags: Optional[Sequence[str]] = None,
        run_name: Optional[str] = None,
        tensorboard: bool = True,
        console: bool = True,
    ):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.run_dir / "metrics.jsonl", "a", buffering=1)
        args_json = json.dumps({k: _jsonable(v) for k, v in config.items()}, indent=1, default=str) + "\n"
        write_atomically(self.run_dir / "args.json", lambda f: f.write(args_json.encode()))
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.run_dir))
            table = "\n".join(f"|{k}|{v}|" for k, v in config.items())
            self._tb.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
        self._wandb = None
        if track:
            import wandb

            mode = wandb_mode()
            self._wandb = wandb.init(
                project=wandb_project,
                entity=wandb_entity,
                group=wandb_group,
                tags=list(wandb_tags) if wandb_tags else None,
                name=run_name or self.run_dir.name,
                config=dict(config),
                dir=str(self.run_dir),
                mode=mode,
                resume="allow",
                id=(run_name or self.run_dir.name).replace("/", "_")[:120],
            )
            self._wandb.define_metric("global_step")
            self._wandb.define_metric("*", step_metric="global_step")
            self._wandb.define_metric("perf/*", step_metric="global_step", summary="mean")
            self._wandb.define_metric("charts/episodic_return", step_metric="global_step", summary="max")
        self._bar = tqdm(total=total_iterations, initial=start_iteration, unit="it", dynamic_ncols=True,
                         disable=not console)
        self._postfix: Dict[str, str] = {}

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        """Write ``metrics`` at ``global_step=step`` to every sink."""
        record = {"global_step": int(step), "time": time.time()}
        record.update({k: _jsonable(v) for k, v in metrics.items()})
        self._jsonl.write(json.dumps(record) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log({"global_step": int(step), **metrics})

    def progress(self, iterations: int = 1, **postfix: float) -> None:
        """Advance the progress bar; ``postfix`` values (e.g. ``sps=``, ``ret=``) are shown."""
        for k, v in postfix.items():
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                self._postfix[k] = f"{v:.4g}" if isinstance(v, float) else str(v)
        self._bar.set_postfix(self._postfix, refresh=False)
        self._bar.update(iterations)

    def write(self, message: str) -> None:
        """Print a line without breaking the progress bar."""
        self._bar.write(message) if not self._bar.disable else print(message, flush=True)

    def close(self) -> None:
        self._bar.close()
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
