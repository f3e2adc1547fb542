import pytest

from transformer_nmt.decoding import beam_search, greedy_search
from transformer_nmt.decoding.beam_trace import FINISHED, KEPT, BeamTrace

BOS, NEVER = 1, -1  # as in conftest's tiny models; NEVER: an EOS the model cannot emit


@pytest.mark.parametrize("penalty", ["gnmt", "fairseq"])
def test_the_trace_finishes_what_beam_search_returns_and_changes_nothing(
    make_model, make_tokens, penalty
):
    model, src = make_model(), make_tokens([6, 2, 4])
    # An EOS the model emits early in one sentence: sentences leave the batch at different steps.
    eos = greedy_search(model, src, BOS, NEVER, max_len_b=3)[1, 1].item()
    options = dict(beam_size=3, n_best=3, max_len_b=4, alpha=0.6, penalty=penalty)
    trace = BeamTrace()
    traced = beam_search(model, src, BOS, eos, trace=trace, **options)
    assert traced == beam_search(model, src, BOS, eos, **options)
    for b, hypotheses in enumerate(traced):
        found = sorted(trace.finished(b), key=lambda h: h[2], reverse=True)
        assert found == [tuple(h) for h in hypotheses]
        for step in trace.steps[b]:
            assert len(step) == 6  # the 2K candidates, best first
            assert [c.score for c in step] == sorted((c.score for c in step), reverse=True)
        # Every step but the last goes on with K beams; the last ends the search.
        assert [sum(c.status == KEPT for c in step) for step in trace.steps[b][:-1]] == [3] * (
            len(trace.steps[b]) - 1
        )
        assert sum(c.status == FINISHED for step in trace.steps[b] for c in step) == 3
