"""The seed's Keras MNIST model, shared by every framework that runs Keras code.

Not a framework of its own: keras-jax, keras-torch, keras-tensorflow and tensorflow (its MNIST
cells run backends/keras/training.py, its data-parallel cell backends/tensorflow/mnist_ddp.py)
build the very same model from here, so they differ only in Keras' backend (KERAS_BACKEND, set
per cell by the runner) and in placement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import keras
import numpy as np

if TYPE_CHECKING:
    from harness.workloads.mnist import DigitsInputs

CLASSES = 10
EVAL_BATCH = 1000  # test images per forward pass when measuring accuracy


def test_accuracy(model: keras.Sequential, inputs: DigitsInputs) -> float:
    """Share of test digits classified right; call it inside the cell's device placement."""
    x_test, y_test = inputs["x_test"], inputs["y_test"]
    forward = jax_forward(model) if keras.backend.backend() == "jax" else \
        (lambda images: model(images, training=False))
    correct = 0
    for start in range(0, len(y_test), EVAL_BATCH):
        probabilities = forward(x_test[start:start + EVAL_BATCH])
        predicted = np.argmax(keras.ops.convert_to_numpy(probabilities), axis=1)
        correct += int(np.sum(predicted == y_test[start:start + EVAL_BATCH]))
    return correct / len(y_test)


def jax_forward(model: keras.Sequential) -> Any:
    """Keras on JAX: the model's inference as one program compiled without GEMM autotuning.

    Why: eagerly, each layer's matmul is a program of its own that XLA compiles and, on a GPU,
    autotunes: 11.2 s of a keras-jax cuda:0 MNIST cell's first round on an H100, for a check
    that is never timed (the default kernels give the same argmax to within float32 rounding,
    and the check compares accuracy, not bits). The same layers, through Keras' own
    stateless_call."""
    import jax  # keras-jax only: the other backends never reach here

    program = jax.jit(lambda trainable, non_trainable, images: model.stateless_call(
        trainable, non_trainable, images, training=False)[0],
        compiler_options={"xla_gpu_autotune_level": 0})
    trainable = [variable.value for variable in model.trainable_variables]
    non_trainable = [variable.value for variable in model.non_trainable_variables]
    return lambda images: program(trainable, non_trainable, images)


def epoch_extra(model: keras.Sequential, inputs: DigitsInputs, batch_size: int,
                epochs_run: int, train_loss: float, accuracy: float) -> dict[str, object]:
    """The extras every Keras MNIST cell reports (parameters, accuracy, steps per epoch...)."""
    return {
        "params": int(model.count_params()),
        "accuracy": accuracy,
        "train_loss": float(train_loss),
        "steps_per_call": -(-len(inputs["y_train"]) // batch_size),
        "samples_distinct": inputs["samples_distinct"],
        "data_source": inputs["data_source"],
        "epochs_run": epochs_run,
    }


class HostGlorotUniform(keras.initializers.Initializer):
    """Keras' Glorot-uniform, drawn on the host (numpy) from SEED.

    Why: Keras draws an initializer's numbers with the backend's random ops; on JAX each draw
    is a program compiled in every new process (most of a keras-jax MNIST worker's 1.2-2.6 s
    of model building in its first round, H100 host and 2-core VM). The same distribution from
    numpy costs no compile, and every Keras backend starts from the same weights.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, shape: Any, dtype: Any = None) -> Any:
        fan_in, fan_out = int(shape[0]), int(shape[-1])
        limit = float(np.sqrt(6.0 / (fan_in + fan_out)))
        values = np.random.default_rng(self.seed).uniform(-limit, limit, tuple(shape))
        return keras.ops.convert_to_tensor(values.astype(dtype or "float32"))

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}


class HostZeros(keras.initializers.Initializer):
    """Zeros made on the host (Keras' own is a compiled program per shape on JAX)."""

    def __call__(self, shape: Any, dtype: Any = None) -> Any:
        return keras.ops.convert_to_tensor(np.zeros(tuple(shape), dtype or "float32"))


def build_model(hidden_units: tuple[int, ...], dropout: float,
                seed: int | None = None) -> keras.Sequential:
    """The seed's Sequential: Flatten(28, 28) -> (Dense relu, Dropout)... -> Dense(10, softmax).

    With `seed`, every initializer and dropout layer gets its own seed, so the model is
    reproducible without keras.utils.set_random_seed, which imports TensorFlow whenever it is
    installed (and TensorFlow must stay out of a keras-jax or keras-torch process).
    """
    seeds = iter(range(seed, seed + 2 * len(hidden_units) + 1)) if seed is not None else None

    def dense(units: int, activation: str) -> keras.layers.Dense:
        if seeds is None:
            return keras.layers.Dense(units, activation=activation)
        return keras.layers.Dense(units, activation=activation,
                                  kernel_initializer=HostGlorotUniform(next(seeds)),
                                  bias_initializer=HostZeros())

    layers: list[Any] = [keras.Input(shape=(28, 28)), keras.layers.Flatten()]
    for units in hidden_units:
        layers += [dense(units, "relu"),
                   keras.layers.Dropout(dropout, seed=None if seeds is None else next(seeds))]
    layers.append(dense(CLASSES, "softmax"))
    return keras.Sequential(layers)


def require_backend(expected: str) -> None:
    """Refuse to run when Keras came up on another backend than this framework's.

    Why: Keras reads KERAS_BACKEND once, at import; a cell labelled keras-jax that silently ran
    on torch would put a torch time in the jax row.
    """
    found = keras.backend.backend()
    if found != expected:
        raise RuntimeError(f"Keras runs on {found!r}, this framework needs {expected!r}: "
                           f"set KERAS_BACKEND={expected} before Keras is imported")
