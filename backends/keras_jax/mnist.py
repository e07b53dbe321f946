"""Seed 3 in Keras 3: the shared Keras code (backends/keras/training.py), nothing of its own."""

from backends.keras.training import make_task

__all__ = ["make_task"]
