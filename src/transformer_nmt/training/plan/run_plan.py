"""The run plan: what a run derives at its start, decided once before the Trainer is built.

The resume point, the precision, the update (batch budget, accumulation), the budget's end,
the cool-down and the checkpoint retention are computed here into one frozen `RunPlan`, from
the config and the checkpoint resumed from; nothing writes them back into the config. Global
rank 0 decides it and the other ranks take its plan (`plan_sharing`), so that a rank with a
stale view of the run folder cannot start elsewhere. Every checkpoint holds it
(`checkpoint["run_plan"]`, plain types), and a resumed run reuses what was measured on a
device: the `data.max_tokens=auto` budget.
"""

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from transformer_nmt.data.framing import ADDED_TOKENS
from transformer_nmt.training.callbacks import configured, timed_cooldown
from transformer_nmt.training.callbacks.checkpoint_policy import (
    CheckpointPolicy,
    monitor_problems,
    retention_problems,
)
from transformer_nmt.training.plan.auto_resume import (
    found_in_run_folder_hint,
    run_folder_checkpoint,
)
from transformer_nmt.training.plan.batch_size import batch_problems, device_count, plan_update
from transformer_nmt.training.plan.config_checks import (
    ConfigError,
    model_problems,
    resume_problems,
    warn_about_positions,
)
from transformer_nmt.training.plan.precision import resolve_precision
from transformer_nmt.training.plan.resume import ResumePoint
from transformer_nmt.training.plan.trainer_settings import trainer_problems
from transformer_nmt.training.run.loggers import planned_wandb_run, wandb_problems
from transformer_nmt.training.step.lr_schedule import schedule_problems

log = logging.getLogger(__name__)

# Where a checkpoint holds the plan of the run that wrote it.
CHECKPOINT_KEY = "run_plan"
# (accumulate_grad_batches, max_tokens, tokens_per_update); max_tokens None: auto, not measured
# yet, and tokens_per_update then the `data.tokens_per_update` its accumulation aims at.
Update = tuple[int, int | None, int | None]


