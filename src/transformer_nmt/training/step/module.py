"""The LightningModule: training and validation steps, metrics and the paper's optimizer."""

from collections.abc import Sequence
from typing import Any

import lightning as L
import torch
from torch import Tensor
from torchmetrics import SumMetric

from transformer_nmt.data.framing import TARGET_FRAME, cut_at_eos
from transformer_nmt.data.languages import LANGUAGES_KEY, Languages
from transformer_nmt.data.padding import projected_rows
from transformer_nmt.data.tokenizer import BPETokenizer
from transformer_nmt.decoding import greedy_search
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.training.plan.device_defaults import device_default
from transformer_nmt.training.run.stop import StopVotes
from transformer_nmt.training.step.hot_path import all_reduce_, is_logging_step
from transformer_nmt.training.step.loss import label_smoothed_nll, perplexity
from transformer_nmt.training.step.lr_schedule import LearningRate, cooldown_problem
from transformer_nmt.training.step.off_target import direction_off_target
from transformer_nmt.training.step.rdrop import doubled, symmetric_kl
from transformer_nmt.training.step.val_metrics import (
    SCORES,
    computed_scores,
    logged_name,
    metric_problems,
)


def real_target_logits(
    model: EncoderDecoder, batch: dict[str, Any], precision: str | None = None
) -> tuple[Tensor, Tensor]:
    """Logits (M, V) and target ids (N,) at the batch's N real target positions, M >= N.

    Padding is never projected. The projection sees M = `projected_rows(N, precision)` rows:
    the first position repeated after the N real ones, which `label_smoothed_nll` ignores.
    """
    index = batch["tgt_index"]  # (N,) non-pad target positions, computed by collate
    n = index.numel()
    rows = projected_rows(n, precision)
    projected = torch.cat([index, index[:1].expand(rows - n)]) if rows > n else index
    logits = model(batch["src"], batch["tgt_in"], projected)
    return logits, batch["tgt_out"].flatten().index_select(0, index)


