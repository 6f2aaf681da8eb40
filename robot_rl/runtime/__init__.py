"""Runtime: the processes of a training run (actor, learner, supervisor, transport), checkpoints, the training env
and run-folder logging; the run's config, seeds and evaluation are in :mod:`robot_rl.training`."""
