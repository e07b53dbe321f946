"""The GPU step predicted from a foreign CPU's features (issue 61, part 1): the stored rows
recompute docs/predict.md's tables by source CPU, and the foreign rows file packs losslessly."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.predictlab import fitting, foreign, validation
from harness.predict.model import RECORDED_OP_DISPATCHES
from harness.predict.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
STORED_FOREIGN = DATA / "predict-foreign-vm-20261207.json.gz"


def recorded_row(process: int, host_s: float, ops: int = 2) -> dict:
    features = {"framework": "torch", "step_s": 1e-3, "pass_host_s": [host_s * ops],
                "ops": [{"op": "aten.add", "kind": "elementwise", "inputs": [[[4], "float32"]],
                         "outputs": [[[4], "float32"]], "flops": 0, "bytes": 32, "depth": 1,
                         "host_s": host_s} for _ in range(ops)]}
    return {"model": "m", "batch": 1, "process": process, "cpu_s": 1e-3,
            "cpu_samples_s": [1e-3], "other_cores": 0.1 * process, "steal_cores": 0.0,
            "seconds": 0.1, "features": features}


def test_packing_keeps_every_process_and_refuses_another_op_list(tmp_path: Path) -> None:
    document = {**foreign.empty_document(), "rows": [recorded_row(1, 5e-6),
                                                      recorded_row(2, 9e-6)]}
    packed = foreign.packed_document(document)
    assert len(packed["rows"]) == 1 and len(packed["rows"][0]["by_process"]) == 2
    path = tmp_path / "packed.json.gz"
    path.write_bytes(gzip.compress(json.dumps(packed).encode()))
    back = foreign.read_foreign(path)["rows"]
    assert [row["features"]["ops"][0]["host_s"] for row in back] == [5e-6, 9e-6]
    assert [foreign.features_of(row["features"]) for row in back] == [
        foreign.features_of(row["features"]) for row in document["rows"]]
    other = {**document, "rows": [recorded_row(1, 5e-6), recorded_row(2, 5e-6, ops=3)]}
    with pytest.raises(foreign.ForeignError, match="another op list"):
        foreign.packed_document(other)
    (tmp_path / "not.json").write_text("{}")
    with pytest.raises(foreign.ForeignError, match="not a foreign-features file"):
        foreign.read_foreign(tmp_path / "not.json")


def cell(predicted_s: float, gpu_s: float, cpu_s: float, low_s: float | None = None,
         high_s: float | None = None) -> foreign.SourcedCell:
    return foreign.SourcedCell(
        lending="x", gpu="NVIDIA H100 80GB HBM3", source=foreign.FOREIGN, process=1,
        model="resnet18", batch=1, gpu_s=gpu_s, gpu_noise=0.0, busy_share=0.1, cpu_s=cpu_s,
        cpu_noise=0.0, predicted_s=predicted_s, model_regime="launch-bound", low_s=low_s,
        high_s=high_s)


def test_group_figures_of_planted_cells() -> None:
    """|error| median and p90, the interval's coverage, and the verdict with ties left out."""
    cells = [cell(1.1, 1.0, 5.0, 0.9, 1.2),  # +10%, inside, GPU wins as predicted
             cell(0.5, 1.0, 5.0, 0.4, 0.7),  # -50%, outside
             cell(2.0, 1.0, 1.5, 1.5, 2.5),  # +100%, outside; predicted slower than the CPU
             cell(1.0, 1.0, 1.02)]  # a tie (2% apart), no band
    stats = foreign.GroupStats.of(cells)
    assert (stats.cells, stats.median, stats.p90) == (4, pytest.approx(0.3),
                                                      pytest.approx(0.85))
    assert (stats.covered, stats.with_interval) == (1, 3)
    assert (stats.right, stats.judged, stats.ties) == (2, 3, 1)
    assert stats.columns() == ["4", "30%", "85%", "1 of 3 (33%)", "2 of 3 (67%)"]
    assert replace(cells[0], busy_share=0.7).regime == "compute-bound"
    assert cells[0].family == "CNN" and foreign.family_of("gru_net") == "recurrent"


def docs_text() -> str:
    return (ROOT / "docs" / "predict.md").read_text()


def is_h100(path: Path) -> bool:
    return "-h100-" in path.name


