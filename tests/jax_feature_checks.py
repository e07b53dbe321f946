"""Checks run in a child process by tests/test_predict_jax.py: they import jax (or Keras on its
backend), which the test process never does.

Exact counts and the harness's own figures, never a speed: a timing is only held to be a
positive number of seconds.
"""

from __future__ import annotations

import itertools
import os

from harness.core import registry
from harness.core.registry import backend_module, implementation_module
from harness.core.settings import Settings
from harness.measure import blocks
from harness.predict.features import StepFeatures
from harness.predict.jaxfeatures import JaxFeatures, load_features
from harness.run.caserun import OutputStep, timed_pair
from harness.workloads import mnist

BATCH, IN, HIDDEN, OUT = 64, 512, 256, 10
TINY = {"epochs": 1, "train_samples": 512, "test_samples": 50, "blocks": 16}  # 16 steps


def mlp_step_checks() -> None:
    """A jitted MLP training step (two dense layers, Adam, dropout): one executable; its
    matmuls' FLOPs read from the HLO are the analytic 2*m*n*k count, cost_analysis()'s total
    agrees within 10% (it counts elementwise work too), the dropout's random bits (a loop on
    a CPU) are one kernel, not an unpriceable loop."""
    import jax
    import jax.numpy as jnp
    import optax

    from harness.backends.jax import features

    def loss(params: dict, x: jax.Array, y: jax.Array, key: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(jnp.dot(x, params["w1"], precision="highest") + params["b1"])
        hidden = jnp.where(jax.random.bernoulli(key, 0.8, hidden.shape), hidden / 0.8, 0.0)
        return jnp.mean((jnp.dot(hidden, params["w2"], precision="highest") - y) ** 2)

    optimizer = optax.adam(1e-3)

    def step(state: tuple, x: jax.Array, y: jax.Array) -> tuple:
        params, opt_state, key = state
        grads = jax.grad(loss)(params, x, y, key)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.random.fold_in(key, 1)

    params = {"w1": jnp.ones((IN, HIDDEN)) / IN, "b1": jnp.zeros(HIDDEN),
              "w2": jnp.ones((HIDDEN, OUT)) / HIDDEN}
    state = (params, optimizer.init(params), jax.random.PRNGKey(0))
    x, y = jnp.ones((BATCH, IN)), jnp.ones((BATCH, OUT))
    jitted = jax.jit(step, donate_argnums=0)
    found = features.program(jitted, (state, x, y))
    dispatch = features.null_dispatch_seconds(state, (x, y), jax.devices("cpu")[0])
    record = features.features("jax", found, dispatch_here_s=dispatch,
                               tiny_dispatch_here_s=features.tiny_dispatch_seconds(
                                   jax.devices("cpu")[0]),
                               loop_host_here_s=0.0, step_s=None, h2d=(0, "resident"))
    # forward x@w1, h@w2; backward dL/dw2 = h^T g, dL/dh = g w2^T, dL/dw1 = x^T g1
    analytic = 2 * BATCH * IN * HIDDEN * 2 + 2 * BATCH * HIDDEN * OUT * 3
    assert record.dispatches == 1
    assert record.matmul_flops == analytic, (record.matmul_flops, analytic)
    assert record.cost_flops is not None
    assert abs(record.cost_flops - analytic) <= 0.1 * analytic, (record.cost_flops, analytic)
    assert record.kernel_count > 0 and record.kernels_by_kind.get("matmul") == 5, \
        record.kernels_by_kind
    assert all(kernel.highest for kernel in record.kernels if kernel.kind == "matmul")
    assert record.loops == 0, record.entry_opcodes  # the random bits: a fused loop
    assert record.largest_matmul_flops == 2 * BATCH * IN * HIDDEN
    assert 0 < record.tiny_dispatch_here_s <= record.dispatch_here_s, record  # type: ignore[operator]
    reloaded = load_features(record.record())
    assert reloaded == record and reloaded.recomputed() == record


def cell_checks(framework: str) -> None:
    """The MNIST workload's cell of FRAMEWORK on the CPU: a whole call timed as a case would
    be, then its features pass, as casepasses.features_pass calls it."""
    os.environ.update(registry.load_framework(framework).environment)
    spec = registry.load_workload("mnist-small")
    device = backend_module(framework, "device").open_device("cpu")
    module = implementation_module(spec, framework)
    case = {**mnist.SMALL.defaults(quick=True), **TINY, "batch_size": 32}
    inputs = spec.inputs(case, "as-written", Settings.from_environment())
    task = module.make_task(case, "as-written", device, inputs)
    step, synchronize = timed_pair(task, device, registry.load_framework(framework).sync)
    call = blocks.CallStep(task, step, step.keep if isinstance(step, OutputStep) else None)
    call()
    synchronize()
    found = module.step_features(call, "as-written", inputs, 0.1)
    print(framework, {key: value for key, value in found["step_features"].items()
                      if key in ("outside_ops_s", "host_s_ops", "python_s", "step_s",
                                 "loop_host_here_s", "dispatch_here_s")})
    assert "step_features_reason" not in found, found
    record = load_features(found["step_features"])
    assert record.framework == framework, record.framework
    assert found["host_speed"]["python_loop_s"] > 0
    batch_bytes = 32 * (int(inputs["x_train"][0].nbytes) + int(inputs["y_train"][0].nbytes))
    if framework == "keras-torch":  # torch's ops through Keras' layers, a few steps
        assert isinstance(record, StepFeatures)
        steps = found["step_features_steps"]
        assert steps == 4 and record.kernel_ops > 0 and record.flops > 0, record.ops_by_kind
        assert record.step_s is not None and record.python_s is not None
        # Keras' Python between the ops, measured within the kept pass
        assert record.outside_ops_s is not None and record.outside_ops_s > 0, record
        assert record.h2d_bytes == steps * batch_bytes
    else:  # one jitted step per batch
        assert isinstance(record, JaxFeatures)
        assert found["step_features_steps"] == 1 and record.dispatches == 1
        assert record.kernels_by_kind.get("matmul", 0) >= 3 and record.loops == 0, record
        widths = (28 * 28, *inputs["hidden_units"], 10)
        forward = sum(2 * 32 * a * b for a, b in itertools.pairwise(widths))
        assert record.matmul_flops >= 2 * forward, (record.matmul_flops, forward)
        if framework == "jax":  # the placed arrays: JAX keeps 32-bit integer labels
            batch_bytes = 32 * (int(inputs["x_train"][0].nbytes) + 4)
        assert record.h2d_bytes == batch_bytes, (record.h2d_bytes, batch_bytes)
        for seconds in (record.dispatch_here_s, record.tiny_dispatch_here_s,
                        record.loop_host_here_s):
            assert seconds is not None and seconds >= 0, record
    call()  # the model still trains after its features were recorded
    synchronize()
