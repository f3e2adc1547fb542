import pytest

from transformer_nmt.training.lr_schedule import inverse_sqrt_warmup


@pytest.mark.parametrize("step", [1, 10, 3999, 4000, 4001, 100_000])
def test_equals_the_papers_formula(step):
    # Section 5.3: lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5)
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    assert inverse_sqrt_warmup(step, 512, 4000) == pytest.approx(expected, rel=1e-12)


def test_peaks_at_the_end_of_warmup():
    rates = [inverse_sqrt_warmup(s, 512, 4000) for s in range(1, 20_000)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 4000
    assert rates[3999] == pytest.approx(512**-0.5 * 4000**-0.5)


def test_factor_scales_linearly():
    assert inverse_sqrt_warmup(123, 256, 1000, factor=2.0) == pytest.approx(
        2 * inverse_sqrt_warmup(123, 256, 1000)
    )
