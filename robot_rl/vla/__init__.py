"""The small vision-language-action model trained here (``robot-rl train-bc``): a deliberately small,
CPU-trainable generalist for the sim tasks, and the base policy that RL fine-tuning starts from."""