@pytest.fixture(scope="module")
def h100_cells() -> list[foreign.SourcedCell]:
    """The stored H100 lendings' cells, predicted once for both tests below: all_cells is one
    lending after another, so the whole table's cells are these and the other lendings'."""
    return foreign.all_cells([path for path in foreign.stored_gpu_files(DATA) if is_h100(path)],
                             [STORED_FOREIGN])


def test_the_h100_lines_of_the_docs_tables_are_recomputed_from_the_rows(
        h100_cells: list[foreign.SourcedCell]) -> None:
    """docs/predict.md, "From a foreign CPU": the stored H100 GPU steps predicted again by the
    model as it is from the GPU host's features and from the 2-core VM's, three processes."""
    cells = h100_cells
    assert {cell.source for cell in cells} == {foreign.GPU_HOST, foreign.FOREIGN}
    lines = foreign.markdown([row for row in foreign.table_rows(cells) if row[1] == "H100"])
    text = docs_text()
    for line in lines[2:]:
        assert line in text, line


@pytest.mark.slow  # every stored GPU step from both sources: ~1-2 min on the 2-core VM
def test_the_whole_docs_table_is_recomputed_from_the_rows(
        h100_cells: list[foreign.SourcedCell]) -> None:
    others = [path for path in foreign.stored_gpu_files(DATA) if not is_h100(path)]
    assert others and len(others) < len(foreign.stored_gpu_files(DATA))
    cells = [*h100_cells, *foreign.all_cells(others, [STORED_FOREIGN])]
    text = docs_text()
    for line in foreign.markdown(foreign.table_rows(cells))[2:]:
        assert line in text, line


def test_the_recorded_op_constant_is_the_stored_rows_median() -> None:
    """model.RECORDED_OP_DISPATCHES: the GPU hosts' recorded tiny op in their profile's
    dispatches, the median over every stored lending's cells (not fitted to a GPU step):
    read from the eight lendings of 2026-11-27/28 with the profiles shipped then (the H100's
    of 2026-11-27 is kept beside the rows). docs/predict.md quotes it with the H100 profile
    of 2026-12-07 over the same cells, and with the 2026-12-08 rows added."""
    then = {**validation.profiles_named("h200"),
            "h100": load_profile(str(DATA / "profile-h100-20261127.json"))}
    now = validation.profiles_named("h200")
    ratios: dict[str, list[float]] = {"then": [], "now": [], "now, every lending": []}
    for path in foreign.stored_gpu_files(DATA):
        meta, rows = validation.read_rows(path)
        name = validation.shipped_name(validation.primary_profile(meta, rows), rows)
        fitted_from = "-202611" in path.name
        for row in rows:
            if row.get("status") != "ok" or not row.get("features_packed"):
                continue
            features = validation.unpacked(row["features_packed"])
            for key, profiles, counted in (("then", then, fitted_from),
                                           ("now", now, fitted_from),
                                           ("now, every lending", now, True)):
                ratio = fitting.recorded_op_ratio(features, profiles[name]) if counted else None
                if ratio is not None:
                    ratios[key].append(ratio)
    medians = {key: fitting.recorded_op_dispatches(found) for key, found in ratios.items()}
    assert [len(found) for found in ratios.values()] == [476, 476, 535]
    assert medians["then"] == pytest.approx(RECORDED_OP_DISPATCHES, abs=0.005)
    assert (medians["now"], medians["now, every lending"]) == (pytest.approx(2.24, abs=0.005),
                                                               pytest.approx(2.35, abs=0.005))


def test_the_demo_table_is_recomputed_from_its_stored_runs() -> None:
    """docs/predict.md's demo table: mnist-wide's torch step (batch 32) from the VM's runs,
    predicted per step on both profiles against the steps measured on the lent GPUs."""
    document = json.loads(gzip.decompress((DATA / "predict-demo-vm-20261207.json.gz")
                                          .read_bytes()))
    cells = foreign.demo_cells(document, validation.profiles_named("h200"))
    assert {cell.profile for cell in cells} == {"h100", "h200"}
    assert len(cells) == 2 * len(document["runs"])
    text = docs_text()
    for line in foreign.markdown([cell.row() for cell in cells], foreign.DEMO_HEADER)[2:]:
        assert line in text, line
