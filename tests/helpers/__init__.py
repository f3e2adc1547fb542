"""What several tests share: tiny checkpoints and runs, composed configs, DDP environments, and
the test-only callbacks that `python train.py` subprocesses load through PYTHONPATH=tests."""
