"""One pool of warm processes per pytest process, lent to every run a test makes (issue 50).

Why: a run opens its own warm processes (harness.run.forkserver), one per framework and
environment, each importing its framework once; in the suite every harness.api call, CliRunner
invocation and RunSession is a run of its own, so every test paid those imports again (torch
~3 s, Keras on torch ~5-10 s, TensorFlow ~12 s on the 2-core VM, side by side with the other
pytest process). Here each run gets a PooledRun: the ForkServers a run expects, whose warm
processes are leased from the session's WarmProcessPool and handed back, still warm, when the
run closes its set. What the run records stays its own: a warm process it found warm cost it
no wait and is not among the ones it started (run.json's `warm_processes`).

A warm process only imports and forks (forkserver's docstring), so a worker forked from one that
has served earlier tests starts as from a new one. It goes back to the pool only when it is still
running and owes no answer (every worker it forked was reaped and read); one that ended, refused
a fork, or was dropped by its run is closed, and the next run starts a new one. The pool keeps
the most recently used few, closing the least recently used first.
"""

from __future__ import annotations

import contextlib
import select
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.run.forkserver import ForkedWorker, ForkServer, ForkServers, ServerKey, server_key

# pytest names the running test in this variable, and a test of the terminal's layout sets
# the width the command prints at: cells that differ only by them share a warm process (each
# forked worker still gets its own environment, these variables included; no framework reads
# them at import).
PER_TEST_VARIABLES = ("PYTEST_CURRENT_TEST", "COLUMNS")
# Idle warm processes kept per pytest process. Measured on the 2-core VM (VmRSS): the suite's
# fake framework 16 MB, jax 160 MB, torch 300 MB, Keras on JAX 310 MB, Keras on torch 430 MB,
# Keras on TensorFlow 600 MB, TensorFlow 770 MB: every framework at once is ~2.6 GB.
MOST_IDLE = 8
MOST_IDLE_BYTES = 3 << 30
# (framework, preload, working directory, environment but the late and per-test variables)
PoolKey = tuple[str, tuple[str, ...], str, tuple[tuple[str, str], ...]]


def shared_key(framework: str, env: dict[str, str]) -> ServerKey:
    """server_key without the per-test variables."""
    return server_key(framework, {name: value for name, value in env.items()
                                  if name not in PER_TEST_VARIABLES})


class PooledForkServer(ForkServer):
    """A warm process that keeps the workers it forked, so the pool can tell whether it still
    owes an answer (a run that ended while a worker ran never read that worker's exit line)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._unanswered: list[ForkedWorker] = []
        super().__init__(*args, **kwargs)

    def fork(self, module: str, args: list[str], env: dict[str, str], cwd: Path,
             stderr_path: Path) -> ForkedWorker:
        worker = super().fork(module, args, env, cwd, stderr_path)
        self._unanswered = [old for old in self._unanswered if old.returncode is None]
        self._unanswered.append(worker)
        return worker

    @property
    def pid(self) -> int:
        return self._process.pid

    def reusable(self) -> bool:
        """Ready, running, and with nothing owed or unread: the next request's answer is the
        next line it writes."""
        if not self._answered or self.refused or self._process.poll() is not None:
            return False
        if any(worker.returncode is None for worker in self._unanswered):
            return False
        assert self._process.stdout is not None
        unread, _, _ = select.select([self._process.stdout.fileno()], [], [], 0)
        return not unread


def resident_bytes(pid: int) -> int:
    """PID's resident memory (VmRSS); 0 when it cannot be read (it ended)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class WarmProcessPool:
    """The pytest process's idle warm processes, each leased to one run at a time."""

    def __init__(self, scratch: Path, most_idle: int = MOST_IDLE,
                 most_idle_bytes: int = MOST_IDLE_BYTES) -> None:
        self.scratch = scratch
        self.most_idle = most_idle
        self.most_idle_bytes = most_idle_bytes
        self.started = 0  # warm processes started, for the suite's own tests
        self._idle: OrderedDict[PoolKey, PooledForkServer] = OrderedDict()

    def idle_pids(self) -> list[int]:
        """The idle warm processes' pids, least recently used first."""
        return [server.pid for server in self._idle.values()]

    def lease(self, key: PoolKey, env: dict[str, str], wait: bool) -> tuple[ForkServer, bool]:
        """(a warm process for KEY, whether it was started now): an idle one that is still
        reusable, else a new one (WAIT False: without waiting for it to be ready)."""
        idle = self._idle.pop(key, None)
        if idle is not None:
            if idle.reusable():
                return idle, False
            idle.close()
        framework, preload, cwd, _ = key
        self.started += 1
        log = self.scratch / f"forkserver-{framework}-{self.started}.log"
        return PooledForkServer(preload, env, Path(cwd), log, wait=wait), True

    def give_back(self, key: PoolKey, server: ForkServer) -> None:
        """Keep SERVER warm for the next run, or close it where it cannot serve one."""
        if not isinstance(server, PooledForkServer) or not server.reusable():
            server.close()
            return
        older = self._idle.pop(key, None)  # two runs at once each leased one: keep the newer
        if older is not None:
            older.close()
        self._idle[key] = server
        while len(self._idle) > 1 and (len(self._idle) > self.most_idle
                                       or self._idle_bytes() > self.most_idle_bytes):
            _, oldest = self._idle.popitem(last=False)
            oldest.close()

    def _idle_bytes(self) -> int:
        return sum(resident_bytes(pid) for pid in self.idle_pids())

    def close(self) -> None:
        servers = list(self._idle.values())
        self._idle.clear()
        for server in servers:  # all told first: they exit side by side
            server.hang_up()
        for server in servers:
            server.close()


class PooledRun(ForkServers):
    """One run's warm processes, leased from POOL: the ForkServers a run expects, whose record
    names only the warm processes this run started, and whose prestart waited only for those."""

    def __init__(self, pool: WarmProcessPool) -> None:
        super().__init__(pool.scratch)
        self._pool = pool
        self._pool_keys: dict[ServerKey, PoolKey] = {}
        self._started: set[ServerKey] = set()

    def _key(self, framework: str, env: dict[str, str]) -> ServerKey:
        return shared_key(framework, env)

    def _open(self, framework: str, preload: tuple[str, ...], env: dict[str, str], cwd: Path,
              wait: bool) -> tuple[ForkServer, bool]:
        key = self._key(framework, env)
        pool_key = (framework, tuple(preload), str(cwd), key[1])
        server, started = self._pool.lease(pool_key, env, wait)
        self._pool_keys[key] = pool_key
        if started:
            self._started.add(key)
        return server, started

    def record(self) -> dict[str, Any]:
        recorded = super().record()
        recorded["frameworks"] = {
            framework: {"start_s": round(server.start_s, 3), "import_s": round(server.import_s, 3)}
            for (framework, env), server in self._servers.items()
            if (framework, env) in self._started}
        return recorded

    def close(self) -> None:
        for key, server in self._servers.items():
            self._pool.give_back(self._pool_keys[key], server)
        self._servers.clear()
        self._pool_keys.clear()


@contextlib.contextmanager
def lent_warm_processes(pool: WarmProcessPool,
                        fork_workers: bool = True) -> Iterator[ForkServers | None]:
    """forkserver.warm_processes's stand-in: a PooledRun for the block, handed back at its end."""
    if not fork_workers:
        yield None
        return
    with PooledRun(pool) as servers:
        yield servers

