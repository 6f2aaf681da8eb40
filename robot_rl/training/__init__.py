"""What a training run is and how its policies are measured: the run's config (:mod:`.config`: ``TrainConfig``,
``RuntimeConfig``), its seeds (:mod:`.seeds`), evaluation (:mod:`.evaluation`), its statistics (:mod:`.stats`) and
the run folder's log and learning curve (:mod:`.run_logger`).
The processes that carry a run out (actor, learner, supervisor, transport) are in :mod:`robot_rl.runtime`."""
