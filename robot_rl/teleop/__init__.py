"""Teleoperation devices behind one interface (read() -> action, buttons, active) and the scripted human."""
