"""Corpus BLEU, chrF, chrF++ and TER exactly as sacreBLEU computes them, summed across batches and
ranks."""

import torch
from sacrebleu.metrics import BLEU, CHRF, TER
from torchmetrics import Metric

MAX_ORDER = 4


class SacreBLEU(Metric):
    """sacreBLEU's corpus BLEU (13a tokenization, exp smoothing: its defaults) as a torchmetric.

    Keeps sacreBLEU's sufficient statistics (n-gram matches and totals, lengths) as sums, so the
    score over several batches or DDP ranks equals `sacrebleu.corpus_bleu` over all sentences at
    once; averaging per-rank scores would not.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.bleu = BLEU()
        for name, size in (("correct", MAX_ORDER), ("total", MAX_ORDER), ("lengths", 2)):
            self.add_state(name, torch.zeros(size, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, hypotheses: list[str], references: list[str]) -> None:
        stats = self.bleu.corpus_score(hypotheses, [references])
        # On the states' device: CUDA refuses to add a 1-D CPU tensor to a CUDA one in place.
        device = self.correct.device
        self.correct += torch.tensor(stats.counts, device=device)
        self.total += torch.tensor(stats.totals, device=device)
        self.lengths += torch.tensor([stats.sys_len, stats.ref_len], device=device)

    def compute(self) -> torch.Tensor:
        score = BLEU.compute_bleu(
            self.correct.tolist(), self.total.tolist(), *self.lengths.tolist(), smooth_method="exp"
        ).score
        return torch.tensor(score, dtype=torch.float64, device=self.correct.device)

    def signature(self) -> str:
        return str(self.bleu.get_signature())


class SacreCHRF(Metric):
    """sacreBLEU's corpus chrF (character 6-grams, beta 2: its defaults) as a torchmetric; with
    `word_order=2`, chrF++ (word unigrams and bigrams too).

    As `SacreBLEU`, it sums sacreBLEU's own per-sentence statistics (each n-gram order's
    matches and hypothesis and reference counts), so several batches or ranks score as one
    `sacrebleu.corpus_chrf` call over all sentences.
    """

    full_state_update = False

    def __init__(self, word_order: int = 0) -> None:
        super().__init__()
        self.chrf = CHRF(word_order=word_order)
        size = 3 * (self.chrf.char_order + self.chrf.word_order)
        self.add_state("stats", torch.zeros(size, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, hypotheses: list[str], references: list[str]) -> None:
        per_sentence = self.chrf._extract_corpus_statistics(hypotheses, [references])
        self.stats += torch.tensor(per_sentence, dtype=torch.long, device=self.stats.device).sum(0)

    def compute(self) -> torch.Tensor:
        score = self.chrf._compute_score_from_stats(self.stats.tolist()).score
        return torch.tensor(score, dtype=torch.float64, device=self.stats.device)


class SacreTER(Metric):
    """sacreBLEU's corpus TER (its defaults: case-sensitive, punctuation kept) as a torchmetric.

    Sums sacreBLEU's per-sentence edits and reference lengths (in words), so several batches or
    ranks score as one `sacrebleu.corpus_ter` call over all sentences. Lower is better.
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.ter = TER()
        # float64: a reference length is the mean over references, exact while there is one.
        self.add_state("stats", torch.zeros(2, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, hypotheses: list[str], references: list[str]) -> None:
        per_sentence = self.ter._extract_corpus_statistics(hypotheses, [references])
        summed = torch.tensor(per_sentence, dtype=torch.float64, device=self.stats.device).sum(0)
        self.stats += summed

    def compute(self) -> torch.Tensor:
        score = self.ter._compute_score_from_stats(self.stats.tolist()).score
        return torch.tensor(score, dtype=torch.float64, device=self.stats.device)