@dataclass(frozen=True)
class RunPlan:
    """Everything a run derives at its start, as plain values.

    Attributes:
        resume_from: the checkpoint the run continues from; None: from scratch.
        found_in_run_folder: whether `resume_from` is the run folder's own `last.ckpt`, taken
            because no `ckpt_path` was given.
        precision: Lightning's name of the precision it trains in, e.g. "bf16-mixed".
        world_size: processes over all nodes.
        accumulate_grad_batches: batches each process runs per optimizer step.
        max_tokens: tokens a side of one batch on one process; None until the
            `data.max_tokens=auto` budget is measured on the device, as fit sets up.
        tokens_per_update: tokens a side of one update at most; until the auto budget is
            measured, the `data.tokens_per_update` its accumulation is derived from (or None).
        max_steps: the updates the run ends after (-1: no step budget).
        max_time: the wall time it ends after ("DD:HH:MM:SS"; None: no time budget).
        cooldown_steps: updates of the linear cool-down that ends at `max_steps` (0: none).
        cooldown_minutes: minutes of the cool-down that ends with `max_time` (0: none).
        keep_last: periodic checkpoints kept (None: every one).
        auto_budget: whether `max_tokens` is `data.max_tokens=auto`'s, measured on the device
            (a resume confirms it still fits there).
        wandb_run: the W&B run the run folder logs to (`runtime/wandb_run.py`): its id, project
            and the last step its earlier starts logged; None without `logger=wandb`.
        parent: fine-tuning's parent (`init.from`), as global rank 0 read it: the files, the
            step it was at, its weights' digest, the parts kept from it and frozen
            (`fine_tuning/init_from.py`); None for a run from scratch.
    """

    resume_from: str | None
    found_in_run_folder: bool
    precision: str
    world_size: int
    accumulate_grad_batches: int
    max_tokens: int | None
    tokens_per_update: int | None
    max_steps: int
    max_time: str | None
    cooldown_steps: int
    cooldown_minutes: float
    keep_last: int | None
    auto_budget: bool = False  # absent from the plans of older checkpoints
    wandb_run: dict[str, Any] | None = None  # absent from the plans of older checkpoints
    parent: dict[str, Any] | None = None  # absent from the plans of older checkpoints

    def to_dict(self) -> dict[str, Any]:
        """Plain types only: a checkpoint holding it loads with `weights_only=True`."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> "RunPlan":
        return cls(**saved)

    def measured(self, max_tokens: int, accumulate_grad_batches: int) -> "RunPlan":
        """This plan with the `data.max_tokens=auto` budget the device measured."""
        used = max_tokens * accumulate_grad_batches * self.world_size
        return dataclasses.replace(
            self,
            max_tokens=max_tokens,
            accumulate_grad_batches=accumulate_grad_batches,
            tokens_per_update=used,
        )

    def describe(self) -> str:
        """The plan as one log line."""
        start = f"resume from {self.resume_from}" if self.resume_from else "start from scratch"
        batch = "auto (measured as fit sets up)" if self.max_tokens is None else self.max_tokens
        ends = [
            f"{self.max_steps} updates" if self.max_steps >= 0 else None,
            f"{self.max_time} of wall time" if self.max_time else None,
        ]
        ends = [e for e in ends if e]
        end = " or ".join(ends) + (", whichever comes first" if len(ends) > 1 else "")
        windows = [
            self.cooldown_steps and f"the last {self.cooldown_steps} updates",
            self.cooldown_minutes and f"the last {self.cooldown_minutes:g} min",
        ]
        cooldown = " or ".join(w for w in windows if w)
        return (
            f"Run plan: {start}; {self.precision}; {self.world_size} process(es) x "
            f"{self.accumulate_grad_batches} batch(es) of {batch} tokens a side per update "
            f"({self.tokens_per_update or '?'} at most); ends after "
            f"{end or 'the epochs'}; "
            f"cool-down: {cooldown or 'none'}; periodic checkpoints kept: "
            f"{'all' if self.keep_last is None else self.keep_last}"
            f"{_describe_parent(self.parent) if self.parent else ''}"
        )


def _describe_parent(parent: dict[str, Any]) -> str:
    files, step = parent["files"], parent["step"]
    source = files[0] if len(files) == 1 else f"the average of {files[0]}..{files[-1]}"
    return (
        f"; fine-tunes {source}{'' if step is None else f' at step {step}'} (weights sha256 "
        f"{parent['weights_sha256']}), keeps its {', '.join(parent['kept']) or 'weights only'}, "
        f"freezes {', '.join(parent['frozen']) or 'nothing'}"
        f"{', extends its vocabulary' if parent['extend_vocab'] else ''}"
    )


def check_config(cfg: DictConfig, resume: ResumePoint | None = None) -> None:
    """Raise one `ConfigError` listing every component's refused settings and every rule across
    config groups; `resume` is the run's resume point, `cfg.ckpt_path`'s if not given."""
    resume = resume or ResumePoint(cfg.get("ckpt_path"))
    module, trainer = cfg.module, cfg.trainer
    problems = [
        *trainer_problems(cfg),
        *model_problems(cfg),
        *schedule_problems(
            module.get("warmup_steps", 0),
            module.get("cooldown_steps", 0),
            trainer.get("max_steps", -1),
        ),
        *timed_cooldown.settings_problems(cfg),
        *batch_problems(cfg),
        *retention_problems(cfg),
        *resume_problems(cfg, resume),
        *monitor_problems(cfg, resume),
        *wandb_problems(cfg, resume),
    ]
    warn_about_positions(cfg)
    if problems:
        raise ConfigError("inconsistent settings:\n  " + "\n  ".join(problems))


def plan_run(
    cfg: DictConfig,
    parent: dict[str, Any] | None = None,
    resumed: tuple[ResumePoint, bool] | None = None,
) -> RunPlan:
    """Check the config against the checkpoint it resumes from, then derive the run's plan;
    `parent` is fine-tuning's record of the parent it starts from (`init.from.load_parent`),
    `resumed` the `resume_point` if already found.

    Raises `ConfigError` naming every inconsistent setting, before anything is written.
    """
    resume, found = resumed or resume_point(cfg)
    try:
        check_config(cfg, resume)
        world_size = device_count(cfg.trainer) * cfg.trainer.get("num_nodes", 1)
        accumulate, max_tokens, tokens_per_update = planned_update(cfg, world_size, resume)
        precision = resolve_precision(cfg.trainer.precision, cfg.trainer.accelerator, resume)
    except ConfigError as error:
        if not found:
            raise
        raise ConfigError(f"{error}\n  {found_in_run_folder_hint(resume.path)}") from None
    trainer = cfg.trainer
    policy = next((c for _, c in configured(cfg, CheckpointPolicy)), {})
    timed = next((c for _, c in configured(cfg, timed_cooldown.TimedCooldown)), {})
    return RunPlan(
        resume_from=resume.path,
        found_in_run_folder=found,
        precision=str(precision),
        world_size=world_size,
        accumulate_grad_batches=accumulate,
        max_tokens=max_tokens,
        tokens_per_update=tokens_per_update,
        max_steps=trainer.get("max_steps", -1),
        max_time=trainer.get("max_time"),
        cooldown_steps=cfg.module.get("cooldown_steps", 0),
        cooldown_minutes=timed.get("minutes", 0),
        keep_last=policy.get("keep_last"),
        auto_budget=cfg.data.max_tokens == "auto",
        wandb_run=planned_wandb_run(cfg, resume.path),
        parent=parent,
    )


def resume_point(cfg: DictConfig) -> tuple[ResumePoint, bool]:
    """`ckpt_path`'s checkpoint, else the run folder's `last.ckpt` if it holds one; and whether
    it is the latter (a requeued job, or the same command run again)."""
    if cfg.get("ckpt_path") is not None:
        return ResumePoint(cfg.ckpt_path), False
    path = run_folder_checkpoint(cfg)
    if not path.is_file():
        return ResumePoint(None), False
    log.info("Resuming from %s, which this run folder holds (ckpt_path=%s)", path, path)
    return ResumePoint(path), True


def saved_plan(resume: ResumePoint) -> RunPlan | None:
    """The plan saved in the checkpoint resumed from (None: a fresh run, or an older checkpoint)."""
    saved = resume.checkpoint.get(CHECKPOINT_KEY) if resume.resuming else None
    return None if saved is None else RunPlan.from_dict(saved)


def planned_update(cfg: DictConfig, world_size: int, resume: ResumePoint) -> Update:
    """(accumulation, batch budget, tokens per update); a resumed `data.max_tokens=auto` run
    takes the saved budget, a fresh one leaves it to be measured (None).

    A budget measured again at a resume could differ (another node's free memory), and the
    resumed epoch would then skip the trained batches of another batching: it is measured once.
    For the same reason a resume on another world size is refused rather than re-planned.
    """
    saved = saved_plan(resume)
    if saved is not None and saved.world_size != world_size:
        raise ConfigError(
            f"ckpt_path={resume.path} was trained on {saved.world_size} process(es), this run "
            f"has {world_size} (trainer.devices x trainer.num_nodes): another count cuts other "
            "batches, so the interrupted epoch could not go on where it stopped; resume on "
            f"{saved.world_size} process(es)"
        )
    max_tokens, tokens_per_update = cfg.data.max_tokens, cfg.data.get("tokens_per_update")
    accumulate = cfg.trainer.get("accumulate_grad_batches", 1)
    if max_tokens == "auto":
        if saved is None or saved.max_tokens is None:
            return accumulate, None, tokens_per_update
        log.info("data.max_tokens=auto: %d, as measured when the run started", saved.max_tokens)
        return saved.accumulate_grad_batches, saved.max_tokens, saved.tokens_per_update
    if tokens_per_update is not None:
        longest = cfg.data.max_len + ADDED_TOKENS  # the longest pair the data can hold
        update = plan_update(tokens_per_update, max_tokens, world_size, longest)
        return update.accumulate_grad_batches, update.max_tokens, update.tokens_per_update
    return accumulate, max_tokens, accumulate * max_tokens * world_size
