"""Where the run's processes live: local processes (``local``) or a Ray cluster (``ray_*``)."""
