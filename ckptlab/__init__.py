"""Shared code for the sharded-checkpointing course: device set-up, layout math, figures, models.

Importing this package does not import JAX: call :func:`setup_devices` first, before anything
else touches JAX, so that the 16 simulated CPU devices can still be created.
"""

from ckptlab.devices import NUM_DEVICES, DeviceSetupError, setup_devices

__all__ = ["NUM_DEVICES", "DeviceSetupError", "setup_devices"]
