"""torchvision's ResNet-18 as a user trains it: ImageNet-sized images, 1000 classes, SGD.

Needs torchvision installed beside torch.
On a GPU, `harness advise` tries bf16 and fp16 on it: deep, BatchNorm, convolutions only.
"""
import numpy as np
import torch
from torch import nn


def model():
    import torchvision

    return torchvision.models.resnet18()


def inputs(batch, rng):
    return rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)


def targets(batch, rng):
    return rng.integers(0, 1000, size=batch)


def loss(output, target):
    return nn.functional.cross_entropy(output, target)


def optimizer(parameters):
    return torch.optim.SGD(parameters, lr=0.1, momentum=0.9)