def training_loss(
    model: EncoderDecoder,
    batch: dict[str, Any],
    precision: str | None,
    label_smoothing: float,
    rdrop_alpha: float = 0,
) -> tuple[Tensor, Tensor, int]:
    """Summed smoothed loss, summed NLL and number of the batch's real target tokens.

    With `rdrop_alpha`, of the batch doubled (`rdrop.doubled`): both passes' tokens count,
    and the loss adds alpha times the passes' summed symmetric KL divergence.
    """
    if rdrop_alpha:
        batch = doubled(batch)
    logits, target = real_target_logits(model, batch, precision)
    loss_sum, nll_sum = label_smoothed_nll(logits, target, label_smoothing)
    if rdrop_alpha:  # its backward reads its own log-probabilities, never the logits
        loss_sum = loss_sum + rdrop_alpha * symmetric_kl(logits, target.numel() // 2)
    return loss_sum, nll_sum, target.numel()


class TranslationModule(L.LightningModule):
    """Trains an encoder-decoder as in section 5 of the paper and scores it with sacreBLEU.

    Args:
        model: the Transformer (or any `EncoderDecoder`), built from the `model` config and the
            tokenizer's vocabulary.
        tokenizer: the joint BPE; saved inside every checkpoint so a checkpoint alone translates.
        label_smoothing: eps_ls (paper: 0.1).
        rdrop_alpha: train each batch twice with different dropout masks and add alpha times
            the two passes' symmetric KL divergence to their losses (R-Drop; paper: 0, off).
        lr_factor: multiplies the paper's learning rate (paper: 1).
        warmup_steps: warm-up of the inverse-square-root schedule (paper: 4000).
        cooldown_steps: take the rate linearly to zero over this many last updates of
            `trainer.max_steps` (paper: 0, no cool-down); for a time budget,
            `callbacks.timed_cooldown.minutes` places the cool-down instead.
        betas, eps: Adam's (paper: 0.9, 0.98 and 1e-9).
        max_len_b: validation translations stop at source length + max_len_b (paper: 50).
        compile: `torch.compile` the model's forward (the training and validation loss) with
            dynamic shapes, so that each new bucket shape reuses the compiled code instead of
            compiling again. Decoding stays eager: its cache grows every step. "auto": the
            device's default (`device_defaults`), decided when the trainer knows the device.
        languages: a multilingual model's languages and directions (the data module's); its
            validation scores each of `val_metrics` per direction (`val/bleu/de-fr`), `val/bleu`
            their mean, and the off-target rate (`val/off_target/de-fr`: the share of outputs
            identified as another language than the target); its checkpoints record them.
            None: one direction.
        val_metrics: the scores validation computes as sacreBLEU does (`bleu`, `chrf`, `chrf++`,
            `ter`: `training/step/val_metrics.py`), each logged as `val/<name>`; `val/loss` and
            `val/ppl` always.
        monitor: the metric the run is judged by (`bleu`, `ter`, `bleu/de-fr`, `loss`...): the
            checkpoint policy keeps the best by `val/<monitor>`, the sweeper optimises it, early
            stopping waits for it; computed even where `val_metrics` omits it.
        early_stopping_patience: validations in a row without a better `monitor` after which
            training stops (`training/run/stop.py`'s `EarlyStop`); None: never (the paper's).
    """

    def __init__(
        self,
        model: EncoderDecoder,
        tokenizer: BPETokenizer,
        label_smoothing: float = 0.1,
        rdrop_alpha: float = 0,
        lr_factor: float = 1.0,
        warmup_steps: int = 4000,
        cooldown_steps: int = 0,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        max_len_b: int = 50,
        compile: bool | str = False,
        languages: Languages | None = None,
        val_metrics: Sequence[str] = ("bleu", "chrf"),
        monitor: str = "bleu",
        early_stopping_patience: int | None = None,
    ) -> None:
        super().__init__()
        directions = None if languages is None else languages.names
        if problems := metric_problems(val_metrics, monitor, directions):
            raise ValueError("; ".join(problems))
        if early_stopping_patience is not None and early_stopping_patience < 1:
            raise ValueError(
                f"module.early_stopping_patience={early_stopping_patience}: give the validations "
                "without improvement to wait, at least 1, or null to never stop early"
            )
        self.save_hyperparameters(ignore=["model", "tokenizer", "languages"])
        self.model = model
        if compile is True:
            model.compile(dynamic=True)  # in place: parameter names stay those of the model
        self.tokenizer = tokenizer
        # Sums, not means, so that validation over several ranks weighs every token alike.
        self.val_loss_sum = SumMetric()
        self.val_nll_sum = SumMetric()
        self.val_tokens = SumMetric()
        self.languages = languages
        self.monitor = logged_name(monitor)  # what the checkpoint policy and early stopping read
        scores = computed_scores(val_metrics, monitor)
        if languages is None:
            self.val_scores = torch.nn.ModuleDict({kind: SCORES[kind]() for kind in scores})
        else:
            self.val_direction_scores = torch.nn.ModuleDict(
                {
                    kind: torch.nn.ModuleDict({n: SCORES[kind]() for n in languages.names})
                    for kind in scores
                }
            )
            self.val_direction_off_target = direction_off_target(languages)
        # Global target tokens of the update being accumulated (None before its first batch),
        # and the factor that renormalizes its gradients once this micro-batch's backward is done.
        self._update_tokens: Tensor | None = None
        self._grad_rescale: Tensor | None = None
        self.schedule: LearningRate | None = None  # the learning rate, built with the optimizer
        # Settable during training (callbacks/late_dropout.py); hparams keep the starting value.
        self.rdrop_alpha = rdrop_alpha
        # The stop signals each rank saw, summed with the step's token count (training/run/stop.py).
        self.stop_votes = StopVotes()

    def _loss(self, batch: dict[str, Any], rdrop_alpha: float = 0) -> tuple[Tensor, Tensor, int]:
        label_smoothing = self.hparams.label_smoothing
        return training_loss(
            self.model, batch, self.trainer.precision, label_smoothing, rdrop_alpha
        )

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor:
        loss_sum, nll_sum, num_tokens = self._loss(batch, self.rdrop_alpha)
        loss, global_sums = self._per_token_mean(loss_sum, nll_sum, num_tokens)
        if is_logging_step(self.trainer):
            self._log_train_metrics(global_sums)
        return loss

    def _log_train_metrics(self, global_sums: Tensor) -> None:
        """Loss, perplexity and learning rate, as host tensors: one copy from the device.

        Lightning reads progress-bar metrics after every batch, logged that step or not; a host
        tensor makes that read free, where a device one would cost a sync per batch.
        """
        loss_sum, nll_sum, num_tokens = global_sums.cpu().unbind()  # waits for the device
        self.log("train/loss", loss_sum / num_tokens, prog_bar=True)
        self.log("train/ppl", perplexity(nll_sum, num_tokens))
        lr = self.lr_schedulers().get_last_lr()[0]
        self.log("train/lr", torch.tensor(lr, device="cpu"))  # a float would go to the device

    def _per_token_mean(
        self, loss_sum: Tensor, nll_sum: Tensor, num_tokens: int
    ) -> tuple[Tensor, Tensor]:
        """The loss whose gradient is that of the mean over every token of the update, and sums.

        DDP averages the ranks' gradients, so each rank divides its summed loss by the global
        token count and multiplies by the world size: a rank's tokens then weigh as much as any
        other's, whatever its batch holds (fairseq does the same). The token count is summed by
        one small collective on the device, together with the detached loss and NLL sums for
        logging and the ranks' stop votes (`training/run/stop.py`); the host waits for none of it.

        Under gradient accumulation the update's token count is known only after its last
        micro-batch, and Lightning divides each micro-batch's loss by the number accumulated.
        Micro-batch k (k > 1) is therefore divided by the T_{k-1} tokens before it, and
        `on_after_backward` rescales the summed gradients by T_{k-1} / T_k: after every
        backward they are exactly the mean over the T_k tokens so far, never a mean of the
        micro-batches' means (which would weigh a short micro-batch's tokens more).

        Returns:
            The loss to backpropagate, and (3,) global sums: loss, NLL, target tokens.
        """
        # full_like fills on the device; torch.tensor(num_tokens) would copy from the host.
        tokens = torch.full_like(loss_sum, num_tokens)
        votes = self.stop_votes.ballot(loss_sum)
        summed = all_reduce_(torch.stack([loss_sum.detach(), nll_sum.detach(), tokens, *votes]))
        self.stop_votes.count(summed[3:])
        sums = summed[:3]
        seen = self._update_tokens
        if seen is None:  # the update's first micro-batch: the only one without accumulation
            self._update_tokens, denominator = sums[2], sums[2]
        else:
            self._update_tokens = seen + sums[2]
            self._grad_rescale, denominator = seen / self._update_tokens, seen
        scale = self.trainer.world_size * self.trainer.accumulate_grad_batches
        return loss_sum * (scale / denominator), sums

    def on_after_backward(self) -> None:
        if self._grad_rescale is None:
            return
        torch._foreach_mul_(
            [p.grad for p in self.model.parameters() if p.grad is not None], self._grad_rescale
        )
        self._grad_rescale = None

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        self._update_tokens = None  # every backward of this update is done
        if not is_logging_step(self.trainer):
            return
        # Before clipping: the norm the gradients actually had.
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        self.log("train/grad_norm", torch.nn.utils.get_total_norm(grads))

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        loss_sum, nll_sum, num_tokens = self._loss(batch)
        self.val_loss_sum.update(loss_sum)
        self.val_nll_sum.update(nll_sum)
        self.val_tokens.update(num_tokens)
        if self.languages is None:
            hypotheses = self.translate_ids(batch["src"])
            for metric in self.val_scores.values():
                metric.update(hypotheses, batch["tgt_text"])
        else:
            self._update_direction_scores(batch)

    def _update_direction_scores(self, batch: dict[str, Any]) -> None:
        """Each row translated as its direction's decoder starts (its tag), scored per direction."""
        hypotheses = self.translate_ids(batch["src"], batch["tgt_in"][:, 0].tolist())
        by_direction: dict[int, tuple[list[str], list[str]]] = {}
        rows = zip(batch["direction"].tolist(), hypotheses, batch["tgt_text"], strict=True)
        for direction, hypothesis, reference in rows:
            found, wanted = by_direction.setdefault(direction, ([], []))
            found.append(hypothesis)
            wanted.append(reference)
        for direction, (found, wanted) in by_direction.items():
            name = self.languages.names[direction]
            for metrics in self.val_direction_scores.values():
                metrics[name].update(found, wanted)
            if self.val_direction_off_target is not None:
                self.val_direction_off_target[name].update(found)

    def on_validation_epoch_end(self) -> None:
        num_tokens = self.val_tokens.compute()
        self.log("val/loss", self.val_loss_sum.compute() / num_tokens)
        self.log("val/ppl", perplexity(self.val_nll_sum.compute(), num_tokens))
        if self.languages is None:
            for kind, metric in self.val_scores.items():
                self.log(f"val/{kind}", metric.compute(), prog_bar=f"val/{kind}" == self.monitor)
                metric.reset()
        else:
            self._log_direction_scores()
        for metric in (self.val_loss_sum, self.val_nll_sum, self.val_tokens):
            metric.reset()

    def _log_direction_scores(self) -> None:
        """`val/bleu/<src>-<tgt>`, `val/chrf/...` (each score) per direction; `val/bleu`,
        `val/chrf` their means, so that checkpoints and sweeps monitor the same name as for one
        direction (or monitor one direction by its name); `val/off_target/...` likewise."""
        kinds = list(self.val_direction_scores.items())
        if self.val_direction_off_target is not None:
            kinds.append(("off_target", self.val_direction_off_target))
        for kind, metrics in kinds:
            scores = []
            for name, metric in metrics.items():
                scores.append(metric.compute())
                self.log(f"val/{kind}/{name}", scores[-1])
                metric.reset()
            mean = torch.stack(scores).mean()
            self.log(f"val/{kind}", mean, prog_bar=f"val/{kind}" == self.monitor)

    @torch.no_grad()
    def translate_ids(self, src: Tensor, bos_ids: Sequence[int] | None = None) -> list[str]:
        """Greedy translations of a padded source batch (B, S), detokenized; with `bos_ids`
        (B,), each row's decoder starts with its own first token (a target language's tag)."""
        if bos_ids is None or len(set(bos_ids)) == 1:
            frame = TARGET_FRAME | ({"bos_id": bos_ids[0]} if bos_ids else {})
            out = greedy_search(self.model, src, **frame, max_len_b=self.hparams.max_len_b)
            return self.tokenizer.decode_batch([cut_at_eos(row) for row in out.tolist()])
        texts = [""] * len(bos_ids)
        for bos in set(bos_ids):
            rows = [i for i, first in enumerate(bos_ids) if first == bos]
            for i, text in zip(rows, self.translate_ids(src[rows], [bos] * len(rows)), strict=True):
                texts[i] = text
        return texts

    def configure_optimizers(self) -> dict[str, Any]:
        # lr=1 so that LambdaLR's factor *is* the paper's learning rate.
        optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=1.0,
            betas=self.hparams.betas,
            eps=self.hparams.eps,
            fused=can_fuse_adam(self.trainer),
        )
        hp = self.hparams
        total_steps = self.trainer.max_steps
        if problem := cooldown_problem(hp.cooldown_steps, total_steps):
            raise ValueError(problem)
        schedule = LearningRate(self.model.config.d_model, hp.warmup_steps, hp.lr_factor)
        schedule.cool_down(total_steps, hp.cooldown_steps)
        self.schedule = schedule
        # LambdaLR counts from 0; the paper's step number counts from 1. A lambda, not the
        # schedule itself: LambdaLR would save its window and impose it on a resumed run.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: schedule(step + 1))
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def configure_model(self) -> None:
        """`compile="auto"`: the device's default (`device_defaults`), on one process only."""
        if self.hparams.compile != "auto" or self.trainer.world_size > 1:
            return
        if device_default("compile", self.trainer.strategy.root_device.type):
            self.model.compile(dynamic=True)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Plain strings and numbers: rebuild model and tokenizer with weights_only loading.
        checkpoint["model_config"] = self.model.config.to_dict()
        checkpoint["tokenizer"] = self.tokenizer.to_str()
        if self.languages is not None:  # what nmt-translate --tgt-lang may ask of the model
            checkpoint[LANGUAGES_KEY] = self.languages.to_dict()
        # A run resumed with precision=auto trains on in this (training/plan/precision.py).
        checkpoint["precision"] = {"device": self.device.type, "precision": self.trainer.precision}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Whether Adam runs fused is this run's choice: the saved param groups would impose the
        # saving run's (unfused from before fused Adam; fused where fp16 clipping now forbids it).
        if self._trainer is None:  # loaded for inference: no optimizer to restore
            return
        fused = can_fuse_adam(self.trainer)
        for state in checkpoint.get("optimizer_states", []):
            for group in state["param_groups"]:
                group.update(fused=fused, foreach=None)


def can_fuse_adam(trainer: L.Trainer) -> bool:
    """Whether Adam can update every weight in one fused kernel instead of a loop over tensors.

    On a CPU torch otherwise loops over the tensors in Python, several times slower
    (experiments/speed/README.md). Not with a loss scaler (fp16) and gradient clipping: the fused
    step unscales the gradients itself, after Lightning would have clipped them.
    """
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    return scaler is None or not trainer.gradient_clip_val
