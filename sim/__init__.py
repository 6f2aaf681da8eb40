"""robot_rl_sim: MuJoCo tasks for robot_rl (arm: Reach, PickCube, PegInsert, PickColor; car: Drive) and batched sims.

Importing this package registers the gymnasium ids ``robot_rl/<Task>-v0``.
"""

from gymnasium.envs.registration import register, registry

_TASKS = {
    "robot_rl/Reach-v0": "robot_rl_sim.arm_tasks:ReachEnv",
    "robot_rl/PickCube-v0": "robot_rl_sim.arm_tasks:PickCubeEnv",
    "robot_rl/PegInsert-v0": "robot_rl_sim.arm_tasks:PegInsertEnv",
    "robot_rl/PickColor-v0": "robot_rl_sim.arm_tasks:PickColorEnv",
    "robot_rl/Drive-v0": "robot_rl_sim.car:DriveEnv",
}
for _id, _entry in _TASKS.items():
    if _id not in registry:
        # The task enforces its own time limit (TaskConfig.max_episode_steps), so no TimeLimit wrapper here.
        register(id=_id, entry_point=_entry, disable_env_checker=True)
