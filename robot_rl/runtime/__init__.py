"""Runtime: the processes of a training run (actor, learner, supervisor, transport), checkpoints and the training env;
the run's config, seeds, evaluation and run-folder log are in :mod:`robot_rl.training`."""
