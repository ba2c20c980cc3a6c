"""Scale-out on one CPU machine: 2-process training through ``accelerate launch`` (gloo), its equivalence
with 1 process, sharded predictions merged by ``score``/``report``, and the accelerate/DeepSpeed configs.

``accelerate launch --cpu --num_processes 2`` starts ONE process in accelerate 1.15 (its multi-CPU path is
mpirun with ``--mpirun_hostfile``); ``--multi_gpu`` goes through torchrun, and on a machine without GPUs
each process joins a gloo group (``MULTI_CPU``): that is the command tested here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from model_fixtures import generate_split

from lakeshift.cli import main

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

TRAIN = ["train", "--input", "grid", "--cot", "none", "--model", "micro", "--prompt", "map-only"]
TRAIN += ["--no-bf16", "--logging-steps", "1", "--global-batch-size", "8"]


def _launch(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``accelerate launch --multi_gpu --num_processes 2 -m lakeshift.cli ARGV`` (2 gloo processes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [shutil.which("accelerate") or "accelerate", "launch", "--multi_gpu", "--num_processes", "2"]
    cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(_free_port()), "-m", "lakeshift.cli", *argv]
    # A hang (a rank waiting in a collective for one that stopped) fails the test through the timeout.
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def _free_port() -> int:
    """A free TCP port for the rendezvous (other test runs on this machine may hold accelerate's 29500)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _losses(run: Path) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "loss" in r]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dist") / "data"
    generate_split(root, "id-train", sizes=(3, 4), count=8, train=True)  # 16 maps: 2 steps per epoch
    return root


@pytest.fixture(scope="module")
def ddp_run(data: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A 2-process run: 4 steps of global batch 8 (4 per process), checkpoints at steps 2 and 4."""
    out = data.parent / "ddp"
    proc = _launch(*TRAIN, "--data", str(data), "--out", str(out), "--max-steps", "4", "--save-steps", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_two_processes_write_one_run_folder(ddp_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = ddp_run
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "done" and run["global_step"] == 4
    assert run["distributed"] == {
        "world_size": 2,
        "distributed_type": "MULTI_CPU",
        "per_device_batch_size": 4,
        "grad_accum": 1,
        "global_batch_size": 8,
    }
    # Rank 0 alone logs: one metrics row per step (not one per process), one bar, one final message.
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 4]  # + the end-of-training summary row
    assert proc.stderr.count("train:   0%") == 1
    assert proc.stderr.count("lakeshift train: model saved to") == 1
    # The checkpoint holds one model and each rank's RNG state (what a 2-process resume needs).
    ckpt = sorted(p.name for p in (out / "checkpoint-4").iterdir())
    assert ckpt.count("model.safetensors") == 1
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(ckpt)
    assert (out / "model" / "model.safetensors").is_file() and (out / "tokenizer").is_dir()


def test_two_process_run_resumes_under_a_time_budget_and_its_model_predicts(
    ddp_run: tuple[Path, subprocess.CompletedProcess[str]], data: Path, tmp_path: Path
) -> None:
    """--resume from the 2-process checkpoint, with a time budget (a resumable change) that ends the run:
    both ranks stop at the step rank 0 decided (a rank that stopped alone would leave the other waiting in
    a collective: the launch would hang until the timeout)."""
    out, _ = ddp_run
    resumed = tmp_path / "resumed"
    shutil.copytree(out, resumed)
    shutil.rmtree(resumed / "model")  # as if the run had stopped after checkpoint-4
    argv = [*TRAIN, "--data", str(data), "--out", str(resumed), "--resume", "--max-minutes", "0.05"]
    proc = _launch(*argv, "--max-steps", "100000", timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((resumed / "run.json").read_text())
    assert len(run["resumed"]) == 1 and run["stopped_by_time_budget"] is True
    assert run["global_step"] > 4 and run["distributed"]["world_size"] == 2
    # The final checkpoint is the step where the budget ran out, saved once for both ranks.
    last = max(int(p.name.split("-")[1]) for p in resumed.glob("checkpoint-*"))
    assert last == run["global_step"]
    steps = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert steps[4:] == [*range(5, last + 1), last]  # each step logged once, after the 4 of the first run
    pred = tmp_path / "p.jsonl"
    argv = ["predict", "--model", str(resumed), "--data", str(data), "--split", "id-train"]
    assert main([*argv, "--out", str(pred), "--limit", "3", "--max-new-tokens", "4"]) == 0
    assert len(pred.read_text().splitlines()) == 3


def test_one_and_two_processes_give_the_same_loss_curve(
    ddp_run: tuple[Path, subprocess.CompletedProcess[str]], data: Path, tmp_path: Path
) -> None:
    """Same global batch (8 = 1 x 8 = 2 x 4), seed and data order: the curves agree to float rounding.

    The length-grouped sampler groups by the global batch (lakeshift's trainer), so both runs see the same
    8 maps at each step; transformers' own sampler would group by the per-device batch (8 vs 4) and give
    the two runs different orders on these 16 maps. Measured max difference: see benchmarks/log.md."""
    out, _ = ddp_run
    single = tmp_path / "single"
    assert main([*TRAIN, "--data", str(data), "--out", str(single), "--max-steps", "4"]) == 0
    assert json.loads((single / "run.json").read_text())["distributed"]["world_size"] == 1
    one, two = _losses(single), _losses(out)
    assert len(one) == len(two) == 4
    assert max(abs(a - b) for a, b in zip(one, two, strict=True)) < 1e-4, (one, two)
    assert one[-1] < one[0]  # it trained


@pytest.mark.skipif(
    not os.environ.get("LAKESHIFT_TEST_LORA_DDP"),
    reason="a third 2-process launch (~15-30 s); set LAKESHIFT_TEST_LORA_DDP=1 to run it",
)
def test_lora_on_two_processes(data: Path) -> None:
    out = data.parent / "lora"
    proc = _launch(*TRAIN, "--data", str(data), "--out", str(out), "--lora", "--max-steps", "3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["global_step"] == 3 and run["distributed"]["world_size"] == 2
    assert (out / "adapter" / "adapter_config.json").is_file() and (out / "model" / "config.json").is_file()


def test_global_batch_not_divisible_is_one_clear_error(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bad"
    argv = [
        *TRAIN[:-2],
        "--global-batch-size",
        "7",
        "--grad-accum",
        "2",
        "--data",
        str(data),
        "--out",
        str(out),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "lakeshift train: error: --global-batch-size 7: not divisible by 1 processes x 2 gradient "
        "accumulation steps"
    ]
    assert not (out / "run.json").exists()


# ----- sharded predictions ---------------------------------------------------------------------------------
def _predict(model: Path, data: Path, out: Path, *extra: str) -> int:
    argv = ["predict", "--model", str(model), "--data", str(data), "--split", "id-train", "--out", str(out)]
    return main([*argv, "--max-new-tokens", "6", "--sizes", "3,4", *extra])


def _scored(maps: Path, out: Path, *predictions: Path) -> list[dict[str, object]]:
    argv = ["score", "--maps", str(maps), "--out", str(out), "--predictions", *map(str, predictions)]
    assert main(argv) == 0
    return sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: str(r["id"]))


def test_sharded_predict_merged_equals_unsharded(
    ddp_run: tuple[Path, subprocess.CompletedProcess[str]],
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, _ = ddp_run
    maps = data / "id-train" / "maps.jsonl"
    whole = tmp_path / "whole" / "P.jsonl"
    assert _predict(model, data, whole) == 0
    shards = tmp_path / "shards"
    for i in (1, 2, 3):
        assert _predict(model, data, shards / "P.jsonl", "--shard", f"{i}/3") == 0
    files = sorted(shards.glob("*.jsonl"))
    assert [f.name for f in files] == [f"P.shard-{i}-of-3.jsonl" for i in (1, 2, 3)]
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    # A partition: every map once, interleaved (shard sizes 6/5/5 of 16).
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(json.loads(line)["id"] for line in whole.read_text().splitlines())
    assert len(ids) == len(set(ids)) == 16
    assert [len(f.read_text().splitlines()) for f in files] == [6, 5, 5]
    outputs = {json.loads(line)["id"]: json.loads(line)["output"] for line in whole.read_text().splitlines()}
    assert {r["id"]: r["output"] for r in rows} == outputs

    def strip(records: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if k != "model"} for r in records]

    reference = _scored(maps, tmp_path / "s0.jsonl", whole)
    assert strip(_scored(maps, tmp_path / "s1.jsonl", *files)) == strip(reference)
    assert strip(_scored(maps, tmp_path / "s2.jsonl", shards)) == strip(reference)  # a folder
    glob = shards / "P.shard-*.jsonl"
    assert strip(_scored(maps, tmp_path / "s3.jsonl", glob)) == strip(reference)  # a glob (not the shell's)
    capsys.readouterr()

    # An absent shard: its maps are missing, and a warning names it.
    partial = _scored(maps, tmp_path / "s4.jsonl", files[0], files[2])
    assert sum(r["verdict"] == "missing" for r in partial) == 5
    assert "shard 2/3 absent" in capsys.readouterr().err

    # The same id in two files: one clear error.
    dup = tmp_path / "dup.jsonl"
    dup.write_text(files[0].read_text().splitlines()[0] + "\n")
    argv = ["score", "--maps", str(maps), "--predictions", str(files[0]), str(dup)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is also in" in err[0] and "overlap" in err[0]

    # report: the three shard files are one run.
    from lakeshift.commands.report import find_runs

    (tmp_path / "runs").mkdir()
    shutil.copytree(shards, tmp_path / "runs" / "grid__none")
    runs = find_runs(tmp_path / "runs", data)
    assert len(runs) == 1 and [p.name for p in runs[0].paths] == [f.name for f in files]


@pytest.mark.parametrize(
    ("shard", "out", "message"),
    [
        ("2", "P.jsonl", "--shard: '2': expected I/N"),
        ("0/3", "P.jsonl", "--shard: 0/3: the shard index must be between 1 and 3"),
        ("4/3", "P.jsonl", "--shard: 4/3: the shard index must be between 1 and 3"),
        ("1/0", "P.jsonl", "--shard: 1/0: the number of shards must be >= 1"),
        ("2/3", "P.shard-1-of-3.jsonl", "names shard 1/3 but --shard is 2/3"),
    ],
)
def test_bad_shard_is_one_clear_error(
    shard: str, out: str, message: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["predict", "--model", "nowhere", "--input", "grid", "--data", str(data), "--split", "id-train"]
    assert main([*argv, "--out", str(tmp_path / out), "--shard", shard]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert list(tmp_path.iterdir()) == []  # nothing written


# ----- accelerate / DeepSpeed configs ----------------------------------------------------------------------
def _launch_env(config: str) -> tuple[object, dict[str, str]]:
    """What ``accelerate launch --config_file CONFIG`` would put in the processes' environment."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    args = launch_command_parser().parse_args(["--config_file", str(REPO / config), "x.py"])
    args, defaults, mp_from_config = _validate_launch_command(args)
    if args.use_deepspeed:
        from accelerate.utils.launch import prepare_deepspeed_cmd_env

        # As accelerate's launch_command does before its DeepSpeed launcher.
        fields = list(defaults.deepspeed_config) + (["mixed_precision"] if mp_from_config else [])
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)

        _, env = prepare_deepspeed_cmd_env(args)
    else:
        from accelerate.utils.launch import prepare_multi_gpu_env

        env = prepare_multi_gpu_env(args)
    return args, {k: v for k, v in env.items() if k.startswith(("FSDP", "ACCELERATE"))}


def test_fsdp_config_parses_into_accelerate_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """FSDP does not run on CPU processes (see docs/scale-out.md), so the config is checked through
    accelerate's own launcher parsing and plugin, which is what the GPU run uses."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import StateDictType

    args, env = _launch_env("configs/accelerate/fsdp.yaml")
    assert args.use_fsdp and env["ACCELERATE_USE_FSDP"] == "true"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()
    assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
    assert plugin.state_dict_type == StateDictType.FULL_STATE_DICT
    assert plugin.auto_wrap_policy.__name__ == "transformer_auto_wrap_policy"


def test_ddp_config_is_multi_gpu() -> None:
    args, env = _launch_env("configs/accelerate/ddp.yaml")
    assert args.multi_gpu and not args.use_fsdp and not args.use_deepspeed
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"


@pytest.mark.parametrize(("config", "stage"), [("deepspeed-zero2.yaml", 2), ("deepspeed-zero3.yaml", 3)])
def test_deepspeed_configs_pass_deepspeeds_own_parser(
    config: str, stage: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        import deepspeed  # noqa: F401
        from deepspeed.runtime.config import DeepSpeedConfig
    except Exception as err:  # ImportError, or a CUDA-only build that fails at import on this machine
        pytest.skip(f"deepspeed not importable ({type(err).__name__}: {err}); install the deepspeed extra")
    from accelerate.utils import DeepSpeedPlugin
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    args, env = _launch_env(f"configs/accelerate/{config}")
    assert args.use_deepspeed
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    plugin = DeepSpeedPlugin()
    assert plugin.zero_stage == stage
    hf = HfTrainerDeepSpeedConfig(plugin.deepspeed_config)
    training = TrainingArguments(output_dir="unused", per_device_train_batch_size=1, bf16=True, use_cpu=True)
    hf.trainer_config_process(training)
    hf.trainer_config_finalize(training, model=None, num_training_steps=10)
    parsed = DeepSpeedConfig(hf.config)  # DeepSpeed's own validation (pydantic models, batch arithmetic)
    assert parsed.zero_optimization_stage == stage


def test_gpu_wheels_cover_what_the_offline_gpu_machine_lacks() -> None:
    """The wheel list of scripts/gpu_wheels.sh: trl, datasets and their dependencies, never torch."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_wheels.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {line.split("==")[0] for line in proc.stdout.split()}
    assert {"trl", "datasets", "pyarrow", "dill", "xxhash", "multiprocess", "fsspec", "pygame-ce"} <= names
    assert not {n for n in names if n == "torch" or n.startswith(("nvidia-", "triton"))}
    for script in ("benchmarks/gpu_check.sh", "scripts/gpu_wheels.sh"):
        subprocess.run(["bash", "-n", str(REPO / script)], check=True)


def test_python_runs_the_cli_module() -> None:
    """``-m lakeshift.cli`` (what accelerate launch runs) is an entry point."""
    proc = subprocess.run(
        [sys.executable, "-m", "lakeshift.cli", "predict", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "--shard" in proc.stdout
