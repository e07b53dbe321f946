"""Issue 40: a cell is one frozen, hashable key; its parameters read as a dict but never change."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace

import pytest

from harness.run.executors.slurm import cell_id
from harness.run.rounds import RoundMerger
from harness.spec import Cell, CellKey, FrozenParams


def _cell(**params: object) -> Cell:
    return Cell("mnist-small", "as-written", "torch", "cuda:0",
                params or {"batch_size": [32, 64], "data": {"path": ""}})


def test_equal_cells_hash_equal_and_key_dicts_and_sets() -> None:
    first, second = _cell(), _cell()
    assert first == second and hash(first) == hash(second)
    assert {first: 1}[second] == 1 and len({first, second}) == 1
    assert _cell(batch_size=[32]) != first


def test_params_read_as_a_dict_and_refuse_to_change() -> None:
    cell = _cell()
    assert isinstance(cell.params, FrozenParams) and dict(cell.params)["batch_size"] == [32, 64]
    assert json.loads(json.dumps(cell.params)) == {"batch_size": [32, 64], "data": {"path": ""}}
    with pytest.raises(TypeError):
        cell.params["batch_size"] = [1]  # type: ignore[index]
    with pytest.raises(TypeError):
        cell.params.update(x=1)
    changed = replace(cell, params={**cell.params, "batch_size": [8]})
    assert isinstance(changed.params, FrozenParams) and changed.params["batch_size"] == [8]


def test_a_cell_survives_pickling_as_workers_and_slurm_tasks_need() -> None:
    cell = _cell()
    assert pickle.loads(pickle.dumps(cell)) == cell


def test_one_key_across_rounds_for_the_merger_and_slurm_file_names() -> None:
    cell = _cell()
    rounds = [replace(cell, rounds=3, round=index) for index in range(3)]
    assert {item.key for item in rounds} == {CellKey("mnist-small", "as-written", "torch",
                                                     "cuda:0")}
    assert cell_id(rounds[1]) == "as-written-torch-cuda0-round1"
    assert str(cell.key) == cell.label == "mnist-small/as-written torch on cuda:0"
    merger = RoundMerger.of(None, [cell], 3)  # type: ignore[arg-type]
    assert list(merger.planned) == [cell.key]
