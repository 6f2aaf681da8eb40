"""Calibration of the sim from robot logs (``robot-rl calibrate``): a bag of the arm driven by an excitation
(``robot-rl record-excitation``, or ``ros2 bag record`` of any commands) is replayed in the sim through the same
emulated controller, and the ways the robot differs from the sim (latencies, tracking bandwidth, joint friction,
gripper speed, joint noise) are fitted with CMA-ES; the fit is written as a reality profile, a calibrated and
randomized env config for training, and a report with plots."""
