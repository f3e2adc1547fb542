"""Attention heatmaps of a few validation sentences at every validation, as PNGs and in W&B."""

from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import WandbLogger

from transformer_nmt.attention_plots import draw_sentence_attention
from transformer_nmt.training.val_examples import pick_val_examples


class AttentionMaps(L.Callback):
    """Draws every attention of the model on fixed validation sentences after each validation.

    The decoder reads the model's own greedy translation, so the pictures show what the model
    attends to while it translates. For each sentence, kind (encoder self, decoder self,
    encoder-decoder) and layer a grid of heads is written to
    `<dirpath>/step<step>/sentence<i>_<kind>_layer<l>.png` and, with a W&B logger, logged as the
    image `attention/<kind>/layer<l>` (one picture per sentence). Nothing is drawn during
    Lightning's sanity check, and only on rank zero.

    Args:
        num_sentences: sentences spread evenly over the validation set.
        indices: validation set indices to draw instead (overrides num_sentences).
        layers: 1-based layers to draw; all if None.
        every_n_validations: draw at every n-th validation only.
        dirpath: folder of the PNG files; `<trainer.default_root_dir>/attention` if None.
    """

    def __init__(
        self,
        num_sentences: int = 2,
        indices: list[int] | None = None,
        layers: list[int] | None = None,
        every_n_validations: int = 1,
        dirpath: str | None = None,
    ) -> None:
        self.num_sentences = num_sentences
        self.indices = indices
        self.layers = layers
        self.every_n_validations = every_n_validations
        self.dirpath = dirpath
        self._validations = 0

    @torch.no_grad()
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._validations += 1
        if not trainer.is_global_zero or self._validations % self.every_n_validations:
            return
        step = trainer.global_step
        out_dir = Path(self.dirpath or Path(trainer.default_root_dir) / "attention")
        out_dir = out_dir / f"step{step:07d}"
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
