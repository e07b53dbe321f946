"""`harness env`: the host, then each framework as its probe returns, fitted to the terminal.

Why streamed: each framework is probed in a child process that imports it (1-5 s each on a
2-core VM; 27 s for seven, silent until a table came at the end). The host lines print at once
and every framework's line as soon as it and those before it are known; the probes run a few
at a time, as many as the machine has cores (at most 4), so the wait is shorter too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.core import registry
from harness.data.serial import JsonObject
from harness.measure import envinfo
from harness.run.context import RunContext
from harness.run.runner import run_json_child
from harness.spec import Cell
from harness.terminal import wrapped

MAX_PARALLEL_PROBES = 4


def probe_framework(name: str, timeout_s: float = 120.0) -> JsonObject:
    """Ask a child process what a framework sees (the parent never imports it)."""
    installed, reason = registry.framework_installed(name)
    if not installed:
        return {"framework": name, "installed": False, "reason": reason}
    info, why_not = run_json_child("harness.measure.probe", [name],
                                   Cell("probe", "-", name, "cuda:0"), timeout_s,
                                   RunContext.from_environment())
    if info is None:
        return {"framework": name, "installed": True, "reason": f"probe failed: {why_not}"}
    return info


def probes_in_order(names: list[str]) -> Iterator[JsonObject]:
    """Each framework's probe, in NAMES' order, each yielded as soon as it is done."""
    workers = max(1, min(os.cpu_count() or 1, MAX_PARALLEL_PROBES, len(names)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(probe_framework, name) for name in names]
        for future in futures:
            yield future.result()


def host_lines(host: dict[str, Any]) -> list[str]:
    memory = host["memory_bytes"] / 2**30 if host["memory_bytes"] else float("nan")
    return [*wrapped(f"host: {host['hostname']}  cpu: {host['cpu_model']}  cores: "
                     f"{host['cores']}  memory: {memory:.1f} GiB  python: {host['python']}  "
                     f"os: {host['os']}"),
            *wrapped(f"gpus (nvidia-smi): {', '.join(host['gpus']) or 'none'}")]


def threads_text(threads: Any) -> str:
    """'intra_op 2, inter_op 2': the probe's thread settings, without JSON's quotes."""
    if not isinstance(threads, dict):
        return str(threads)
    return ", ".join(f"{key} {value if value != '' else 'unset'}"
                     for key, value in threads.items())


def framework_lines(info: JsonObject) -> list[str]:
    """One framework: version, devices and threads (or why it is not there), wrapped."""
    name = str(info["framework"])
    if not info.get("installed"):
        return wrapped(f"{name}: not installed ({info.get('reason', '')})", indent=2, hang=4)
    if info.get("version") is None:
        return wrapped(f"{name}: installed, {info.get('reason', 'no report')}", indent=2, hang=4)
    found = info.get("devices")
    devices = ", ".join(f"{device['name']} ({device['description']})"
                        for device in (found if isinstance(found, list) else [])
                        if isinstance(device, dict)) or "none"
    text = f"{name}: {info['version']}; devices: {devices}"
    if info.get("threads"):
        text += f"; threads: {threads_text(info['threads'])}"
    return wrapped(text, indent=2, hang=4)


def print_env(say: Callable[[str], None], as_json: bool) -> None:
    """The host, then one entry per framework as its probe comes back (JSON: all at the end,
    with a progress line on stderr when it is a terminal)."""
    host = envinfo.host_metadata()
    names = list(registry.framework_names())
    if as_json:
        found = []
        for index, info in enumerate(probes_in_order(names), start=1):
            if sys.stderr.isatty():
                print(f"\rprobed {index}/{len(names)} frameworks", end="", file=sys.stderr,
                      flush=True)
            found.append(info)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        say(json.dumps({"host": host, "frameworks": found}, indent=2))
        return
    for line in host_lines(host):
        say(line)
    say(f"frameworks ({len(names)}, each probed in a process of its own; they follow as "
        "they answer):")
    for info in probes_in_order(names):
        for line in framework_lines(info):
            say(line)
