"""RL networks come from the RL algorithm's own settings, never from the ES ``policy`` section.

For every env entry of ``experiments/defaults.yaml`` and every RL algorithm, the network
the run builds is the rl-baselines3-zoo entry's ``policy_kwargs`` where the zoo has an
entry for that env (its published files, copied unchanged into ``tests/data/rl_zoo3``),
else the library's own default for the algorithm, read from a model the library builds
with no arguments. ``--print-config`` names which of the two each value is.
"""

from __future__ import annotations

import ast
import inspect
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import DEFAULTS_FILE, ConfigError, build_run_config, validate_params
from tests.conftest import harness_cli

ZOO_DIR = Path(__file__).parent / "data" / "rl_zoo3"
#: the harness's MuJoCo entries are v5; the zoo's are v4 (the same model and reward)
MUJOCO_V5 = {"HalfCheetah-v5", "Hopper-v5", "Ant-v5"}
#: the zoo entry a harness env entry corresponds to, where it is not the same id, per zoo file:
#: PendulumPO zeroes the pendulum's velocity; the memory-less algorithms take the zoo's
#: Pendulum-v1 entry, ppo_lstm its velocity-free PendulumNoVel-v1. The zoo's ppo_lstm has no
#: entry for the fully observed lander; the harness carries its LunarLanderContinuousNoVel-v2.
ZOO_ENTRY_OF = {
    "ppo_lstm.yml": {
        "PendulumPO": "PendulumNoVel-v1",
        "LunarLanderContinuous-v3": "LunarLanderContinuousNoVel-v2",
    },
    "*": {"PendulumPO": "Pendulum-v1"},
}
#: config field -> the policy argument it becomes (the same name but for the activation)
NETWORK_FIELDS = {
    "net_arch": "net_arch",
    "activation": "activation_fn",
    "ortho_init": "ortho_init",
    "log_std_init": "log_std_init",
    "use_expln": "use_expln",
    "lstm_hidden_size": "lstm_hidden_size",
    "n_lstm_layers": "n_lstm_layers",
    "enable_critic_lstm": "enable_critic_lstm",
    "shared_lstm": "shared_lstm",
    "n_quantiles": "n_quantiles",
    "n_critics": "n_critics",
}


def _rl_algorithms() -> list[str]:
    from algorithms.registry import family_names

    return family_names("rl")


def _env_entries() -> list[str]:
    data = yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8"))
    return [name for name in data if name != "default"]


@cache
def _zoo_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ZOO_DIR / name).read_text(encoding="utf-8"))
    return loaded


def _zoo_entry_name(env_entry: str, zoo_file: str) -> str:
    special = {**ZOO_ENTRY_OF["*"], **ZOO_ENTRY_OF.get(zoo_file, {})}
    if env_entry in special:
        return special[env_entry]
    return re.sub(r"-v5$", "-v4", env_entry) if env_entry in MUJOCO_V5 else env_entry


