"""The W&B run a training run logs to, named in its folder so that others can continue it.

`<run dir>/wandb_run.json` holds the W&B run's id and project. A run resumed from a checkpoint of
that folder (`ckpt_path=`) logs to the same W&B run, and `nmt-evaluate --wandb` adds its report
to it, online or offline (`wandb sync` then uploads one run with one curve). Neither Lightning
nor Hydra is needed here: evaluation imports it too.
"""

import json
import os
from pathlib import Path
from typing import Any

from transformer_nmt.runtime.atomic import write_atomically

RUN_FILE = "wandb_run.json"


class WandbRunError(ValueError):
    """A W&B run that cannot be continued as asked."""


def wandb_mode(mode: str | None = None) -> str:
    """`mode` if given, else WANDB_MODE, else online with W&B credentials and offline without."""
    mode = mode or os.environ.get("WANDB_MODE")
    if mode is None:
        mode = "online" if _has_credentials() else "offline"
    return mode


def run_dir_of(checkpoint: str | os.PathLike) -> Path:
    """The run folder of a checkpoint training wrote: `<run dir>/checkpoints/<name>.ckpt`."""
    return Path(checkpoint).resolve().parent.parent


def saved_run(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The `{"id", "project"}` of the W&B run that `run_dir` logged to; None if it logged none."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return None
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
        return {"id": str(run["id"]), "project": str(run["project"])}
    except (ValueError, KeyError, TypeError) as e:
        raise WandbRunError(f"{path} is not a W&B run record ({e}): remove it to log anew") from e


def save_run(run_dir: str | os.PathLike, run_id: str, project: str) -> None:
    write_atomically(Path(run_dir) / RUN_FILE, json.dumps({"id": run_id, "project": project}))


def continued_run_id(ckpt_path: str | os.PathLike | None, project: str) -> str | None:
    """The id of the W&B run a resume from `ckpt_path` continues; None if its run logged none.

    Raises:
        WandbRunError: that run is in another W&B project than `project`.
    """
    if ckpt_path is None:
        return None
    run_dir = run_dir_of(ckpt_path)
    run = saved_run(run_dir)
    if run is None:
        return None
    if run["project"] != project:
        raise WandbRunError(
            f"ckpt_path={ckpt_path} continues W&B run {run['id']} of project "
            f"{run['project']!r} ({run_dir / RUN_FILE}), not of logger.wandb.project="
            f"{project!r}: set logger.wandb.project={run['project']} to continue it, or "
            "logger.wandb.continue_run=false to start a new run"
        )
    return run["id"]


def _has_credentials() -> bool:
    import wandb

    try:
        return wandb.login(prompt=False, verify=False)
    except wandb.errors.UsageError:  # raised instead of False when there is no terminal
        return False


def add_to_run(run_dir: str | os.PathLike, summary: dict[str, Any]) -> str:
    """Add `summary` to the W&B run `run_dir` logged to, in W&B's mode; where the run went.

    Offline, the run's records land in `<run dir>/wandb/offline-run-*` beside training's, and
    `wandb sync` uploads them to the same run.

    Raises:
        WandbRunError: `run_dir` logged to no W&B run, or W&B refused the update.
    """
    import wandb

    run = saved_run(run_dir)
    if run is None:
        raise WandbRunError(
            f"{Path(run_dir) / RUN_FILE} is missing: its training logged to no W&B run "
            "(logger=wandb writes it), so there is no run to add to"
        )
    mode = wandb_mode()
    try:
        with wandb.init(
            project=run["project"], id=run["id"], resume="allow", dir=run_dir, mode=mode
        ) as wandb_run:
            wandb_run.summary.update(summary)
            offline = f"{Path(wandb_run.dir).parent} (upload it with `wandb sync <that folder>`)"
            where = wandb_run.url if mode == "online" else offline
    except wandb.errors.Error as e:
        raise WandbRunError(f"W&B run {run['id']} of project {run['project']!r}: {e}") from e
    return f"W&B run {run['id']} of project {run['project']!r}, {mode}: {where}"
