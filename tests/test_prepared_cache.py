"""A model file's shared weights and CPU references are made once per machine and reused by a
repeat run (workloads/usermodel/preparedcache.py): on the H200 host making them again was ~20 s
of a GPT-2-style file's 32 s repeat run. No framework is imported here: the preparing child is
replaced by a fake that writes a folder and counts its calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.settings import Settings
from harness.workloads.usermodel import plan, preparedcache

MODEL = "import torch.nn as nn\n\ndef model():\n    return nn.Linear(4, 2)\n"


class FakeChildren(list[list[str]]):
    """The run's children as prepare_run sees them (plan.Children): the settings, and a
    preparing child that writes a folder whose weights are its count; it keeps each child's
    argument list."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def run_json_child(self, module: str, args: list[str], cell: object, timeout_s: float,
                       user_file: object = None) -> tuple[dict, str]:
        self.append(list(args))
        folder = Path(args[1])
        folder.mkdir(parents=True)
        (folder / "weights.npz").write_text(f"weights of child {len(self)}")
        failed = "fail" in Path(args[0]).read_text()
        (folder / "prepared.json").write_text(json.dumps(
            {"sizes": {"8": {"error": "the step raised"} if failed else {"bound": 1e-6}}}))
        return {"ok": True}, ""


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeChildren:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    return FakeChildren(Settings.from_environment())  # read after the cache folder is set


class TorchModelSpec:
    """What prepare_run reads of a model's spec: its swept parameter and its frameworks."""

    sweep = "batch"
    frameworks = ("torch",)


def prepare(model: Path, run_dir: Path, children: FakeChildren, seed: int = 0) -> Path:
    params = {"model": str(model), "what": "train", "seed": seed, "batch": [8]}
    prepared = plan.prepare_run(run_dir, TorchModelSpec(), params, 60.0,  # type: ignore[arg-type]
                                children)
    return Path(str(prepared[plan.PREPARED_PARAM]))


def test_a_repeat_run_reuses_the_folder_and_says_so(children: FakeChildren,
                                                    tmp_path: Path) -> None:
    model = tmp_path / "models" / "net.py"
    model.parent.mkdir()
    model.write_text(MODEL)
    first = prepare(model, tmp_path / "run1", children)
    second = prepare(model, tmp_path / "run2", children)
    assert len(children) == 1  # the second run started no preparing child
    assert (second / "weights.npz").read_text() == "weights of child 1"
    note = json.loads((second / "prepared.json").read_text())["reused"]
    assert note.startswith("made by an earlier run at ") and "same file, sizes, seed" in note
    # The note is the second run's alone: the first run's folder and the kept copy say nothing.
    assert "reused" not in json.loads((first / "prepared.json").read_text())
    (kept,) = (tmp_path / "cache" / "prepared").iterdir()
    assert "reused" not in json.loads((kept / "prepared.json").read_text())


@pytest.mark.parametrize("change", ["file", "helper beside it", "seed"])
def test_anything_that_decides_the_folder_makes_a_new_one(children: FakeChildren,
                                                          tmp_path: Path,
                                                          change: str) -> None:
    model = tmp_path / "models" / "net.py"
    model.parent.mkdir()
    model.write_text(MODEL)
    prepare(model, tmp_path / "run1", children)
    if change == "file":
        model.write_text(MODEL.replace("(4, 2)", "(4, 3)"))
    elif change == "helper beside it":
        (model.parent / "layers.py").write_text("WIDTH = 4\n")
    again = prepare(model, tmp_path / "run2", children, seed=1 if change == "seed" else 0)
    assert len(children) == 2
    assert "reused" not in json.loads((again / "prepared.json").read_text())


def test_a_failed_preparation_is_never_kept(children: FakeChildren, tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text(MODEL + "# fail\n")
    prepare(model, tmp_path / "run1", children)
    prepare(model, tmp_path / "run2", children)
    assert len(children) == 2


def test_only_the_newest_entries_are_kept(children: FakeChildren, tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    for seed in range(preparedcache.KEEP_ENTRIES + 2):
        model.write_text(MODEL)
        prepare(model, tmp_path / f"run{seed}", children, seed=seed)
    assert len(list((tmp_path / "cache" / "prepared").iterdir())) == preparedcache.KEEP_ENTRIES
