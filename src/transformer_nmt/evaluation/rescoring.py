"""N-best rescoring: each hypothesis ranked by a weighted sum of its features, the weights tuned
for corpus BLEU on a validation split with Optuna.

An n-best file holds 'line<TAB>score<TAB>text' lines (`nmt-translate --n-best`), each followed by
the columns that `nmt-score --n-best` appends: a forward model's log-probability and score, a
reverse model's (`--reverse`), and so on. The features of a hypothesis are its numeric columns
(the search's score, its log-probability, first) and its length in words. A sentence's lines come
in the search's order, best first.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU

from transformer_nmt.data.bitext import read_lines
from transformer_nmt.data.corpus import DataError


@dataclass(frozen=True)
class Candidate:
    text: str
    features: tuple[float, ...]


def read_n_best(path: str | os.PathLike, sentences: int | None = None) -> list[list[Candidate]]:
    """Each sentence's candidates, in the file's order; a sentence the file skips has none.

    Args:
        sentences: how many the input had; None: up to the highest line number in the file.

    Raises:
        DataError: a line not 'line<TAB>score<TAB>text[<TAB>number...]', or a different number
            of columns than the first line's, named by its line.
    """
    rows: list[tuple[int, Candidate]] = []
    width = None
    for number, line in enumerate(read_lines(Path(path)), start=1):
        fields = line.rstrip("\n").split("\t")
        try:
            index = int(fields[0])
            numbers = [float(fields[1]), *map(float, fields[3:])]
        except (ValueError, IndexError) as e:
            raise DataError(
                f"{path}, line {number}: not 'line<TAB>score<TAB>text' followed by numbers "
                f"(nmt-score's columns, without --per-token or --align): {e}"
            ) from e
        width = width or len(fields)
        if len(fields) != width or len(fields) < 3:
            raise DataError(f"{path}, line {number}: {len(fields)} columns, the first line {width}")
        features = (*numbers, float(len(fields[2].split())))
        rows.append((index, Candidate(fields[2], features)))
    count = sentences if sentences is not None else 1 + max((i for i, _ in rows), default=-1)
    n_best: list[list[Candidate]] = [[] for _ in range(count)]
    for index, candidate in rows:
        if not 0 <= index < count:
            raise DataError(f"{path}: line number {index} is past the {count} sentences")
        n_best[index].append(candidate)
    return n_best


def rerank(n_best: list[list[Candidate]], weights: list[float]) -> list[str]:
    """The candidate of each sentence whose weighted features sum highest ("" for none); the
    first of equals, so weights all 0 keep the search's best."""
    best = []
    for candidates in n_best:
        if candidates and len(weights) != len(candidates[0].features):
            raise ValueError(f"{len(weights)} weights for {len(candidates[0].features)} features")
        total = lambda c: sum(w * f for w, f in zip(weights, c.features, strict=True))  # noqa: E731
        best.append(max(candidates, key=total).text if candidates else "")
    return best


def tune(
    n_best: list[list[Candidate]], references: list[str], trials: int = 100, seed: int = 0
) -> tuple[list[float], float, float]:
    """Weights in [-1, 1] maximising corpus BLEU, by Optuna's TPE sampler.

    The first trial is the search's own ranking (every weight 0: each sentence's first line),
    so the tuned weights are never worse than it on these references. Weight 1 on the score
    alone would not be it: beam search ranks by the score over a length penalty.

    Returns:
        (weights, their BLEU, the search's own BLEU).
    """
    import optuna  # the `sweep` extra's; translation alone does not need it

    if len(n_best) != len(references):
        raise ValueError(f"{len(n_best)} n-best lists for {len(references)} references")
    features = len(next(c for c in n_best if c)[0].features)
    names = [f"w{i}" for i in range(features)]
    bleu = BLEU()

    def objective(trial: optuna.Trial) -> float:
        weights = [trial.suggest_float(name, -1.0, 1.0) for name in names]
        return bleu.corpus_score(rerank(n_best, weights), [references]).score

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    baseline = {name: 0.0 for name in names}
    study.enqueue_trial(baseline)
    study.optimize(objective, n_trials=trials)
    weights = [study.best_params[name] for name in names]
    return weights, study.best_value, study.trials[0].value
