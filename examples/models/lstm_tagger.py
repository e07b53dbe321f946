"""A small recurrent model in torch: a 2-layer LSTM over 32 steps of 64 features, then a linear
head on the last step (a sequence classifier). On a GPU nn.LSTM runs as one fused cuDNN op,
which torch's FLOP counter has no formula for: the harness counts it with its own."""
import numpy as np
import torch.nn as nn

STEPS, FEATURES, HIDDEN, CLASSES = 32, 64, 128, 10


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def model():
    return Tagger()


def inputs(batch, rng):
    return rng.standard_normal((batch, STEPS, FEATURES), dtype=np.float32)
