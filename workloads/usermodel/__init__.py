"""Your own model through the whole matrix: a file with a builder and an input maker.

    # mymodel.py
    def model(): ...            # a torch nn.Module or a keras.Model (or JAX: init(seed) + apply)
    def inputs(batch, rng): ... # numpy arrays, first dimension = batch
    def step(net, *inputs): ... # optional: what to time (default: one Adam training step)

The parent never imports the user's file: `plan.inspect_model` asks a child process what it is,
`plan.prepare_run` has another child make the shared weights, inputs and CPU references in the
run folder, and each cell runs the family's implementation module (torch_impl, keras_impl,
jax_impl) in its own worker, as for built-in workloads.
"""
