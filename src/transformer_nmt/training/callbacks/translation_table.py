"""Sample translations of a few validation sentences at every validation, as a W&B table."""

import csv
import io
from pathlib import Path

import lightning as L
import sacrebleu
import torch
from lightning.pytorch.loggers import WandbLogger

from transformer_nmt.data.framing import first_token, pad_batch
from transformer_nmt.runtime.atomic import write_atomically
from transformer_nmt.training.step.val_examples import pick_val_examples

COLUMNS = ["step", "source", "reference", "hypothesis", "sentence_bleu"]


class TranslationTable(L.Callback):
    """Translates fixed validation sentences after each validation and logs them side by side.

    With a W&B logger the rows go to the table `val/translations` (columns: step, source,
    reference, hypothesis, sentence_bleu); they are always appended to `<path>` as TSV, so they
    exist without W&B. Skipped during Lightning's sanity check, and on ranks other than zero.

    Args:
        num_sentences: sentences spread evenly over the validation set.
        indices: validation set indices to translate instead (overrides num_sentences).
        path: the TSV file; `<trainer.default_root_dir>/translations.tsv` if None.
    """

    def __init__(
        self, num_sentences: int = 8, indices: list[int] | None = None, path: str | None = None
    ) -> None:
        self.num_sentences = num_sentences
        self.indices = indices
        self.path = path

    @torch.no_grad()
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        examples = pick_val_examples(trainer, self.num_sentences, self.indices)
        src = pad_batch([ex["src"] for ex in examples]).to(pl_module.device)
        was_training = pl_module.training
        pl_module.eval()
        hypotheses = pl_module.translate_ids(src, [first_token(ex) for ex in examples])
        pl_module.train(was_training)
        step = trainer.global_step
        rows = [
            [step, ex["src_text"], ex["tgt_text"], hyp, _sentence_bleu(hyp, ex["tgt_text"])]
            for ex, hyp in zip(examples, hypotheses, strict=True)
        ]
        self._append_tsv(
            Path(self.path or Path(trainer.default_root_dir) / "translations.tsv"), rows
        )
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_table("val/translations", columns=COLUMNS, data=rows, step=step)

    @staticmethod
    def _append_tsv(path: Path, rows: list[list]) -> None:
        """Append by rewriting the whole file atomically: a crash mid-write cuts no row short.

        A plain append can leave a partial last line, onto which the next append glues its first
        row. The file grows by a few rows per validation, so rewriting it costs little.
        """
        old = path.read_bytes() if path.exists() else b""
        text = io.StringIO()
        writer = csv.writer(text, delimiter="\t")
        if not old:
            writer.writerow(COLUMNS)
        writer.writerows(rows)
        write_atomically(path, old + text.getvalue().encode("utf-8"))


def _sentence_bleu(hypothesis: str, reference: str) -> float:
    # Smoothed ("exp"), sacreBLEU's default for single sentences, so short ones are not all 0.
    return round(sacrebleu.sentence_bleu(hypothesis, [reference]).score, 2)
