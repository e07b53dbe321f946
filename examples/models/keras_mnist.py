"""Seed 002's Keras MNIST model exactly as its author built and compiled it: Dropout, Adam,
sparse categorical cross-entropy on integer labels, the accuracy metric. Runs on every
installed Keras backend; one timed call is fit() of that compiled model over a block of
steps, as its author trains it (per step = call / steps)."""
import keras
import numpy as np


def model():
    model = keras.Sequential([
        keras.Input(shape=(28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def inputs(batch, rng):   # MNIST-shaped images, scaled to [0, 1) as the seed's x / 255
    return rng.random((batch, 28, 28), dtype=np.float32)


def targets(batch, rng):  # integer class labels, as MNIST's y_train
    return rng.integers(0, 10, size=batch)
