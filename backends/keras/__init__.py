"""The Keras code the three keras-* backends share (keras_jax, keras_torch, keras_tensorflow)."""

# Keras' optional integrations, kept out of the warm processes' import (FrameworkSpec.preload's
# "!"): Keras imports scikit-learn for its wrappers wherever it is installed (0.93 s of Keras'
# 2.8 s import on the H100 host, 2026-11-27) and JAX for its Orbax checkpoint callback on
# every backend (0.63 s there); each import is guarded by `except ImportError`, and no step of
# the harness uses either. A user's model file may still import both: they are importable again
# once the preload is done.
WITHOUT_SKLEARN = ("!sklearn",)
WITHOUT_JAX = ("!jax",)
