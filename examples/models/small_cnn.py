"""A small CNN in torch for 32x32 RGB images (CIFAR-sized)."""
import numpy as np
import torch.nn as nn


def model():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def inputs(batch, rng):
    return rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
