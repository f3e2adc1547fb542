"""The W&B run a run folder logs to, named in the folder: one W&B run per run folder.

`<run dir>/wandb_run.json` holds the W&B run's id, project and the last step logged to it. The
run folder's first start with a W&B logger writes it; every later start in the folder (a
requeue, the same command after a stop or an end, an explicit `ckpt_path=`) logs to the same W&B
run, from the step after the last one logged, and a run resumed in a new folder from a
checkpoint of this one continues it too. `nmt-evaluate --wandb` adds its report to it, online or
offline (`wandb sync` then uploads one run with one curve). Neither Lightning nor Hydra is needed
here: evaluation imports it too.
"""

import json
import os
import secrets
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
    """The `{"id", "project", "step"}` of the W&B run that `run_dir` logs to (`step`: the last
    one logged, -1 before any); None if it logged none."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return None
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
        return {"id": str(run["id"]), "project": str(run["project"]), "step": run.get("step", -1)}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise WandbRunError(f"{path} is not a W&B run record ({e}): remove it to log anew") from e


def save_run(run_dir: str | os.PathLike, run_id: str, project: str, step: int = -1) -> None:
    record = {"id": run_id, "project": project, "step": step}
    write_atomically(Path(run_dir) / RUN_FILE, json.dumps(record))


def folder_run(
    run_dir: str | os.PathLike, project: str, resume_from: str | os.PathLike | None
) -> dict[str, Any]:
    """The W&B run `run_dir` logs to, as `saved_run` gives it: the one the folder names, else
    the one of the folder that `resume_from`, the checkpoint the run resumes from, was written
    in, else a new one (its id chosen here, so that it is saved before W&B starts).

    Raises:
        WandbRunError: that run is in another W&B project than `project`.
    """
    run = saved_run(run_dir)
    if run is not None:
        if run["project"] != project:
            raise WandbRunError(
                f"this run folder logs to W&B run {run['id']} of project {run['project']!r} "
                f"({Path(run_dir) / RUN_FILE}), not of logger.wandb.project={project!r}: set "
                f"logger.wandb.project={run['project']} to go on with it, or start in a fresh "
                "run folder (hydra.run.dir=<another folder>)"
            )
        return run
    run = saved_run(run_dir_of(resume_from)) if resume_from is not None else None
    if run is None:
        return {"id": secrets.token_hex(4), "project": project, "step": -1}
    if run["project"] != project:
        raise WandbRunError(
            f"ckpt_path={resume_from} continues W&B run {run['id']} of project "
            f"{run['project']!r} ({run_dir_of(resume_from) / RUN_FILE}), not of "
            f"logger.wandb.project={project!r}: set logger.wandb.project={run['project']} to "
            "continue it, or init.from=<that checkpoint> to start a new run from its weights"
        )
    return run


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
