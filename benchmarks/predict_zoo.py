"""The models benchmarks/predict_validation.py validates the GPU step prediction on.

Each entry builds a torch model, its inputs and targets as numpy arrays (what a user's file
gives the harness), its loss and optimizer: the training step is the harness's own
(backends/torch/usermodel.py training_call: zero_grad, forward, loss, backward, step), in
float32 as written, the inputs copied from host memory on every call as a plain loop does.
Libraries' own constructors and configs where the issue asks for them (torchvision's
ResNet-18, MobileNetV3-small and VisionTransformer, transformers' GPT-2 and BERT from a
config: no download), the seed workloads' MLPs, the torch files of examples/models/, and a
GRU net. An entry whose library is not installed is skipped with the reason.

Batches: powers of 4 from 1 to 1024 for the small models, fewer for the large ones, so a
step stays well under ~50 ms on an H100/H200 and a CPU step stays under about a second on a
16-core host (the CPU run is measured too, on the same machine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"
ALL_BATCHES = (1, 4, 16, 64, 256, 1024)
Arrays = list[np.ndarray]


@dataclass(frozen=True)
class ZooModel:
    """One model of the zoo: how to build it, feed it and train it."""

    name: str
    source: str  # where its definition comes from (a library constructor, a file)
    build: Callable[[], nn.Module]
    inputs: Callable[[int, np.random.Generator], Arrays]
    targets: Callable[[int, np.random.Generator, Any], np.ndarray]
    batches: tuple[int, ...] = ALL_BATCHES
    loss: Callable[[Any, Any], Any] = nn.functional.mse_loss
    optimizer: Callable[[Any], torch.optim.Optimizer] = torch.optim.Adam
    notes: list[str] = field(default_factory=list)


def like_output(batch: int, rng: np.random.Generator, output: Any) -> np.ndarray:
    """Targets for a mean-squared-error loss: random values of the output's shape."""
    return rng.standard_normal(tuple(output.shape)).astype(np.float32)


def classes(count: int) -> Callable[[int, np.random.Generator, Any], np.ndarray]:
    def made(batch: int, rng: np.random.Generator, output: Any) -> np.ndarray:
        return rng.integers(0, count, size=tuple(output.shape[:-1])).astype(np.int64)
    return made


def token_loss(output: Any, target: Any) -> Any:
    """Cross entropy over every token (a language model's loss)."""
    return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def images(channels: int, side: int) -> Callable[[int, np.random.Generator], Arrays]:
    return lambda batch, rng: [rng.standard_normal((batch, channels, side, side),
                                                   dtype=np.float32)]


def sequences(steps: int, features: int) -> Callable[[int, np.random.Generator], Arrays]:
    return lambda batch, rng: [rng.standard_normal((batch, steps, features), dtype=np.float32)]


def tokens(vocabulary: int, length: int) -> Callable[[int, np.random.Generator], Arrays]:
    return lambda batch, rng: [rng.integers(0, vocabulary, size=(batch, length),
                                            dtype=np.int64)]


def seed_mlp(hidden: tuple[int, ...]) -> Callable[[], nn.Module]:
    """The seed's MNIST nets (workloads/mnist.py): Flatten-Dense(h)-ReLU-Dropout ... -Dense(10)."""
    def build() -> nn.Module:
        layers: list[nn.Module] = [nn.Flatten()]
        width = 784
        for units in hidden:
            layers += [nn.Linear(width, units), nn.ReLU(), nn.Dropout(0.2)]
            width = units
        return nn.Sequential(*layers, nn.Linear(width, 10))
    return build


class GruNet(nn.Module):
    """A GRU sequence classifier: 1 layer of 128 over 16 steps of 32 features."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(32, 128, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out[:, -1])


class Logits(nn.Module):
    """A transformers model's logits, so the harness's loss(output, target) applies."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).logits


def example(name: str) -> dict[str, Any]:
    """An examples/models file's model(), inputs() and its optional targets(), loss(),
    optimizer(), loaded the harness's way (workloads/usermodel/source.py)."""
    from harness.workloads.usermodel.source import load_user_module  # noqa: PLC0415

    path = str(EXAMPLES / f"{name}.py")
    user = load_user_module(path)
    found: dict[str, Any] = {"source": f"examples/models/{name}.py", "build": user.model,
                             "inputs": lambda batch, rng: [user.inputs(batch, rng)]}
    if callable(getattr(user, "targets", None)):
        found["targets"] = lambda batch, rng, output: np.asarray(user.targets(batch, rng))
    else:
        found["targets"] = like_output
    if callable(getattr(user, "loss", None)):
        found["loss"] = user.loss
    if callable(getattr(user, "optimizer", None)):
        found["optimizer"] = user.optimizer
    return found


