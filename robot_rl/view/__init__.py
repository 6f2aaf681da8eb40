"""The live operator view: what the person at the robot sees while recording demos (``robot-rl record-demos``),
correcting a learning policy (``robot-rl train`` with ``teleop.device``) or watching an evaluation
(``robot-rl eval``), streamed to rerun's viewer and saved per episode as a ``.rrd`` recording.

:class:`~robot_rl.view.live.OperatorView` is fed from the control loop and logs on a thread of its own, so the
loop's timing does not depend on it; rerun-sdk is an optional extra (``pip install -e '.[view]'``), imported only
when a view is made. :func:`~robot_rl.view.recording.read_recording` reads a saved recording back with rerun's own
reader.
"""
