"""Learned rewards: a binary success classifier on camera frames, wrapped as the env's reward and termination."""
