"""The environment snapshot: local look-ups only, absent packages never imported."""

import importlib.metadata
import socket
import sys

from grpo_lab.util.environment import PINNED_PACKAGES, env_snapshot, environment


def test_env_snapshot_reads_versions_without_network():
    env = env_snapshot()
    assert env["python"] == sys.version.split()[0]
    assert env["torch"] == importlib.metadata.version("torch")
    assert {"platform", "hostname", "cuda", "devices", "device_count", "git_commit", "git_dirty"} <= set(env)
    assert env["hostname"] == socket.gethostname()
    for absent in ("vllm", "deepspeed"):
        try:
            importlib.metadata.version(absent)
        except importlib.metadata.PackageNotFoundError:
            assert absent not in env and absent not in sys.modules


def test_environment_names_every_pinned_package_and_cuda():
    env = environment()
    assert set(env) == {"python", "cuda", *PINNED_PACKAGES}
    assert env["torch"] == importlib.metadata.version("torch") == env_snapshot()["torch"]
