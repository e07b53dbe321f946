"""A small transformer encoder block in torch: multi-head self-attention (4 heads over 128
features, 64 tokens) and a feed-forward layer, mean-pooled into a linear head. Attention runs
as scaled_dot_product_attention, whose CPU kernel torch's FLOP counter has no formula for."""
import numpy as np
import torch.nn as nn

TOKENS, WIDTH, HEADS, CLASSES = 64, 128, 4, 10


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=4 * WIDTH,
                                                  dropout=0.0, batch_first=True)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def model():
    return Block()


def inputs(batch, rng):
    return rng.standard_normal((batch, TOKENS, WIDTH), dtype=np.float32)
