"""One variant vocabulary: every workload's variants, what each framework runs and which need a
GPU come from one typed catalogue (harness.core.fixes.Catalogue), and so do the GPU step
prediction's variants. A scan fails on a workload or prediction module that spells a variant
list of its own again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.core import registry
from harness.core.fixes import Catalogue, fix, one_each, variant
from harness.predict import kernels
from harness.workloads import matmul, mnist, transfer
from harness.workloads.usermodel import spec as usermodel

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "workloads", ROOT / "harness" / "predict"]
# WorkloadSpec keywords that hold variant names or what a framework runs of them.
VARIANT_KEYWORDS = frozenset({"variants", "device_only_variants", "default_variants",
                              "capabilities"})


def spelled_out(node: ast.expr | None) -> bool:
    """A literal display that names something by a string: ("fp32", "tf32"), {"torch": ...}."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(item, ast.Constant) and isinstance(item.value, str)
                   for item in node.elts)
    return isinstance(node, ast.Dict) and any(
        isinstance(key, ast.Constant) and isinstance(key.value, str) for key in node.keys)


def called_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""


def own_variant_lists(source: str) -> list[str]:
    """Where a module declares variants outside a catalogue: a VARIANT-named name bound to a
    literal list of names, a hand-written Capability, a spec given literal variants."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"line {node.lineno}: {target.id} = a literal list" for target in targets
                      if isinstance(target, ast.Name) and "VARIANT" in target.id.upper()
                      and spelled_out(node.value)]
        elif isinstance(node, ast.Call):
            if called_name(node) == "Capability":
                found.append(f"line {node.lineno}: Capability(...) written by hand")
            found += [f"line {node.lineno}: {keyword.arg}= a literal" for keyword in node.keywords
                      if keyword.arg in VARIANT_KEYWORDS and spelled_out(keyword.value)]
    return found


def test_no_workload_or_prediction_module_spells_its_own_variant_list() -> None:
    offenders = {str(path.relative_to(ROOT)): found
                 for folder in SCANNED for path in sorted(folder.rglob("*.py"))
                 if (found := own_variant_lists(path.read_text()))}
    assert not offenders, f"declare variants in the module's Catalogue instead: {offenders}"


@pytest.mark.parametrize("planted", [
    'VARIANTS = ("as-written", "compiled")\n',
    'TORCH_ONLY_VARIANTS: tuple[str, ...] = ("cuda-graph",)\n',
    'CAPABILITIES = {"numpy": Capability(variants=("fp32",))}\n',
    'SPEC = WorkloadSpec(name="w", variants=("a", "b"))\n',
    'SPEC = WorkloadSpec(name="w", variants=CATALOGUE.variants, capabilities={"torch": C})\n',
])
def test_the_scan_sees_a_hand_written_list(planted: str) -> None:
    assert own_variant_lists(planted)


def test_the_scan_lets_derived_lists_pass() -> None:
    derived = ('VARIANTS = CATALOGUE.variants\n'
               'ONLY_VARIANTS = tuple(n for n in CATALOGUE.variants if n.startswith("m"))\n'
               'SPEC = WorkloadSpec(name="w", variants=CATALOGUE.variants,\n'
               '                    capabilities=CATALOGUE.capabilities())\n')
    assert own_variant_lists(derived) == []


def test_a_built_in_catalogue_gives_the_variants_refusals_and_device_only_ones() -> None:
    catalogue = Catalogue((variant("fast", "torch", refused={"numpy": "no fast numpy"}),
                           variant("graph", "torch", gpu_only=True,
                                   refused={"numpy": "no graphs"})),
                          one_each(("torch", "numpy")), baseline="plain")
    assert catalogue.variants == ("plain", "fast", "graph")
    assert catalogue.device_only == ("graph",)
    numpy = catalogue.capability("numpy")
    assert numpy.refusal("fast", "cpu") == "no fast numpy"
    assert numpy.refusal("plain", "cpu") is None
    assert catalogue.capability("torch").refusal("graph", "gpu") is None


def test_the_built_in_workloads_read_their_catalogues() -> None:
    for module, spec in ((matmul, matmul.SPEC), (transfer, transfer.SPEC),
                         (mnist, mnist.SMALL), (mnist, mnist.WIDE)):
        assert spec.variants == module.CATALOGUE.variants, spec.name
        assert spec.device_only_variants == module.CATALOGUE.device_only, spec.name
    small = mnist.SMALL
    assert small.refusal("steps-per-execution", "keras-torch", "cpu") == mnist.ONE_STEP_PER_CALL
    assert small.refusal("cuda-graph", "torch", "cpu") == "variant cuda-graph needs a GPU device"
    assert small.refusal("adam-fused", "keras-jax", "cuda:0") == mnist.KERAS_REFUSES
    assert mnist.KERAS_ONLY_VARIANTS == ("steps-per-execution", "compiled-steps")
    assert transfer.SPEC.refusal("h2d-pinned", "tensorflow", "cuda:0") == \
        "tensorflow exposes no pinned host buffers"
    assert transfer.SPEC.refusal("h2d-pinned", "jax", "cuda:0") is None


def test_the_prediction_models_the_catalogue_entries_that_say_so() -> None:
    predicted = kernels.predicted_variants()
    assert set(predicted) == {"as-written", "cuda-graph", "compiled", "resident", "pinned",
                              "bf16", "fp16"}
    # pinned is modelled only: no model-file cell runs it, and advise never offers it.
    model = usermodel.spec_for_name("model-net", {"family": "torch"})
    assert "pinned" not in model.variants
    assert "pinned" not in usermodel.fixes_for("torch", "cuda:0")
    assert kernels.Variant.parse("resident+pinned").pinned
    with pytest.raises(ValueError, match="unknown variant 'tf32'"):
        kernels.Variant.parse("tf32")  # a variant cells run, which the plan does not model


def test_a_plugin_fix_marked_predicted_reaches_the_prediction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    graphs = fix("graphs", "torch", "gpu", {"launch-bound"}, "replayed", "captured",
                 predicted=True)
    assert "graphs" not in kernels.predicted_variants()
    monkeypatch.setattr(registry, "PLUGIN_FIXES", [graphs])
    assert "graphs" in kernels.predicted_variants()
    assert kernels.Variant.parse("graphs").name == "graphs"
