"""A small torch classifier: the two functions every file needs, and the optional ones."""
import numpy as np
import torch
from torch import nn


def model():  # required: returns a torch.nn.Module (a new one on each call)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))


def inputs(batch, rng):  # required: numpy arrays, first dimension = batch
    return rng.standard_normal((batch, 64), dtype=np.float32)


def targets(batch, rng):  # optional: what the loss compares the output with
    return rng.integers(0, 10, size=batch)


def loss(output, target):  # optional: one number (default: mean squared error)
    return nn.functional.cross_entropy(output, target)


def optimizer(parameters):  # optional: a torch.optim.Optimizer (default: Adam)
    return torch.optim.SGD(parameters, lr=0.1)
