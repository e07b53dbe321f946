"""Example harness plugin: a row-wise softmax workload (see README.md)."""
