"""A model file's libraries imported once, in the warm process, before the fork (issue 63:
each worker of a GPT-2 file imported transformers again): read from the file's source in the
parent, imported only by the warm processes of the frameworks whose modules the file imports,
and a library that leaves a thread behind costs the sharing, never the fork."""

from __future__ import annotations

import json
from pathlib import Path

from harness.run.forkserver import ForkServer, ForkServers
from harness.run.runner import PROJECT_ROOT
from harness.workloads.usermodel.libraries import model_libraries
from tests.test_forkserver import warm_env

PRELOAD = ("tests.fakes.backend.device",)
THREAD_AT_IMPORT = ("import threading, time\n"
                    "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")


def test_a_model_files_libraries_are_read_from_its_source(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("X = 1\n")
    model = tmp_path / "net.py"
    model.write_text("import os\nimport numpy as np\nimport torch.nn as nn\n"
                     "from rich.console import Console\nimport helper\nfrom . import sibling\n"
                     "import no_such_library_xyz\n\n\ndef model():\n    import typer\n"
                     "    return nn.Linear(2, 2)\n")
    imported, shared = model_libraries(model)
    assert {"os", "numpy", "torch", "rich", "helper", "typer"} <= imported
    # Installed third-party libraries only: not the standard library, a framework, the
    # user's own module beside the file, or what is not installed.
    assert shared == ("rich", "typer")
    (tmp_path / "broken.py").write_text("def model(:\n")
    assert model_libraries(tmp_path / "broken.py") == (frozenset(), ())


def modules_in_a_child(server: ForkServer, tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = tmp_path / "described.json"
    worker = server.fork("tests.fakes.helper_child", ["describe", str(out)], env, tmp_path,
                         tmp_path / "stream.txt")
    assert worker.wait_peak(60)[0] == 0
    return list(json.loads(out.read_text())["modules"])


def test_the_warm_process_imports_the_files_libraries_before_the_fork(tmp_path: Path) -> None:
    env = warm_env(tmp_path, "shared_library", "LOADED = True\n")
    with ForkServers(tmp_path) as servers:
        # The file imports the framework's module ("tests"): its libraries are preloaded; one
        # that does not import is left to the worker, and the warm process still forks.
        servers.share_imports({"tests", "shared_library"}, ["shared_library", "no_such_xyz"])
        server, _ = servers.get("fake", PRELOAD, env, PROJECT_ROOT)
        assert server is not None and not server.refused
        assert "+shared_library" in server.preload
        assert modules_in_a_child(server, tmp_path, env) == ["shared_library"]
    with ForkServers(tmp_path) as servers:
        # Another framework's file: this framework's warm process imports nothing more.
        servers.share_imports({"torch", "shared_library"}, ["shared_library"])
        server, _ = servers.get("fake", PRELOAD, env, PROJECT_ROOT)
        assert server is not None and server.preload == PRELOAD
        assert modules_in_a_child(server, tmp_path, env) == []


def test_a_library_that_starts_a_thread_costs_the_sharing_not_the_fork(tmp_path: Path) -> None:
    env = warm_env(tmp_path, "threaded_library", THREAD_AT_IMPORT)
    with ForkServers(tmp_path) as servers:
        servers.share_imports({"tests"}, ["threaded_library"])
        server, _ = servers.get("fake", PRELOAD, env, PROJECT_ROOT)
        # Started again without it: the cells are still forked.
        assert server is not None and not server.refused and server.preload == PRELOAD
    with ForkServers(tmp_path) as servers:  # the same before a round (prestart)
        servers.share_imports({"tests"}, ["threaded_library"])
        servers.prestart([("fake", PRELOAD, env)], PROJECT_ROOT)
        server, _ = servers.get("fake", PRELOAD, env, PROJECT_ROOT)
        assert server is not None and not server.refused and server.preload == PRELOAD
