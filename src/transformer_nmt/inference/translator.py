"""`Translator`: a trained model and its tokenizer, translating text from Python.

    from transformer_nmt import Translator

    translator = Translator.from_checkpoint("run/checkpoints/last.ckpt")
    translator.translate(["Ein Hund rennt."])                 # ["A dog runs."]
    translator.translate(["Ein Hund rennt."], n_best=2)       # [[("A dog runs.", -1.05), ...]]

`nmt-translate` and `nmt-evaluate` are thin command-line wrappers over it.
"""

import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from itertools import accumulate, islice
from pathlib import Path
from typing import Any, Protocol

import torch

from transformer_nmt.checkpoint import (
    load_members,
    load_translator,
    resolve_checkpoints,
    saved_languages,
)
from transformer_nmt.data.batching import greedy_sizes
from transformer_nmt.data.framing import ADDED_TOKENS, PLAIN, TARGET_FRAME, Frame, source_batch
from transformer_nmt.data.languages import Languages, direction_name, tag_ids
from transformer_nmt.data.tokenizer import SubwordTokenizer
from transformer_nmt.decoding import Hypothesis, beam_search
from transformer_nmt.decoding.constraints import constrained_beam_search
from transformer_nmt.decoding.ensemble import Ensemble, normalized_weights
from transformer_nmt.decoding.mbr import MBR, select
from transformer_nmt.decoding.sampling import Sampling, sample
from transformer_nmt.inference.alignment import Alignment
from transformer_nmt.inference.scoring import TargetScore, check_targets, read_pairs, score_batch
from transformer_nmt.model import EncoderDecoder
from transformer_nmt.model.quantization import quantize_int8
from transformer_nmt.model.weight_layout import transpose_linear_weights

log = logging.getLogger(__name__)

# One sentence's n-best (translation, score) pairs, best first. A score is always the model's
# log-probability of the translation's ids, EOS included (`Hypothesis.score`): what
# `Translator.score` gives the same pair, however the translation was found and ranked.
Scored = list[tuple[str, float]]

# Batches read, sorted by source length and decoded before any is yielded: enough for batches of
# like lengths, few enough that a stream shows progress and holds little.
SORT_CHUNK = 64

# Byte-level BPE can emit any character, and sampling does emit line breaks and tabs; an output
# is one line of the files it goes to (n-best lists and prefix columns are tab-separated).
LINE_BREAKING = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]")


class Search(Protocol):
    """An engine: the n-best hypotheses of each tokenized source, as `beam_search` gives them.

    It is given all the batches of a chunk at once, so that an engine may decode several side
    by side; it yields each batch's n-best lists, in the batches' order.
    """

    max_positions: int  # longest source, EOS included, and longest output

    def __call__(
        self,
        batches: list[list[list[int]]],
        beam_size: int,
        alpha: float,
        penalty: str,
        max_len_b: int,
        n_best: int,
    ) -> Iterator[list[list[Hypothesis]]]: ...


