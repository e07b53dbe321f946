"""A small tanh MLP as a JAX init/apply pair."""
import jax
import jax.numpy as jnp
import numpy as np


def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return {"w1": jax.random.normal(k1, (8, 32)) / 3, "b1": jnp.zeros(32),
            "w2": jax.random.normal(k2, (32, 4)) / 6, "b2": jnp.zeros(4)}


def apply(params, x):
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def inputs(batch, rng):
    return rng.standard_normal((batch, 8), dtype=np.float32)
