"""The seed's Keras MNIST MLP: one builder, run on every installed Keras backend."""
import keras
import numpy as np


def model():
    return keras.Sequential([keras.Input(shape=(28, 28)), keras.layers.Flatten(),
                             keras.layers.Dense(128, activation="relu"),
                             keras.layers.Dense(10, activation="softmax")])


def inputs(batch, rng):
    return rng.random((batch, 28, 28), dtype=np.float32)
