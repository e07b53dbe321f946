"""The prediction's validation tooling (docs/predict.md, "Validating the model"): the rows
files of benchmarks/predict_validation.py, the GPU-to-GPU and foreign-CPU comparisons, the
host-overhead constant's fit and the shipped error table's derivation. The benchmarks' scripts
and the tests import it; the product (harness/) never does."""
