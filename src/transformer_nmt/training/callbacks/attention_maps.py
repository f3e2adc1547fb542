"""Attention heatmaps and the explorer page of a few validation sentences at every validation."""

import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.loggers import WandbLogger

from transformer_nmt.data.framing import first_token
from transformer_nmt.explorer import explore_sentence, run_validations, write_page
from transformer_nmt.explorer.plots import draw_sentence_attention
from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.training.step.val_examples import pick_val_examples

EXPLORER_DATA = "explorer.json"  # one validation's explorer data, in its step folder


class AttentionMaps(L.Callback):
    """Draws every attention of the model on fixed validation sentences after each validation.

    The decoder reads the model's own greedy translation, so the pictures show what the model
    attends to while it translates; a multilingual model's decoder starts with the sentence's
    target language tag in place of BOS, as in training. For each sentence, kind (encoder
    self, decoder self, encoder-decoder) and layer a grid of heads is written to
    `<dirpath>/step<step>/sentence<i>_<kind>_layer<l>.png` and, with a W&B logger, logged as the
    image `attention/<kind>/layer<l>` (one picture per sentence). Nothing is drawn during
    Lightning's sanity check, and only on rank zero.

    With `explorer`, each validation also writes the explorer page of its sentences (beam search
    with the paper's settings, decoder reading the translation and the reference) to
    `step<step>/explorer.html`, logged to W&B as the HTML `attention/explorer`, and keeps its data
    in `step<step>/explorer.json`. At the end of the run `<dirpath>/explorer.html` gathers the
    validations saved there, those before a resume included, behind a slider (W&B:
    `attention/explorer_run`): at most `explorer.page.RUN_VALIDATIONS`, evenly spaced.

    Args:
        num_sentences: sentences spread evenly over the validation set.
        indices: validation set indices to draw instead (overrides num_sentences).
        layers: 1-based layers to draw; all if None.
        every_n_validations: draw at every n-th validation only.
        dirpath: folder of the PNG files; `<trainer.default_root_dir>/attention` if None.
        explorer: also write the explorer pages.
    """

    def __init__(
        self,
        num_sentences: int = 2,
        indices: list[int] | None = None,
        layers: list[int] | None = None,
        every_n_validations: int = 1,
        dirpath: str | None = None,
        explorer: bool = True,
    ) -> None:
        self.num_sentences = num_sentences
        self.indices = indices
        self.layers = layers
        self.every_n_validations = every_n_validations
        self.dirpath = dirpath
        self.explorer = explorer
        self._validations = 0

    def _folder(self, trainer: L.Trainer) -> Path:
        return Path(self.dirpath or Path(trainer.default_root_dir) / "attention")

    @torch.no_grad()
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._validations += 1
        if not trainer.is_global_zero or self._validations % self.every_n_validations:
            return
        step = trainer.global_step
        out_dir = self._folder(trainer) / f"step{step:07d}"
        examples = pick_val_examples(trainer, self.num_sentences, self.indices)
        images: dict[str, list[Path]] = {}
        for i, example in enumerate(examples):
            paths = draw_sentence_attention(
                pl_module.model,
                pl_module.tokenizer,
                example["src"],
                out_dir,
                max_len_b=pl_module.hparams.max_len_b,
                step=step,
                layers=self.layers,
                prefix=f"sentence{i}_",
                bos_id=first_token(example),
            )
            for name, path in paths.items():
                images.setdefault(name, []).append(path)

        captions = [example["src_text"] for example in examples]
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                for name, paths in images.items():
                    logger.log_image(
                        f"attention/{name}", [str(p) for p in paths], step=step, caption=captions
                    )
        if self.explorer:
            self._explore(trainer, pl_module, examples, out_dir)

    def _explore(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        examples: list[dict[str, Any]],
        out_dir: Path,
    ) -> None:
        """This validation's explorer page and data."""
        step = trainer.global_step
        sentences = [
            explore_sentence(
                pl_module.model,
                pl_module.tokenizer,
                example["src"],
                example["tgt"],
                max_len_b=pl_module.hparams.max_len_b,
                layers=self.layers,
                bos_id=first_token(example),
            )
            for example in examples
        ]
        validation = {"step": step, "sentences": sentences}
        write_atomically(out_dir / EXPLORER_DATA, json.dumps(validation, separators=(",", ":")))
        page = write_page(out_dir / "explorer.html", [validation], f"attention at step {step}")
        _log_html(trainer, "attention/explorer", page, step)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The slider page over every validation saved in the folder, this run's and earlier."""
        folder = self._folder(trainer)
        if not (self.explorer and trainer.is_global_zero and folder.is_dir()):
            return
        validations = [
            json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob(f"step*/{EXPLORER_DATA}"))  # zero-padded: step order
        ]
        if validations:
            kept = run_validations(validations)  # bounded, however many validations ran
            page = write_page(folder / "explorer.html", kept, "attention over the run")
            _log_html(trainer, "attention/explorer_run", page, trainer.global_step)


def _log_html(trainer: L.Trainer, key: str, page: Path, step: int) -> None:
    """An explorer page into each W&B logger; inject=False: W&B's stylesheet is a network link."""
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger):
            import wandb  # only where a W&B logger is: importing it costs a second

            html = wandb.Html(page.read_text(encoding="utf-8"), inject=False)
            logger.log_metrics({key: html}, step=step)
