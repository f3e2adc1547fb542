"""experiments/speed/tables.py: ours against the fastest reference, each round on its own."""

from experiments.speed import tables

TRAINING = "training bf16, target tokens/s"


def summary(speeds: dict) -> list[list]:
    made = tables.Tables()
    tables.summarize(speeds, made)
    return made.rows["summary"]


def test_a_machine_that_slows_between_rounds_leaves_the_ratio_alone():
    # Round 2 runs at half the pace of round 1 for everyone: each round's ratio is 1.25.
    speeds = {
        ("small", "ours", TRAINING): [100.0, 50.0],
        ("small", "torch", TRAINING): [80.0, 40.0],
    }
    [row] = summary(speeds)
    assert row[2:] == ["ours", "75.00", "torch", "60.00", "1.25x (1.25-1.25x over 2 rounds)"]


def test_each_round_is_compared_with_its_own_fastest_reference():
    speeds = {
        ("base", "ours", TRAINING): [120.0, 120.0, 90.0],
        ("base", "torch", TRAINING): [100.0, 60.0, 60.0],
        ("base", "marian", TRAINING): [60.0, 80.0, 90.0],
    }
    [row] = summary(speeds)
    # Rounds' ratios 1.2, 1.5, 1.0; the fastest by median speed is marian (80 against 60).
    assert row[2:] == ["ours", "120.00", "marian", "80.00", "1.20x (1.00-1.50x over 3 rounds)"]


def test_one_round_gives_the_plain_ratio_and_sizes_and_measures_stay_apart():
    speeds = {
        ("small", "ours", TRAINING): [90.0],
        ("small", "torch", TRAINING): [60.0],
        ("base", "ours", TRAINING): [10.0],
        ("base", "torch", TRAINING): [20.0],
        ("small", "ours", "greedy, sentences/s"): [5.0],
    }
    rows = summary(speeds)
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("small", TRAINING, "1.50x"),
        ("base", TRAINING, "0.50x"),
    ]
