"""How actors and the learner exchange data: chunks of transitions (chunks.py) through a shared-memory ring per
actor and one weight board per run (shm/, ordered by the barriers of barrier.py), a write-ahead spool of chunks
on disk (spool.py), the names every process derives from the run folder (names.py), and the Ray bridge and
gateway that carry the same bytes between machines (ray_bridge.py, ray_gateway.py)."""