class TorchSearch:
    """Our beam search on the model itself: the reference engine.

    autocast: run the model's matmuls in this dtype (e.g. torch.bfloat16) under
    `torch.autocast`, its weights and the search's scores staying float32, as training's
    `bf16-mixed` validates; None runs in the weights' dtype.
    workers: on a CPU, decode up to this many batches side by side, each on one core (one torch
    thread), as CTranslate2's inter_threads do: a small model's step is short to split over
    cores (0.89-1.27x at 2 cores, experiments/frontier/README.md). While they run, torch's thread
    count is 1 for the whole process. 1: one batch after another on all of torch's threads.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        device: torch.device,
        autocast: torch.dtype | None = None,
        workers: int = 1,
    ):
        self.model, self.device, self.autocast = model, device, autocast
        self.max_positions = model.config.max_positions
        self.workers = workers

    def __call__(
        self,
        batches: list[list[list[int]]],
        beam_size: int,
        alpha: float,
        penalty: str,
        max_len_b: int,
        n_best: int,
        sampling: Sampling | None = None,
        indices: list[list[int]] | None = None,
        target_prefixes: list[list[list[int]]] | None = None,
        constraints: list[list[list[list[int]]]] | None = None,
        continuing: list[int] | None = None,
        first_words: list[list[list[list[int]]]] | None = None,
        frame: Frame = PLAIN,
    ) -> Iterator[list[list[Hypothesis]]]:
        """Beam search, with `constraints` (per batch, per sentence, its phrases' ids) beam
        search with dynamic beam allocation (none of the `continuing` ids, which go on a word,
        right after a constraint; `first_words` the phrases' ids as a sentence's first word),
        or with `sampling` sampling; each batch's `indices`
        (each sentence's 0-based line) seed the samples and name lines in warnings;
        `target_prefixes` per batch, per sentence; `frame`: a multilingual model's tag."""
        target_frame = TARGET_FRAME | {"bos_id": frame.bos_id}

        def decode(b: int) -> list[list[Hypothesis]]:
            src = source_batch(batches[b], self.max_positions, frame.source_prefix).to(self.device)
            common = dict(max_len_b=max_len_b, alpha=alpha, penalty=penalty)
            common["target_prefixes"] = None if target_prefixes is None else target_prefixes[b]
            options = dict(beam_size=beam_size, n_best=n_best)
            # Here, not around a yield: the caller's code would run under autocast.
            with torch.autocast(
                self.device.type, dtype=self.autocast, enabled=self.autocast is not None
            ):
                if constraints is not None:
                    del common["target_prefixes"]
                    found, missed = constrained_beam_search(
                        self.model, src, **target_frame, constraints=constraints[b],
                        continuing=continuing, first_words=first_words[b], **common, **options,
                    )  # fmt: skip
                    _report_missed(missed, indices[b])
                    return found
                if sampling is None:
                    return beam_search(self.model, src, **target_frame, **common, **options)
                where = dict(sampling=sampling, indices=indices[b])
                return sample(self.model, src, **target_frame, **common, **where)

        workers = min(self.workers, len(batches)) if self.device.type == "cpu" else 1
        if workers <= 1:  # also no batch at all: every line was empty
            yield from map(decode, range(len(batches)))
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(workers, thread_name_prefix="nmt-search") as pool:
                # Batches come shortest first: the longest, started last, would leave the other
                # workers idle at the end.
                pending = [pool.submit(decode, b) for b in reversed(range(len(batches)))]
                found = [future.result() for future in reversed(pending)]
        finally:
            torch.set_num_threads(threads)
        yield from found


class Translator:
    """A model in eval mode and its tokenizer, on one device and in one dtype.

    Args:
        model: any `EncoderDecoder`, e.g. the Transformer.
        tokenizer: the model's.
        device: where the model runs; None is CUDA where there is a GPU, else the CPU.
        dtype: the weights' floating-point type (e.g. torch.bfloat16); None keeps the model's.
        autocast: with engine="torch", compute in this dtype under `torch.autocast` with the
            weights kept as they are (torch.bfloat16: the mixed precision training validates
            in, fast on GPUs with bf16 tensor cores); None: no autocast.
        engine: "torch", our search on the model; or "ct2", CTranslate2 on the model converted
            in memory (a Transformer only), several times faster on CPUs. Its search differs
            from ours in one respect: a batch shares one maximum output length, that of its
            longest source + max_len_b.
        quantization: with engine="torch", None (float32) or "int8": the linear layers run in
            dynamic int8 (`quantize_int8`), on the CPU only and without dtype. With engine="ct2",
            CTranslate2's weight type: "float32" (the default), "int8" (fastest) or
            "int8_float32"; ct2 ignores dtype.
        vmap_from: with engine="ct2", a text file of the target language, best the target side
            of the training data (.gz allowed): CTranslate2 then scores only its tokens
            (`export.vmap`), which is faster; its softmax runs over those tokens alone, so
            scores and some translations change a little.
        languages: a multilingual model's languages and directions (its checkpoint's): then
            `translate` needs `tgt_lang`. None: a model of one direction.
        workers: with engine="torch" on a CPU, batches decoded side by side, each on one core
            (see `TorchSearch`); 1 decodes one batch at a time on all of torch's threads.
            CTranslate2 (engine="ct2") always runs one worker per torch thread.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        tokenizer: SubwordTokenizer,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        engine: str = "torch",
        quantization: str | None = None,
        vmap_from: str | os.PathLike | None = None,
        autocast: torch.dtype | None = None,
        languages: Languages | None = None,
        workers: int = 1,
    ):
        self.languages = languages
        if autocast is not None and (engine != "torch" or quantization is not None):
            raise ValueError("autocast is the torch engine's, without quantization")
        if vmap_from is not None and engine != "ct2":
            raise ValueError("vmap_from restricts CTranslate2's search: it needs engine='ct2'")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if workers > 1 and (engine != "torch" or self.device.type != "cpu"):
            raise ValueError(
                "workers decode batches side by side on CPU cores with engine 'torch'; "
                "CTranslate2 runs one per thread already, and a GPU one batch at a time"
            )
        self.tokenizer, self.engine = tokenizer, engine
        if engine == "torch":
            self.model = _torch_model(model, self.device, dtype, quantization)
            self.search: Search = TorchSearch(self.model, self.device, autocast, workers)
        elif engine == "ct2":
            if isinstance(model, Ensemble):
                raise ValueError("an ensemble decodes with engine='torch': CTranslate2 runs one")
            # Imported here: ctranslate2 is needed only by this engine.
            from transformer_nmt.export.ct2 import CT2Search
            from transformer_nmt.export.vmap import target_vocabulary_map

            self.model = model.eval()
            vmap = None if vmap_from is None else target_vocabulary_map(tokenizer, vmap_from)
            self.search = CT2Search(model, tokenizer, self.device, quantization or "float32", vmap)
        else:
            raise ValueError(f"engine must be 'torch' or 'ct2', got {engine!r}")

    @classmethod
    def from_checkpoint(
        cls,
        path_or_paths: str | os.PathLike | Sequence[str | os.PathLike],
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        average_last: int | None = None,
        engine: str = "torch",
        quantization: str | None = None,
        vmap_from: str | os.PathLike | None = None,
        autocast: torch.dtype | None = None,
        workers: int = 1,
    ) -> "Translator":
        """Load a checkpoint, the average of several, or the average of a folder's last N.

        Args:
            path_or_paths: a .ckpt from training or `nmt-average`; several .ckpt files, whose
                weights are averaged; or, with `average_last`, a folder of checkpoints.
            average_last: average the folder's last N periodic checkpoints (the paper averages 5;
                never last.ckpt or the best).
            device, dtype, engine, quantization, vmap_from, autocast, workers: as for `Translator`.

        Raises:
            CheckpointError: a file that is missing, damaged, or not a translator.
        """
        many = isinstance(path_or_paths, Sequence) and not isinstance(path_or_paths, str)
        paths = [str(p) for p in path_or_paths] if many else [str(path_or_paths)]
        resolved = resolve_checkpoints(paths, average_last)
        model, tokenizer = load_translator(resolved)
        languages = saved_languages(resolved[0])
        return cls(
            model, tokenizer, device, dtype, engine, quantization, vmap_from, autocast, languages,
            workers,
        )  # fmt: skip

    @classmethod
    def from_ensemble(
        cls,
        members: Sequence[str | os.PathLike | Sequence[str | os.PathLike]],
        weights: Sequence[float] | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        quantization: str | None = None,
        autocast: torch.dtype | None = None,
        workers: int = 1,
    ) -> "Translator":
        """Several checkpoints decoding as one model (`Ensemble`), on the torch engine.

        Args:
            members: each a .ckpt, or a list of .ckpt files averaged into one member.
            weights: one positive number per member; None weighs them equally.
            device, dtype, quantization, autocast, workers: as for `Translator`.

        Raises:
            CheckpointError: a member that cannot be loaded, or whose vocabulary differs from
                the first member's (named).
            ValueError: weights that are not one positive number per member.
        """
        paths = [
            [Path(member)] if isinstance(member, str | os.PathLike) else [Path(p) for p in member]
            for member in members
        ]
        normalized_weights(weights, len(paths))  # refused before loading anything
        models, tokenizer = load_members(paths)
        ensemble = Ensemble(models, None if weights is None else list(weights))
        languages = saved_languages(paths[0][0])  # the members share the first's vocabulary
        return cls(
            ensemble, tokenizer, device, dtype, "torch", quantization, None, autocast, languages,
            workers,
        )  # fmt: skip

    @classmethod
    def from_folder(
        cls,
        folder: str | os.PathLike,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        engine: str = "torch",
        quantization: str | None = None,
        vmap_from: str | os.PathLike | None = None,
        autocast: torch.dtype | None = None,
        workers: int = 1,
    ) -> "Translator":
        """Load a folder written by `nmt-export safetensors`; arguments as for `Translator`.

        Raises:
            ExportError: a folder without such files, or whose parts do not fit together.
        """
        from transformer_nmt.export.native import load_safetensors

        model, tokenizer = load_safetensors(folder)
        return cls(
            model, tokenizer, device, dtype, engine, quantization, vmap_from, autocast, None,
            workers,
        )  # fmt: skip

    def translate(
        self,
        sentences: Iterable[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        penalty: str = "gnmt",
        max_len_b: int = 50,
        batch_size: int = 64,
        n_best: int | None = None,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
        prefixes: Iterable[str] | None = None,
        constraints: Iterable[Sequence[str]] | None = None,
        mbr: MBR | None = None,
        tgt_lang: str | None = None,
        src_lang: str | None = None,
    ) -> list[str] | list[Scored]:
        """Translate sentences, in input order; the defaults are the paper's (section 6.1).

        Args:
            sentences: source text, one sentence each.
            beam_size: hypotheses kept per sentence; 1 is greedy search.
            alpha: length penalty exponent; 0 ranks by log-probability alone.
            penalty: "gnmt", log P / ((5 + |Y|) / 6)^alpha (the paper's), or "fairseq",
                log P / |Y|^alpha.
            max_len_b: a translation stops at its source's length + max_len_b tokens.
            batch_size: sentences decoded together.
            n_best: None returns one string per sentence; k returns, per sentence, its k best
                (translation, score) pairs, best first by score / length penalty (k <=
                beam_size); a score is the log-probability of the translation's ids, EOS
                included, as `score` gives it (`Hypothesis`).
            max_tokens: if given, batches hold up to this many source tokens, padding and EOS
                included, instead of `batch_size` sentences: short sentences share large
                batches, as a GPU wants. A longer sentence goes alone in its batch.
            sampling: sample instead of beam search (`Sampling`: n, temperature, top_k, top_p,
                seed); a sentence's samples depend on the seed and its index in `sentences`, not
                on the batches. Excludes n_best: its n samples are the scored lists.
            prefixes: one per sentence, text its translation starts with ("" none), forced
                before the search goes on (engine "torch"); longer than the translation may be
                (its source's length + max_len_b tokens, within the model's positions) is an
                error naming its line, raised before any sentence is decoded.
            constraints: one list of phrases per sentence ([] none) its translation must
                contain, each as a whole word (the sentence's first, written as the tokenizer
                writes a first word, or one after a space; followed by no letter or digit that
                would go on its word), by beam search with
                dynamic beam allocation (engine "torch", not with sampling or prefixes); one a
                translation cannot meet within its length limit is logged as a warning naming
                the line, and the translation meeting the most is given.
            mbr: minimum Bayes risk decoding (`MBR`: its sampling, candidates and utility,
                engine "torch", not with sampling or constraints): each sentence's candidate of
                the highest mean utility against its samples; with n_best, its n_best (at most
                N, fewer where fewer texts differ), best first by that mean, each with its
                log-probability as a sample or beam hypothesis (`decoding.mbr.select` gives the
                means).
            tgt_lang: the language to translate into, one of a multilingual model's
                `languages` (which it must be given); a model of one direction takes none.
            src_lang: the sources' language, if known: a direction the model never trained
                is translated with a warning that it is zero-shot.

        Returns:
            One translation per sentence, or one list of n_best scored translations (of n
            samples, in the order drawn; an empty sentence's are ("", 0.0)). Each is one line: a
            line break or tab the model writes comes out as a space.
        """
        if sampling is not None and n_best is not None:
            raise ValueError("n_best is beam search's: sampling gives sampling.n scored samples")
        if mbr is not None and n_best is not None and n_best > mbr.sampling.n:
            raise ValueError(f"n_best {n_best} exceeds MBR's {mbr.sampling.n} samples")
        count = n_best or (sampling.n if sampling is not None else 1)
        if prefixes is not None:  # every prefix checked before any line is decoded
            sentences, prefixes = list(sentences), list(prefixes)
            self.check_prefixes(sentences, prefixes, max_len_b)
        results = self.stream(
            sentences, beam_size, alpha, penalty, max_len_b, batch_size, count, max_tokens,
            sampling=sampling, prefixes=prefixes, constraints=constraints, mbr=mbr,
            tgt_lang=tgt_lang, src_lang=src_lang,
        )  # fmt: skip
        if n_best is None and count == 1:
            return [hypotheses[0][0] for hypotheses in results]
        return list(results)

    def stream(
        self,
        sentences: Iterable[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        penalty: str = "gnmt",
        max_len_b: int = 50,
        batch_size: int = 64,
        n_best: int = 1,
        max_tokens: int | None = None,
        sampling: Sampling | None = None,
        prefixes: Iterable[str] | None = None,
        constraints: Iterable[Sequence[str]] | None = None,
        start: int = 0,
        mbr: MBR | None = None,
        tgt_lang: str | None = None,
        src_lang: str | None = None,
    ) -> Iterator[Scored]:
        """`translate` lazily, in input order: yields each sentence's n-best (or samples).

        Reads SORT_CHUNK batches of sentences at a time (with max_tokens, max_tokens sentences:
        at least one full batch; with MBR's N samples a sentence, N times fewer) and decodes
        them in batches of similar token length, so a batch pads little; batch_size 1 reads
        one line at a time, for interactive input. An empty (or blank) sentence translates to
        an empty one without running the model. A sentence longer than the model's position
        table is cut to fit, with a warning naming its line. Arguments as for `translate`;
        with sampling, n_best is ignored. start: the index of the first sentence in a larger
        input that `sentences` is a part of (a shard): its samples and the line numbers of its
        warnings are those of that input.
        """
        # islice would take nothing: every sentence lost without a word
        for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        asked = [sampling, prefixes, constraints, mbr]
        if self.engine != "torch" and any(x is not None for x in asked):
            raise ValueError(
                f"sampling, prefixes, constraints and MBR need engine 'torch', not {self.engine!r}"
            )
        if constraints is not None and (sampling is not None or prefixes is not None):
            raise ValueError("constraints steer beam search: not with sampling or prefixes")
        if mbr is not None and (sampling is not None or constraints is not None):
            raise ValueError(
                "MBR samples as its `mbr.sampling` says: not with sampling or constraints"
            )
        frame = self.frame(tgt_lang, src_lang)
        if frame != PLAIN and self.engine != "torch":
            raise ValueError(f"a language tag needs engine 'torch', not {self.engine!r}")
        options = dict(beam_size=beam_size, alpha=alpha, penalty=penalty, max_len_b=max_len_b)
        options |= {"frame": frame} if frame != PLAIN else {}  # an engine may know no more
        options |= dict(n_best=n_best if sampling is None else sampling.n, sampling=sampling)
        size = chunk_size(batch_size, max_tokens, mbr)
        sentences = iter(sentences)
        aligned = {"prefixes": prefixes, "constraint lists": constraints}
        aligned = {what: iter(items) for what, items in aligned.items() if items is not None}
        first_line = start + 1
        while chunk := [s.strip() for s in islice(sentences, size)]:
            sizes = (batch_size, max_tokens)
            per_line = {
                w: _aligned(items, len(chunk), first_line, w) for w, items in aligned.items()
            }
            forced, phrases = per_line.get("prefixes"), per_line.get("constraint lists")
            if mbr is None:
                yield from self._translate_chunk(
                    chunk, first_line, sizes, forced, phrases, **options
                )
            else:
                yield from self._mbr_chunk(chunk, first_line, sizes, forced, mbr, **options)
            first_line += len(chunk)
        for what, items in aligned.items():
            if next(items, None) is not None:
                raise ValueError(f"more {what} than the {first_line - 1 - start} sentences")

    def _translate_chunk(
        self,
        chunk: list[str],
        first_line: int,
        sizes: tuple,
        prefixes: list[str] | None,
        constraints: list[Sequence[str]] | None,
        n_best: int,
        sampling: Sampling | None,
        **options,
    ) -> list[Scored]:
        """The n-best of each sentence of `chunk`, decoded shortest first, in chunk order.

        sizes: (batch_size, max_tokens) as `stream` takes them; prefixes, constraints: one per
        sentence.
        """
        results = [[("", 0.0)] * n_best for _ in chunk]
        todo = [i for i, sentence in enumerate(chunk) if sentence]
        _report_unused(chunk, first_line, prefixes, constraints)
        ids = self._encode([chunk[i] for i in todo], [first_line + i for i in todo])
        tokens = dict(zip(todo, ids, strict=True))
        by_length = sorted(todo, key=lambda i: len(tokens[i]))
        batches = self._batches(by_length, tokens, *sizes)
        extra: dict[str, Any] = {}  # only what is asked for: an engine may know no more
        if sampling is not None or constraints is not None:
            extra["indices"] = [[first_line - 1 + i for i in b] for b in batches]
        if sampling is not None:
            extra["sampling"] = sampling
        if constraints is not None:
            phrases = {i: self._phrase_ids(constraints[i]) for i in todo}
            extra["constraints"] = [[phrases[i][0] for i in b] for b in batches]
            extra["first_words"] = [[phrases[i][1] for i in b] for b in batches]
            extra["continuing"] = self._continuing
        if prefixes is not None:
            forced = self._prefix_ids(prefixes, tokens, first_line, options["max_len_b"])
            extra["target_prefixes"] = [[forced[i] for i in b] for b in batches]
        found = self.search(
            [[tokens[i] for i in b] for b in batches], n_best=n_best, **options, **extra
        )
        for batch, beams in zip(batches, found, strict=True):
            for i, hypotheses in zip(batch, beams, strict=True):
                texts = self.tokenizer.decode_batch([h.tokens for h in hypotheses])
                results[i] = [
                    (LINE_BREAKING.sub(" ", t), h.score)
                    for t, h in zip(texts, hypotheses, strict=True)
                ]
        return results

    def _mbr_chunk(
        self,
        chunk: list[str],
        first_line: int,
        sizes: tuple,
        prefixes: list[str] | None,
        mbr: MBR,
        n_best: int,
        **options,
    ) -> list[Scored]:
        """Each sentence of `chunk`'s MBR n-best: its candidates ranked against its samples."""
        del options["sampling"]  # None: MBR samples as mbr.sampling says
        where = (chunk, first_line, sizes, prefixes, None)
        samples = self._translate_chunk(
            *where, n_best=mbr.sampling.n, sampling=mbr.sampling, **options
        )
        beams = [[]] * len(chunk)
        if mbr.uses_beam:
            beams = self._translate_chunk(
                *where, n_best=options["beam_size"], sampling=None, **options
            )
        results = []
        for sentence, drawn, found in zip(chunk, samples, beams, strict=True):
            if not sentence:
                results.append([("", 0.0)] * n_best)
                continue
            references = [text for text, _ in drawn]
            candidates = mbr.pool(references, [text for text, _ in found])
            scores = dict(found) | dict(drawn)  # each candidate's log-probability, as found
            chosen = select(candidates, references, mbr.utility, n_best)
            results.append([(text, scores[text]) for text, _ in chosen])
        return results

    def score(
        self,
        sources: Iterable[str],
        targets: Iterable[str],
        batch_size: int = 64,
        max_tokens: int | None = None,
        per_token: bool = False,
        alignment: Alignment | None = None,
        tgt_lang: str | None = None,
        src_lang: str | None = None,
    ) -> list[TargetScore]:
        """Forced decoding: the model's log-probability of each target given its source.

        Args:
            sources, targets: aligned text, one sentence each (also n-best hypotheses, each
                beside its source).
            batch_size, max_tokens: batches as for `translate` (by source length).
            per_token: also each target token's log-probability, EOS last.
            alignment: also Pharaoh word alignments from this attention (`Alignment`: layer,
                heads); not with an ensemble.
            tgt_lang, src_lang: as for `translate`: a multilingual model scores the targets as
                translations into `tgt_lang`, framed by its tag as the search frames them.

        Returns:
            One `TargetScore` (score, mean = score per token, token_log_probs, alignment) per
            pair, in input order; `score_stream` is the lazy form.
        """
        return list(
            self.score_stream(
                sources,
                targets,
                batch_size,
                max_tokens,
                per_token,
                alignment,
                tgt_lang=tgt_lang,
                src_lang=src_lang,
            )  # fmt: skip
        )

    def score_stream(
        self,
        sources: Iterable[str],
        targets: Iterable[str],
        batch_size: int = 64,
        max_tokens: int | None = None,
        per_token: bool = False,
        alignment: Alignment | None = None,
        start: int = 0,
        tgt_lang: str | None = None,
        src_lang: str | None = None,
    ) -> Iterator[TargetScore]:
        """`score` lazily, in input order, reading pairs in chunks as `stream` reads sentences;
        start as for `stream`."""
        if self.engine != "torch":
            raise ValueError(f"scoring runs on engine 'torch', not {self.engine!r}")
        frame = self.frame(tgt_lang, src_lang)
        for name, value in (("batch_size", batch_size), ("max_tokens", max_tokens)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if alignment is not None and isinstance(self.model, Ensemble):
            raise ValueError("alignments are one model's attention: score them without an ensemble")
        pairs, size = read_pairs(sources, targets), chunk_size(batch_size, max_tokens)
        aligning = None if alignment is None else (alignment, self.tokenizer.tokens())
        first_line = start + 1
        while chunk := list(islice(pairs, size)):
            sizes = (batch_size, max_tokens)
            yield from self._score_chunk(chunk, first_line, sizes, per_token, aligning, frame)
            first_line += len(chunk)

    def _score_chunk(
        self,
        chunk: list[tuple[str, str]],
        first_line: int,
        sizes: tuple[int, int | None],
        per_token: bool,
        aligning: tuple[Alignment, list[str]] | None,
        frame: Frame = PLAIN,
    ) -> list[TargetScore]:
        """Each pair's score, scored in batches of like lengths (both sides), in chunk order."""
        lines = [first_line + i for i in range(len(chunk))]
        sources = self._encode([s.strip() for s, _ in chunk], lines)
        targets = self.tokenizer.encode_batch([t.strip() for _, t in chunk], side="target")
        check_targets(targets, lines, self.search.max_positions)
        tokens = dict(enumerate(sources))
        # Both sides alike in a batch: a long target beside short ones would pad them all.
        by_length = sorted(tokens, key=lambda i: len(tokens[i]) + len(targets[i]))
        results: list[TargetScore | None] = [None] * len(chunk)
        for batch in self._batches(by_length, tokens, *sizes):
            found = score_batch(
                self.model, self.device, [sources[i] for i in batch], [targets[i] for i in batch],
                self.search.autocast, per_token, aligning, frame,
            )  # fmt: skip
            for i, result in zip(batch, found, strict=True):
                results[i] = result
        return results

    def _batches(
        self,
        by_length: list[int],
        tokens: dict[int, list[int]],
        batch_size: int,
        max_tokens: int | None,
    ) -> list[list[int]]:
        """Consecutive runs of the length-sorted sentences: batch_size each, or within
        max_tokens source tokens as the encoder reads them (EOS and padding included)."""
        if max_tokens is None:
            sizes = [batch_size] * -(-len(by_length) // batch_size)
        else:
            limit = self.search.max_positions
            lengths = [min(len(tokens[i]) + ADDED_TOKENS, limit) for i in by_length]
            sizes = greedy_sizes(lengths, max_tokens)
        ends = list(accumulate(sizes))
        return [by_length[end - size : end] for size, end in zip(sizes, ends, strict=True)]

    @cached_property
    def _continuing(self) -> list[int]:
        """The ids that go on a word: none may follow a constraint, which stays a whole word."""
        return [i for i, goes_on in enumerate(self.tokenizer.continues_word()) if goes_on]

    def _phrase_ids(self, phrases: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """Each phrase's ids as a word inside a sentence, after a space (byte-level BPE's Ġ),
        and as the sentence's first word, which the tokenizer writes without one."""
        texts = [phrase.strip() for phrase in phrases if phrase.strip()]
        if not texts:
            return [], []
        inside = self.tokenizer.encode_batch([" " + text for text in texts], side="target")
        return inside, self.tokenizer.encode_batch(texts, side="target")

    def check_prefixes(
        self,
        sentences: Sequence[str],
        prefixes: Sequence[str],
        max_len_b: int = 50,
        start: int = 0,
    ) -> None:
        """Refuse, before any output, a prefix longer than its translation may be.

        Raises:
            ValueError: naming the first such line (1-based, counted from `start`) and its limit.
        """
        todo = [i for i, sentence in enumerate(sentences[: len(prefixes)]) if sentence.strip()]
        sources = self.tokenizer.encode_batch([sentences[i].strip() for i in todo])
        texts = [prefixes[i].strip() for i in todo]
        forced = self.tokenizer.encode_batch(texts, side="target")
        for i, source, prefix in zip(todo, sources, forced, strict=True):
            self._check_prefix(start + i + 1, len(source), len(prefix), max_len_b)

    def _check_prefix(self, line: int, source: int, prefix: int, max_len_b: int) -> None:
        """Refuse a prefix of `prefix` ids on a line whose source has `source` ids."""
        limit = self.search.max_positions
        if prefix > limit:
            raise ValueError(
                f"line {line}: its prefix has {prefix} tokens, more than the model's {limit} "
                "positions hold; shorten the prefix"
            )
        longest = min(min(source + ADDED_TOKENS, limit) + max_len_b, limit)
        if prefix > longest:
            raise ValueError(
                f"line {line}: its prefix has {prefix} tokens, more than the {longest} its "
                f"translation may have (source length + max_len_b {max_len_b}); shorten the "
                "prefix or raise max_len_b (--max-len-b)"
            )

    def _prefix_ids(
        self, prefixes: list[str], tokens: dict[int, list[int]], first_line: int, max_len_b: int
    ) -> dict[int, list[int]]:
        """Each decoded sentence's prefix ids, refusing one longer than its output may be."""
        todo = list(tokens)
        texts = [prefixes[i].strip() for i in todo]
        ids = dict(zip(todo, self.tokenizer.encode_batch(texts, side="target"), strict=True))
        for i, prefix in ids.items():
            self._check_prefix(first_line + i, len(tokens[i]), len(prefix), max_len_b)
        return ids

    def frame(self, tgt_lang: str | None, src_lang: str | None = None, warn: bool = True) -> Frame:
        """How sources and outputs are framed to translate into `tgt_lang` (`language_frame`)."""
        return language_frame(self.languages, self.tokenizer.tokens, tgt_lang, src_lang, warn)

    def _encode(self, sentences: list[str], lines: list[int]) -> list[list[int]]:
        """Token ids of each sentence, warning (by line number) about those too long to fit."""
        ids = self.tokenizer.encode_batch(sentences)
        limit = self.search.max_positions - ADDED_TOKENS  # source tokens that fit beside EOS
        for line, row in zip(lines, ids, strict=True):
            if len(row) > limit:
                log.warning(
                    "line %d: %d tokens, more than the model's %d; translating the first %d",
                    line,
                    len(row),
                    limit,
                    limit,
                )
        return ids


def language_frame(
    languages: Languages | None,
    tokens: Callable[[], list[str]],
    tgt_lang: str | None,
    src_lang: str | None = None,
    warn: bool = True,
) -> Frame:
    """How a model of `languages` frames sources and outputs to translate into `tgt_lang`: its
    tag; a model of one direction (None) takes no language. A direction never trained is
    allowed, with a warning that it is zero-shot (unless not `warn`: a check before the work).

    Args:
        tokens: the vocabulary's tokens (`tokenizer.tokens`), read only for a tag.
    """
    if languages is None:
        if tgt_lang is not None or src_lang is not None:
            raise ValueError(
                "this model records no languages: it translates the one direction it was "
                "trained on; translate without tgt_lang and src_lang (--tgt-lang, --src-lang)"
            )
        return PLAIN
    known = ", ".join(languages.languages)
    if tgt_lang is None:
        raise ValueError(
            "this model translates into several languages: name one with tgt_lang "
            f"(nmt-translate --tgt-lang): {known}"
        )
    for lang in (tgt_lang, src_lang):
        if lang is not None and lang not in languages.languages:
            raise ValueError(f"the model knows no language {lang!r}; it knows {known}")
    trained = [d for d in languages.directions if d[1] == tgt_lang and src_lang in (None, d[0])]
    if not trained and warn:
        log.warning(
            "%s was never trained (the model trained %s): its translations are zero-shot",
            direction_name((src_lang or "*", tgt_lang)),
            ", ".join(languages.names),
        )
    return languages.frame(tgt_lang, tag_ids(tokens(), languages), src_lang)


def chunk_size(batch_size: int, max_tokens: int | None, mbr: MBR | None = None) -> int:
    """Sentences `stream` reads, sorts and decodes together."""
    if max_tokens is None and batch_size == 1:
        return 1
    # max_tokens sentences hold at least one full batch: a sentence has at least one token
    size = max_tokens if max_tokens is not None else batch_size * SORT_CHUNK
    if mbr is not None:  # N samples a sentence: a chunk of a beam's cost, so progress shows
        return max(1, size // mbr.sampling.n)
    return size


def _aligned(items: Iterator, n: int, first_line: int, what: str) -> list:
    """The next n of a per-sentence input (`what`, plural); fewer is an error naming the first
    line without one."""
    chunk = list(islice(items, n))
    if len(chunk) < n:
        line, one = first_line + len(chunk), what.removesuffix("es").removesuffix("s")
        raise ValueError(f"line {line}: no {one}, the {what} ended before")
    return chunk


def _report_unused(
    chunk: list[str],
    first_line: int,
    prefixes: list[str] | None,
    constraints: list[Sequence[str]] | None,
) -> None:
    """Warn, naming the lines, of prefixes and constraints given to empty lines."""
    for what, items in (("prefix is", prefixes), ("constraints are", constraints)):
        if items is None:
            continue
        lines = [first_line + i for i, s in enumerate(chunk) if not s and _given(items[i])]
        if lines:
            log.warning(
                "line %s: empty, so its %s not used (an empty line translates to an empty one)",
                ", ".join(map(str, lines)),
                what,
            )


def _given(item: str | Sequence[str]) -> bool:
    """A prefix, or a constraint list, with some text in it."""
    return any(x.strip() for x in ([item] if isinstance(item, str) else item))


def _report_missed(missed: list[list[int]], indices: list[int]) -> None:
    """Warn, by line, of constraints a translation could not meet."""
    for index, numbers in zip(indices, missed, strict=True):
        if numbers:
            log.warning(
                "line %d: constraint %s not met within the length limit (source length + "
                "max_len_b); the translation meeting the most is given",
                index + 1,
                ", ".join(str(i + 1) for i in numbers),
            )


def _torch_model(
    model: EncoderDecoder,
    device: torch.device,
    dtype: torch.dtype | None,
    quantization: str | None,
) -> EncoderDecoder:
    """The model our search runs: moved and cast (on a CPU, its linear weights transposed in
    memory by `transpose_linear_weights`), or a copy with int8 linear layers."""
    if quantization is None:
        model = model.to(device=device, dtype=dtype).eval()
        return transpose_linear_weights(model) if device.type == "cpu" else model
    if quantization != "int8":
        raise ValueError(f"engine 'torch' quantizes to 'int8' only, got {quantization!r}")
    # The quantized kernels (fbgemm, x86) are CPU kernels and take float32 activations.
    if device.type != "cpu" or dtype not in (None, torch.float32):
        raise ValueError(f"int8 quantization runs on the CPU in float32, not {device} {dtype}")
    return quantize_int8(model.to(device))
