"""A one-node SLURM cluster in a temporary folder: munged, slurmctld and slurmd for this host.

For the tests that claim SLURM works (they submit through the real sbatch) and for
benchmarks/slurm_overhead.py. Needs root and Debian's slurm-wlm and munge (`make test`
installs them where it can). Every daemon is stopped by the pid file it wrote, never by name,
so a cluster someone else runs on this machine is left alone; the ports are picked free.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
GPU_PARTITION = "gpu"
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class ClusterUnavailable(RuntimeError):
    """Why a one-node cluster cannot be started here (the tests skip with this reason)."""


@dataclass
class Cluster:
    """A running one-node cluster: its folder, slurm.conf and the environment clients need."""

    folder: Path
    conf: Path
    node: str
    partition: str
    gpu_partition: str = GPU_PARTITION

    @property
    def environment(self) -> dict[str, str]:
        """SLURM_CONF for clients (sbatch, squeue, ...) and, exported by sbatch, for jobs."""
        return {"SLURM_CONF": str(self.conf)}


def why_unavailable() -> str | None:
    """None when a cluster can be started, else the reason."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "SLURM needs Linux"
    if os.geteuid() != 0:
        return "starting slurmctld/slurmd needs root (run as root, as CI does)"
    missing = [name for name in DAEMONS + CLIENTS if shutil.which(name) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (`make test` installs slurm-wlm and munge "
                "as root with apt-get)")
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (installed with Debian's munge package)"
    return None


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def memory_mb() -> int:
    """RealMemory for slurm.conf: a little under MemTotal, as slurmd measures it."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(int(line.split()[1]) / 1024 * 0.9)
    return 1024


def slurm_conf(folder: Path, node: str, partition: str) -> str:
    """A minimal one-node configuration; quick kill and scheduling so tests stay short."""
    return "\n".join([
        "ClusterName=harnesstest",
        f"SlurmctldHost={node}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge' / 'munge.socket'}",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "KillWait=2",
        # A node whose slurmd stops answering is marked DOWN after this many seconds (default
        # 300), so the slow slurmd-kill test sees a node failure within a minute.
        "SlurmdTimeout=10",
        "InactiveLimit=0",
        "MinJobAge=600",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # One stand-in GPU (gres.conf points it at /dev/null): GPU cells can be routed to a
        # GPU partition with --gres=gpu:1 and get SLURM's CUDA_VISIBLE_DEVICES, as on a cluster.
        "GresTypes=gpu",
        (f"NodeName={node} CPUs={os.cpu_count() or 1} RealMemory={memory_mb()} Gres=gpu:1 "
         "State=UNKNOWN"),
        f"PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName={GPU_PARTITION} Nodes={node} MaxTime=INFINITE State=UP",
        "",
    ])


def _munge_folder(folder: Path) -> Path:
    """munged's own folder (owner munge, mode 755: clients must reach the socket) with a
    fresh key (mode 400), as munged demands."""
    munge = pwd.getpwnam("munge")
    munge_dir = folder / "munge"
    munge_dir.mkdir()
    munge_dir.chmod(0o755)
    key = munge_dir / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    for path in (munge_dir, key):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    return munge_dir


def _start_munged(munge_dir: Path) -> None:
    munge = pwd.getpwnam("munge")
    command = ["munged", f"--socket={munge_dir / 'munge.socket'}",
               f"--key-file={munge_dir / 'munge.key'}", f"--pid-file={munge_dir / 'munged.pid'}",
               f"--log-file={munge_dir / 'munged.log'}", f"--seed-file={munge_dir / 'seed'}"]
    # Why preexec: munged refuses to run as root with a key owned by another user.
    subprocess.run(command, check=True, capture_output=True, timeout=START_TIMEOUT_S,
                   preexec_fn=lambda: (os.setgid(munge.pw_gid), os.setuid(munge.pw_uid)))


def _pid_files(folder: Path) -> list[Path]:
    """Stop order: slurmd, slurmctld, then munged (the daemons authenticate through it)."""
    return [folder / "slurmd.pid", folder / "slurmctld.pid", folder / "munge" / "munged.pid"]


def _node_state(cluster_env: dict[str, str], node: str) -> str:
    listing = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], check=False,
                             capture_output=True, text=True, timeout=10,
                             env={**os.environ, **cluster_env})
    return listing.stdout.strip()


def start(folder: Path | None = None, partition: str = "debug") -> Cluster:
    """Write slurm.conf, start the three daemons and wait until the node is idle.

    folder: where the cluster lives (default: a new one under /tmp). Every user must be able
    to pass through it (munged runs as 'munge'), so pytest's private tmp_path will not do.
    """
    reason = why_unavailable()
    if reason is not None:
        raise ClusterUnavailable(reason)
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="harness-slurm-"))
        folder.chmod(0o755)
    node = socket.gethostname().split(".")[0]
    for name in ("state", "spool"):
        (folder / name).mkdir(parents=True)
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, node, partition))
    (folder / "gres.conf").write_text(f"NodeName={node} Name=gpu File=/dev/null\n")
    cluster = Cluster(folder, conf, node, partition)
    try:
        _start_munged(_munge_folder(folder))
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([daemon, "-f", str(conf)], check=True, capture_output=True,
                           timeout=START_TIMEOUT_S, env={**os.environ, **cluster.environment})
        _wait_idle(cluster)
    except (OSError, subprocess.SubprocessError, ClusterUnavailable) as exc:
        stop(cluster)
        said = getattr(exc, "stderr", None) or b""
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        said = said.strip().splitlines()[-1:] or [str(exc)]
        raise ClusterUnavailable(f"one-node cluster did not start: {said[0]} (logs in "
                                 f"{folder})") from None
    return cluster


def kill_slurmd(cluster: Cluster) -> None:
    """SIGKILL the node's slurmd by its pid file (a node failure; its tasks' steps live on)."""
    pid = int((cluster.folder / "slurmd.pid").read_text().strip())
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def start_slurmd(cluster: Cluster) -> None:
    """Start the node's slurmd again (after kill_slurmd)."""
    subprocess.run(["slurmd", "-f", str(cluster.conf)], check=True, capture_output=True,
                   timeout=START_TIMEOUT_S, env={**os.environ, **cluster.environment})


def _wait_idle(cluster: Cluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        state = _node_state(cluster.environment, cluster.node)
        if set(state.split()) == {"idle"}:  # one line per partition the node is in
            return
        time.sleep(0.2)
    raise ClusterUnavailable(f"node {cluster.node} is {state or 'unknown'!r}, not idle, after "
                             f"{START_TIMEOUT_S:g} s")


def stop(cluster: Cluster) -> None:
    """SIGTERM each daemon by its pid file and wait for it to go; leave anything else alone."""
    for pid_file in _pid_files(cluster.folder):
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    # A zombie has exited; only its parent (not us: daemons re-parent to init) can reap it.
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X"))


@contextlib.contextmanager
def running(partition: str = "debug") -> Iterator[Cluster]:
    """A cluster for the duration, in its own folder, removed afterwards."""
    cluster = start(None, partition)
    try:
        yield cluster
    finally:
        stop(cluster)
        shutil.rmtree(cluster.folder, ignore_errors=True)