def torchvision_models() -> list[ZooModel]:
    import torchvision  # noqa: PLC0415 - optional: the zoo skips it where it is missing

    models = torchvision.models
    return [
        ZooModel("resnet18", "torchvision.models.resnet18(num_classes=10), 64x64 images",
                 lambda: models.resnet18(num_classes=10), images(3, 64), classes(10),
                 batches=(1, 4, 16, 64), loss=nn.functional.cross_entropy),
        ZooModel("mobilenet_v3_small", "torchvision.models.mobilenet_v3_small(num_classes=10),"
                 " 64x64 images (depthwise-separable)",
                 lambda: models.mobilenet_v3_small(num_classes=10), images(3, 64), classes(10),
                 batches=(1, 4, 16, 64, 256), loss=nn.functional.cross_entropy),
        ZooModel("vit_tiny", "torchvision.models.VisionTransformer(32px, patch 4, 4 layers, "
                 "4 heads, 128 wide)",
                 lambda: models.VisionTransformer(image_size=32, patch_size=4, num_layers=4,
                                                  num_heads=4, hidden_dim=128, mlp_dim=512,
                                                  num_classes=10),
                 images(3, 32), classes(10), batches=(1, 4, 16, 64, 256),
                 loss=nn.functional.cross_entropy),
    ]


def transformers_models() -> list[ZooModel]:
    import transformers  # noqa: PLC0415 - optional: the zoo skips it where it is missing

    vocabulary, length = 1000, 64

    def gpt2() -> nn.Module:
        config = transformers.GPT2Config(vocab_size=vocabulary, n_positions=length, n_embd=128,
                                         n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
        return Logits(transformers.GPT2LMHeadModel(config))

    def bert() -> nn.Module:
        config = transformers.BertConfig(vocab_size=vocabulary, hidden_size=128,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=512, max_position_embeddings=length,
                                         num_labels=10)
        return Logits(transformers.BertForSequenceClassification(config))

    return [
        ZooModel("gpt2_tiny", "transformers.GPT2LMHeadModel(GPT2Config(2 layers, 128 wide, "
                 "4 heads, vocab 1000)), 64 tokens", gpt2, tokens(vocabulary, length),
                 classes(vocabulary), batches=(1, 4, 16, 64), loss=token_loss),
        ZooModel("bert_tiny", "transformers.BertForSequenceClassification(BertConfig(2 "
                 "layers, 128 wide, 4 heads)), 64 tokens", bert, tokens(vocabulary, length),
                 classes(10), batches=(1, 4, 16, 64), loss=nn.functional.cross_entropy),
    ]


def own_models() -> list[ZooModel]:
    """The seed workloads' nets, examples/models/'s torch files and a GRU net."""
    cross_entropy = nn.functional.cross_entropy
    flat = lambda batch, rng: [rng.random((batch, 784), dtype=np.float32)]  # noqa: E731
    return [
        ZooModel("mnist-small", "seed 3's MLP 784-128-10 (Adam, cross entropy)",
                 seed_mlp((128,)), flat, classes(10), loss=cross_entropy),
        ZooModel("mnist-wide", "seed 3's MLP 784-1000-1000-10 (Adam, cross entropy)",
                 seed_mlp((1000, 1000)), flat, classes(10), loss=cross_entropy),
        ZooModel("torch_classifier", **example("torch_classifier")),
        ZooModel("small_cnn", **example("small_cnn"), batches=(1, 4, 16, 64, 256)),
        ZooModel("lstm_tagger", **example("lstm_tagger"), batches=(1, 4, 16, 64, 256)),
        ZooModel("attention_block", **example("attention_block"), batches=(1, 4, 16, 64)),
        ZooModel("gru_net", "nn.GRU(32, 128) over 16 steps + a linear head", GruNet,
                 sequences(16, 32), classes(10), loss=cross_entropy,
                 batches=(1, 4, 16, 64, 256)),
    ]


LIBRARIES: dict[str, Callable[[], list[ZooModel]]] = {
    "torchvision": torchvision_models, "transformers": transformers_models}


# The order models are measured in: a run stopped by its budget keeps a mix of the seed
# workloads, the example files and the libraries' models, not all of one kind.
ORDER = ("mnist-small", "small_cnn", "resnet18", "gpt2_tiny", "mobilenet_v3_small",
         "lstm_tagger", "mnist-wide", "torch_classifier", "vit_tiny", "bert_tiny",
         "attention_block", "gru_net")


def zoo() -> tuple[list[ZooModel], list[str]]:
    """(every model that can be built here, in ORDER, why the others cannot)."""
    found, missing = own_models(), []
    for library, make in LIBRARIES.items():
        try:
            found += make()
        except Exception as why:  # noqa: BLE001 - ImportError, or a build that fails to load
            missing.append(f"{library}: cannot be used here ({type(why).__name__}: {why})")
    place = {name: index for index, name in enumerate(ORDER)}
    return sorted(found, key=lambda entry: place.get(entry.name, len(ORDER))), missing
