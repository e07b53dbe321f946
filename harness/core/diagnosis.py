"""What bounds a cell's step: the diagnosis kinds, one vocabulary for every module that says
or decides one.

The device-busy split names a GPU cell's kind (harness/measure/devicetime.py `diagnose`), a CPU
cell is host-bound as a whole (harness/analysis/advicecase.py), the fix catalogue says under
which kinds each fix helps (workloads/usermodel/fixes.py), `harness advise` ranks fixes by them
(harness/analysis/fixchoice.py) and the GPU step prediction names its regime with two of them
(harness/predict/model.py). A str-valued Enum: a member is its string, so run.json, the advice
record and the shipped error table hold the same words as before, and a kind read back from a
file compares equal to its member. tests/test_diagnosis_kinds.py fails on a kind spelled as a
literal anywhere else.
"""

from __future__ import annotations

from enum import Enum


class DiagnosisKind(str, Enum):
    """One diagnosis kind; its value is the word printed and stored."""

    LAUNCH = "launch-bound"  # the host's launch, dispatch and Python take most of the wall
    TRANSFER = "transfer-bound"  # host<->device copies take most of the device-busy time
    COPY = "copy-bound"  # the catalogue's name for TRANSFER (a fix aimed at the copies)
    COMPUTE = "compute-bound"  # busy near the FLOP ceiling
    MEMORY = "memory-bound"  # busy near the memory bandwidth
    DEVICE = "device-bound"  # busy, below both ceilings
    HOST = "host-bound"  # a CPU cell: the CPU side does all the work
    UNPROFILED = "not profiled"  # a GPU cell without a device-busy pass: no kind to tell

    def __str__(self) -> str:
        return self.value


# The kinds under which a fix may help (every kind but the absence of one).
BOUND_KINDS = frozenset(kind for kind in DiagnosisKind if kind is not DiagnosisKind.UNPROFILED)
