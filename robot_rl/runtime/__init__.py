"""Runtime: the training loop, evaluation, checkpoints and run-folder logging."""