def _literal(node: ast.expr) -> Any:
    """A zoo ``policy_kwargs`` expression as data: ``dict(...)``, ``nn.ReLU``, literals."""
    from torch import nn

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        assert not node.args
        return {str(kw.arg): _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        assert node.value.id == "nn", ast.dump(node)
        return getattr(nn, node.attr)
    return ast.literal_eval(node)


def _zoo_policy_kwargs(zoo_file: str, entry: str) -> dict[str, Any] | None:
    """The zoo entry's ``policy_kwargs`` (empty: the entry names none); None: no entry."""
    hyperparams = _zoo_file(zoo_file).get(entry)
    if hyperparams is None:
        return None
    text = hyperparams.get("policy_kwargs")
    if text is None:
        return {}
    parsed: dict[str, Any] = _literal(ast.parse(str(text).strip(), mode="eval").body)
    return parsed


@cache
def _library_defaults(algo: str) -> dict[str, Any]:
    """The network arguments of a model SB3 (or sb3-contrib) builds with no settings."""
    import importlib

    import gymnasium as gym
    import torch

    from algorithms.registry import get_algorithm

    torch.set_num_threads(1)
    algo_cls: Any = get_algorithm(algo)
    sb3_class = getattr(importlib.import_module(algo_cls.sb3_module), algo_cls.sb3_class_name)
    env = gym.make("Pendulum-v1")
    off_policy = "buffer_size" in inspect.signature(sb3_class).parameters
    extra = {"buffer_size": 10} if off_policy else {}  # the network does not depend on it
    model = sb3_class(algo_cls.sb3_policy, env, device="cpu", **extra)
    policy = model.policy
    found: dict[str, Any] = {"net_arch": policy.net_arch, "activation_fn": policy.activation_fn}
    actor = getattr(policy, "actor", None)
    if actor is None:  # on-policy: one ActorCriticPolicy
        found.update(ortho_init=policy.ortho_init, log_std_init=policy.log_std_init)
    elif hasattr(actor, "use_expln"):  # SAC, TQC (TD3's actor is deterministic)
        found.update(log_std_init=actor.log_std_init, use_expln=actor.use_expln)
    lstm = getattr(policy, "lstm_actor", None)
    if lstm is not None:
        found.update(
            lstm_hidden_size=lstm.hidden_size,
            n_lstm_layers=lstm.num_layers,
            enable_critic_lstm=policy.lstm_critic is not None,
            shared_lstm=policy.shared_lstm,
        )
    critic: Any = getattr(model, "critic", None)
    if hasattr(critic, "n_quantiles"):
        found.update(n_quantiles=critic.n_quantiles, n_critics=critic.n_critics)
    env.close()
    return found


@cache
def _box_actions(env_entry: str) -> bool:
    from gymnasium import spaces

    from envs.registry import make_env

    env = make_env(env_entry)
    try:
        return isinstance(env.action_space, spaces.Box)
    finally:
        env.close()


def _normalised(algo_cls: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """On-policy ``net_arch`` as SB3 reads a list: the same sizes for actor and critic."""
    out = dict(kwargs)
    arch = out.get("net_arch")
    if isinstance(arch, list) and not hasattr(algo_cls.Config, "buffer_size"):
        out["net_arch"] = {"pi": list(arch), "vf": list(arch)}
    return out


def _comparable(key: str, value: Any) -> Any:
    """An activation by its name: SBX's (a JAX function, ``relu``) is SB3's (``nn.ReLU``)."""
    return str(value.__name__).lower() if key == "activation_fn" else value


CASES = [(env, algo) for env in _env_entries() for algo in _rl_algorithms()]


@pytest.mark.parametrize(("env_entry", "algo"), CASES, ids=[f"{e}-{a}" for e, a in CASES])
def test_every_rl_network_is_the_zoos_or_the_librarys_default(env_entry: str, algo: str) -> None:
    from algorithms.registry import get_algorithm

    algo_cls: Any = get_algorithm(algo)
    box = _box_actions(env_entry)
    if algo_cls.continuous_actions_only and not box:
        pytest.skip(f"{algo} refuses a discrete action space")
    resolved = build_run_config(
        {"algo": algo, "env": env_entry, "seed": 100, "workers": 1}, source="test"
    )
    params = validate_params(resolved.config["params"], algo_cls.Config, algo)
    built = algo_cls.policy_kwargs_for(params, box)

    zoo_file = str(algo_cls.zoo_hyperparams)
    zoo_entry = _zoo_entry_name(env_entry, zoo_file)
    zoo_kwargs = _zoo_policy_kwargs(zoo_file, zoo_entry)
    expected = {**_library_defaults(algo), **_normalised(algo_cls, zoo_kwargs or {})}
    assert set(zoo_kwargs or {}) <= set(built), f"zoo arguments not carried: {zoo_kwargs}"
    compared = {key: _comparable(key, built[key]) for key in expected if key in built}
    assert compared == {key: _comparable(key, expected[key]) for key in compared}
    assert {"net_arch", "activation_fn"} <= set(compared)

    # --print-config names the source of each network value: the zoo entry where the harness
    # carries it (a value the zoo leaves out is the library's default), else the library
    zoo_label = f"rl-baselines3-zoo hyperparams/{zoo_file} {zoo_entry}"
    carried = any(source.endswith(zoo_label) for source in resolved.sources.values())
    for name, argument in NETWORK_FIELDS.items():
        if name not in resolved.config["params"]:
            continue
        source = resolved.sources[f"params.{name}"]
        if carried and argument in (zoo_kwargs or {}):
            assert source.endswith(zoo_label), (name, source)
        else:
            assert source == algo_cls.Config.DEFAULT_SOURCES[name], (name, source)

    # a section that says which zoo entry it carries names the one the zoo file has
    data = yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8"))
    section = (data.get(env_entry) or {}).get(algo_cls.section_in_defaults()) or {}
    if "zoo" in section:
        assert section["zoo"] == zoo_entry and zoo_kwargs is not None


def test_the_es_policy_section_cannot_reach_an_rl_network() -> None:
    """Given on the command line it is refused; in a stored config it is not read."""
    from algorithms.sb3 import A2C

    base = {"algo": "a2c", "env": "HalfCheetah-v5", "seed": 0, "workers": 1}
    with pytest.raises(ConfigError, match="does not apply to a2c"):
        build_run_config(base, overrides=["policy.hidden_sizes=[7]"])
    stored = build_run_config(
        {**base, "policy": {"kind": "mlp", "hidden_sizes": [7], "activation": "relu"}},
        source="given",
        refuse="never",
    ).config
    assert stored["policy"]["hidden_sizes"] == [7]  # kept, as a stored config holds it
    params = validate_params(stored["params"], A2C.Config, "a2c")
    assert A2C.network(params) == ([64, 64], "tanh")


def test_a2c_on_halfcheetah_builds_sb3s_network_not_the_linear_es_policy() -> None:
    """The env's ES policy is linear; A2C there has no zoo policy_kwargs: SB3's 64-64 tanh."""
    from torch import nn

    from tests.test_rl_settings import _algorithm

    algorithm = _algorithm("a2c", "HalfCheetah-v5")
    try:
        assert algorithm.context.policy_spec.kind == "linear"
        policy = algorithm.model.policy
        assert policy.net_arch == {"pi": [64, 64], "vf": [64, 64]}
        assert policy.activation_fn is nn.Tanh and policy.ortho_init is True
        assert [
            m.out_features for m in policy.mlp_extractor.policy_net if hasattr(m, "weight")
        ] == [
            64,
            64,
        ]
    finally:
        algorithm.close()


def test_recurrent_ppo_without_a_zoo_entry_is_sb3_contribs_mlp_lstm_policy() -> None:
    from tests.test_rl_settings import _algorithm

    algorithm = _algorithm("recurrent-ppo", "Pendulum-v1")
    try:
        policy = algorithm.model.policy
        assert policy.lstm_actor.hidden_size == 256 and policy.lstm_critic.hidden_size == 256
        assert policy.net_arch == {"pi": [64, 64], "vf": [64, 64]}
    finally:
        algorithm.close()


@pytest.mark.parametrize("algo", _rl_algorithms())
def test_a_null_network_is_the_librarys_default(algo: str) -> None:
    """Null (a ``--set net_arch=null``, a stored config) stands for the config's default."""
    import dataclasses

    from algorithms.registry import get_algorithm

    algo_cls: Any = get_algorithm(algo)
    default = algo_cls.Config()
    nulled = dataclasses.replace(default, net_arch=None, activation=None)
    assert algo_cls.network(nulled) == algo_cls.network(default)
    arch, activation = algo_cls.network(default)
    library = _library_defaults(algo)
    assert activation == library["activation_fn"].__name__.lower()
    assert _normalised(algo_cls, {"net_arch": arch})["net_arch"] == library["net_arch"]


def test_print_config_names_the_network_and_its_source() -> None:
    shown = harness_cli("run", "--algo", "a2c", "--env", "HalfCheetah-v5", "--print-config")
    lines = shown.stdout.splitlines()
    assert any(
        re.fullmatch(r"params\.net_arch +\[64, 64\] +SB3 A2C MlpPolicy default", x) for x in lines
    )
    assert any(re.fullmatch(r"policy\.kind +linear +.*\(not used by a2c\)", line) for line in lines)


def test_a_zoo_key_needs_an_algorithm_with_a_zoo_file(tmp_path: Path) -> None:
    from harness.config import defaults_layers

    path = tmp_path / "defaults.yaml"
    path.write_text("CartPole-v1:\n  ppo: {zoo: CartPole-v1, n_steps: 16}\n  optimes: {zoo: X}\n")
    labels = [label for label, _ in defaults_layers("CartPole-v1", "ppo", path=path)]
    assert labels[-1] == (
        "defaults.yaml CartPole-v1 entry: rl-baselines3-zoo hyperparams/ppo.yml CartPole-v1"
    )
    with pytest.raises(ConfigError, match="optimes has none"):
        defaults_layers("CartPole-v1", "optimes", path=path)


def test_a_record_of_an_earlier_version_is_read_with_the_network_it_trained(
    tmp_path: Path,
) -> None:
    """Before RL networks were their own, a null net_arch meant the policy section's sizes."""
    from harness.config import complete_config
    from harness.legacy_policy import legacy_sb3_fields

    config = complete_config({"algo": "a2c", "env": "CartPole", "seed": 0, "workers": 1})
    config["policy"] = {**config["policy"], "kind": "mlp", "hidden_sizes": [16]}
    config["params"] = {**config["params"], "net_arch": None, "activation": None}
    fields = legacy_sb3_fields(tmp_path, config)
    assert fields["policy_kwargs"]["net_arch"] == {"pi": [16], "vf": [16]}
    assert fields["policy_kwargs"]["activation_fn"] == "Tanh"
