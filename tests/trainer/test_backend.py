import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from grpo_lab.spec.config import OptimConfig
from grpo_lab.trainer.backend import MISSING_DEEPSPEED, TorchBackend, make_backend
from grpo_lab.trainer.grpo import train
from grpo_lab.trainer.launch import command
from grpo_lab.util.yamlio import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
needs_deepspeed = pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (pip install deepspeed)")


@pytest.fixture(autouse=True)
def launcher_env():
    """An in-process DeepSpeed run sets the variables a launcher would; keep them out of later tests."""
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCH_EXTENSIONS_DIR")
    saved = {k: os.environ.get(k) for k in keys}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def rows(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_torch_backend_step_is_a_clipped_adamw_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    w0 = [p.detach().clone() for p in model.parameters()]
    opt = OptimConfig(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, grad_clip=0.5)
    backend = TorchBackend(model.parameters(), opt)
    backend.zero_grad()
    backend.backward((model(torch.randn(8, 4)) ** 2).sum())
    grads = [p.grad.detach().clone() for p in model.parameters()]
    norm = backend.step(lr=2e-3)

    total = torch.sqrt(sum((g**2).sum() for g in grads))
    assert norm == pytest.approx(float(total), rel=1e-6)  # reported before clipping
    scale = min(1.0, 0.5 / (float(total) + 1e-6))
    (b1, b2), lr, eps = opt.betas, 2e-3, 1e-8
    for p, w, g in zip(model.parameters(), w0, grads):
        g = g * scale
        m_hat = (1 - b1) * g / (1 - b1)  # first step: bias correction undoes the (1 - beta) factor
        v_hat = (1 - b2) * g**2 / (1 - b2)
        expected = w * (1 - lr * opt.weight_decay) - lr * m_hat / (v_hat.sqrt() + eps)
        torch.testing.assert_close(p.detach(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("backend, message", [
    ({"offload_optimizer": True}, "needs backend.name: deepspeed"),
    ({"name": "deepspeed", "zero_stage": 0}, "plain data parallelism"),
    ({"name": "deepspeed", "zero_stage": 3}, "not supported"),
    ({"name": "deepspeed", "zero_stage": 1, "offload_optimizer": True}, "needs backend.zero_stage 2"),
    ({"name": "deepspeed", "zero_stag": 2}, "unknown key 'backend.zero_stag'"),
])
def test_backend_config_rejects_bad_combinations(make_cfg, backend, message):
    with pytest.raises(ConfigError, match=message):
        make_cfg(backend=backend)


def test_deepspeed_rejects_float16(make_cfg):
    with pytest.raises(ConfigError, match="float32 or bfloat16"):
        make_cfg(backend={"name": "deepspeed"}, dtype="float16")


def test_missing_deepspeed_names_the_install(make_cfg, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # what `import deepspeed` sees when it is absent
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    with pytest.raises(ImportError) as err:
        make_backend(make_cfg(backend={"name": "deepspeed"}), torch.nn.Linear(2, 2))
    assert str(err.value) == MISSING_DEEPSPEED


@needs_deepspeed
def test_deepspeed_zero2_trains_like_torch(tmp_path, make_cfg):
    common = {"steps": 6, "checkpoint_every": 100, "eval": {"every": 100}}
    train(make_cfg(**common), tmp_path / "torch")
    train(make_cfg(**common, backend={"name": "deepspeed", "zero_stage": 2}), tmp_path / "ds")
    ta, ds = rows(tmp_path / "torch"), rows(tmp_path / "ds")
    assert len(ta) == len(ds) == 6
    # The same AdamW on the same gradients: ZeRO only flattens the parameters into one fp32 buffer,
    # which changes the summation order of the grad norm (measured: 3e-7 relative by step 5, weights
    # equal to float rounding). So every step samples the same completions (identical rewards), and
    # losses, KL and grad norms agree far inside 1e-5 relative; loss/policy is ~1e-9 whenever the
    # group-normalised advantages cancel, hence the absolute floor.
    for a, b in zip(ta, ds):
        assert b["reward/mean"] == a["reward/mean"], a["step"]
        for key in ("loss/policy", "loss/total", "kl/mean", "train/grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (a["step"], key)


@needs_deepspeed
def test_deepspeed_resumes_its_optimizer_shard(tmp_path, make_cfg):
    cfg = make_cfg(steps=4, checkpoint_every=2, eval={"every": 100}, backend={"name": "deepspeed"})
    train(cfg, tmp_path / "whole")

    def crash(step, metrics):
        if step == 2:  # after the checkpoint of step 2, before the next
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "resumed", on_step=crash)
    train(cfg, tmp_path / "resumed")
    whole, resumed = rows(tmp_path / "whole"), rows(tmp_path / "resumed")
    assert [r["step"] for r in resumed] == [0, 1, 2, 3]
    for key in ("loss/policy", "train/grad_norm", "reward/mean"):
        assert resumed[3][key] == pytest.approx(whole[3][key], rel=1e-6), key


def test_gradient_checkpointing_recomputes_the_same_gradients(tmp_path, make_cfg):
    common = {"steps": 2, "checkpoint_every": 100, "eval": {"every": 100}}
    train(make_cfg(**common), tmp_path / "plain")
    train(make_cfg(**common, backend={"gradient_checkpointing": True}), tmp_path / "ckpt")
    # Step 0 trains the same weights on the same samples: the recomputed gradients must match. Later
    # steps drift a little: AdamW's first steps are sign-like, so float-level gradient differences
    # in near-zero components move weights by a full lr (measured 1e-4 relative on KL at step 1).
    for a, b in zip(rows(tmp_path / "plain"), rows(tmp_path / "ckpt")):
        tol = 1e-6 if a["step"] == 0 else 1e-3
        for key in ("loss/total", "kl/mean", "train/grad_norm", "reward/mean"):
            assert b[key] == pytest.approx(a[key], rel=tol, abs=1e-9), (a["step"], key)


@pytest.mark.slow
@needs_deepspeed
def test_deepspeed_offload_trains_like_torch(tmp_path, make_cfg):
    """DeepSpeedCPUAdam compiles on first use (about 2 minutes on two cores; then cached)."""
    common = {"steps": 4, "checkpoint_every": 100, "eval": {"every": 100}}
    train(make_cfg(**common), tmp_path / "torch")
    train(make_cfg(**common, backend={"name": "deepspeed", "offload_optimizer": True}), tmp_path / "ds")
    # cpu_adam's vectorised kernel rounds differently from torch's AdamW: measured 3e-6 relative on KL
    for a, b in zip(rows(tmp_path / "torch"), rows(tmp_path / "ds")):
        assert b["reward/mean"] == a["reward/mean"], a["step"]
        for key in ("loss/total", "kl/mean", "train/grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-9), (a["step"], key)


def test_launch_command_uses_torchrun_for_several_processes():
    assert command("run.yaml", "out", 1)[1:] == ["-m", "grpo_lab.trainer.launch", "run.yaml", "out"]
    cmd = command("run.yaml", "out", 4)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert cmd[5:] == ["-m", "grpo_lab.trainer.launch", "run.yaml", "out"]


@pytest.mark.slow
@needs_deepspeed
def test_two_process_zero2_run_keeps_ranks_in_step(tmp_path, make_cfg):
    cfg = make_cfg(steps=3, eval={"every": 100}, backend={"name": "deepspeed", "zero_stage": 2})
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    out = tmp_path / "out"
    subprocess.run(command(tmp_path / "run.yaml", out, 2), check=True, timeout=600, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r0, r1 = rows(out), rows(out / "rank1")
    assert [r["step"] for r in r0] == [r["step"] for r in r1] == [0, 1, 2]
    assert [r["reward/mean"] for r in r0] != [r["reward/mean"] for r in r1]  # each rank its own prompts
    assert [r["train/grad_norm"] for r in r0] == [r["train/grad_norm"] for r in r1]  # one averaged gradient
    w0, w1 = (torch.load(d / "checkpoint.pt", weights_only=False)["policy"] for d in (out, out / "rank1"))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
