"""A line of the verdict `harness compare` prints, with what it answers as a typed topic.

Why typed: the lines are assembled in steps (the report's views, then the predicted GPU
lines under the GPU-vs-CPU answer, the prediction's check under the measured one, the
warnings apart), and each step finds the lines it acts on by their topic, never by matching
words in their text (a reworded sentence must not move or drop a line). Made by
harness.report.summary.terminal_verdicts; read by harness/commands (epilogue, predicted).
Light: the CLI imports it without the report.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Topic(enum.Enum):
    """What a verdict line answers."""

    HEADING = "heading"  # the experiment (and machine) the lines under it are about
    ANSWER = "answer"  # a view's verdict, or a line that says why there is none
    GPU_VS_CPU = "GPU vs CPU"  # the crossover view's, on a machine where a GPU cell measured
    NO_GPU = "no GPU"  # the crossover view's, on a machine where no GPU cell measured
    WARNING = "warning"  # a bullet of the warnings view: printed with the warnings
    MEMORY = "memory"  # a memory fit


@dataclass(frozen=True)
class VerdictLine:
    text: str
    topic: Topic = Topic.ANSWER

    def retold(self, text: str) -> VerdictLine:
        """The same line, its text TEXT (shortened or indented for the terminal)."""
        return replace(self, text=text)

    @property
    def gpu_vs_cpu(self) -> bool:
        """The crossover view's line, whether a GPU cell measured or not."""
        return self.topic in (Topic.GPU_VS_CPU, Topic.NO_GPU)
