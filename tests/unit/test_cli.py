"""The ``bindery`` command as a user meets it: one module per command, the controller's knobs
declared once, one error line (never a traceback) for bad input, and the local control plane's
command found from a checkout's root without any set-up."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli import main as cli
from controller.cli.main import build_parser, main
from controller.k8s.api import Impersonation, KubeApi, kubeconfig_impersonation, load_api_client
from controller.runtime.exits import Exit
from controller.runtime.settings import FLAG, Flag, Settings, SettingsError
from harness.cluster import ClusterState
from tests.support import REPO_ROOT

# ------------------------------------------------------------------------------ the commands


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_registers_its_own_subparser() -> None:
    assert set(_commands()) == {
        "run",
        "render",
        "export",
        "import-tool",
        "uri-encode",
        "resolve",
        "ack",
        "deliver",
        "why",
    }
    for module in cli.COMMANDS:
        assert callable(module.register), module.__name__


def test_render_loads_neither_kopf_nor_the_kubernetes_client(tmp_path: Path) -> None:
    kdl = tmp_path / "dev.kdl"
    kdl.write_text('agent "dev" {\n  runtime image="example/agent:1"\n}\n')
    code = (
        "import sys\n"
        "from controller.cli.main import main\n"
        f"assert main(['render', {str(kdl)!r}]) == 0\n"
        "assert 'kopf' not in sys.modules, 'render loaded kopf'\n"
        "assert 'controller.runtime.operator' not in sys.modules\n"
        "assert 'kubernetes' not in sys.modules, 'render loaded the Kubernetes client'\n"
        "assert 'controller.session' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "kind: AgentSpec" in proc.stdout


def test_deliver_hands_every_argument_to_the_sidecars_own_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["deliver", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: bindery deliver")
    assert "--config-map CONFIG_MAP" in out
    with pytest.raises(SystemExit) as exited:
        main(["deliver", "--config-map", "dev-bindings"])
    assert exited.value.code == Exit.USAGE
    assert "the following arguments are required: --lease" in capsys.readouterr().err


# ------------------------------------------------------------------------- the settings


def _flags() -> dict[str, Flag]:
    return {f.name: f.metadata[FLAG] for f in dataclasses.fields(Settings) if FLAG in f.metadata}


def test_every_knob_of_the_settings_is_an_option_of_bindery_run() -> None:
    options = {o for action in _commands()["run"]._actions for o in action.option_strings}
    for name, flag in _flags().items():
        assert set(flag.names) <= options, name
    assert {"--leader-elect", "--standalone", "--work-scope", "-n"} <= options


def test_no_flag_given_builds_the_defaults_of_the_settings() -> None:
    built = Settings.from_args(build_parser().parse_args(["run"]), environ={})
    defaults = Settings()
    for name in _flags():
        assert getattr(built, name) == getattr(defaults, name), name
    assert built.namespaces == ()
    assert built.leader_election is True


def test_a_flag_wins_over_its_environment_variable_which_wins_over_the_default() -> None:
    env = {
        "BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS": "7",
        "BINDERY_SESSION_DELIVERY_IMAGE": "example/bindery:1",
        "POD_NAMESPACE": "bindery-system",
        "BINDERY_SESSION_SERVICE_ACCOUNT": "sessions",
    }
    parse = build_parser().parse_args
    from_env = Settings.from_args(parse(["run"]), environ=env)
    assert from_env.unacknowledged_release == 7.0
    assert from_env.delivery_image == "example/bindery:1"
    assert from_env.election_namespace == "bindery-system"
    assert from_env.session_service_account == "sessions"
    given = Settings.from_args(
        parse(
            [
                "run",
                "--unacknowledged-release-seconds=0",
                "--leader-election-namespace=ops",
                "-n",
                "a",
                "-n",
                "b",
                "--standalone",
                "--work-scope=cluster",
            ]
        ),
        environ=env,
    )
    assert given.unacknowledged_release == 0.0
    assert given.election_namespace == "ops"
    assert given.namespaces == ("a", "b")
    assert given.leader_election is False
    assert str(given.work_scope) == "cluster"


def test_a_bad_environment_variable_is_one_error_line_and_the_usage_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SettingsError, match=r"BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS='soon'"):
        Settings.from_args(
            build_parser().parse_args(["run"]),
            environ={"BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS": "soon"},
        )
    monkeypatch.setenv("BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS", "-1")
    assert main(["run"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: $BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS='-1'")
    assert "0 or more" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--workers", "0"),
        ("--metrics-port", "70000"),
        ("--resync-seconds", "nan"),
        ("--work-scope", "galaxy"),
    ],
)
def test_a_bad_flag_is_refused_by_its_knobs_parser(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", f"{flag}={value}"])
    assert exited.value.code == Exit.USAGE
    assert flag in capsys.readouterr().err


# ------------------------------------------------------------------ input, never a traceback


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "found ''"),
        ("x" * 3000, "expected at most 2048"),
        ("bad\x07value", "U+0007"),
        ("new\nline", "U+000A"),
    ],
)
def test_resolve_refuses_a_value_it_cannot_take_in_one_line(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["resolve", "--tool", "git", "--slot", "repo", value]) == Exit.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: VALUE: ")
    assert said in err
    assert len(err.strip().splitlines()) == 1


def test_resolve_refuses_an_empty_or_control_character_tool_or_slot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["resolve", "--tool", "", "--slot", "repo", "dev"]) == Exit.USAGE
    assert capsys.readouterr().err.startswith("error: --tool: expected a name")
    assert main(["resolve", "--tool", "git", "--slot", "re\x1bpo", "dev"]) == Exit.USAGE
    assert "U+001B" in capsys.readouterr().err


def test_uri_encode_reports_an_argument_that_is_not_utf8_and_goes_on() -> None:
    # As the shell passes it: the raw byte 0xff, which Python hands over as a lone surrogate.
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "uri-encode", b"x://caf\xff", "x://café"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )
    assert proc.returncode == Exit.FAILURE
    assert proc.stdout == "x://caf%C3%A9\n"
    assert proc.stderr == (
        "error: URI 1: not UTF-8 text (byte 0xff after 'x://caf'): give the URI as UTF-8 text\n"
    )


def test_uri_encode_help_says_percent_xx(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["uri-encode", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the %XX of its UTF-8 bytes; '%' is kept" in out
    assert "%%" not in out


# ----------------------------------------------------------------- the kubeconfig's user


def _kubeconfig(path: Path, user: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "dev",
                "clusters": [{"name": "local", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [
                    {"name": "other", "user": {"token": "t", "as": "mallory"}},
                    {"name": "me", "user": {"token": "t0ken", **user}},
                ],
                "contexts": [{"name": "dev", "context": {"cluster": "local", "user": "me"}}],
            }
        )
    )
    return path


def test_the_current_users_impersonation_is_read_from_the_kubeconfig(tmp_path: Path) -> None:
    path = _kubeconfig(
        tmp_path / "config",
        {
            "as": "alice",
            "as-groups": ["team-a", "team-b"],
            "as-uid": "u-1",
            "as-user-extra": {"reason/why": ["audit"]},
        },
    )
    found = kubeconfig_impersonation(str(path))
    assert found == Impersonation(
        user="alice", groups=("team-a", "team-b"), uid="u-1", extra=(("reason/why", ("audit",)),)
    )
    assert found.headers() == [
        ("Impersonate-User", "alice"),
        ("Impersonate-Group", "team-a"),
        ("Impersonate-Group", "team-b"),
        ("Impersonate-Uid", "u-1"),
        ("Impersonate-Extra-reason%2Fwhy", "audit"),
    ]
    assert kubeconfig_impersonation(str(_kubeconfig(tmp_path / "plain", {}))) == Impersonation()
    assert Impersonation().headers() == []


def test_groups_without_a_user_are_refused_as_kubectl_refuses_them(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", {"as-groups": ["team-a"]})
    with pytest.raises(Exception, match=r"kubeconfig user 'me' impersonates groups.*'as: USER'"):
        kubeconfig_impersonation(str(path))


async def test_the_controllers_client_carries_the_impersonation_into_its_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = _kubeconfig(tmp_path / "config", {"as": "alice", "as-groups": ["team-a", "team-b"]})
    monkeypatch.setenv("KUBECONFIG", str(path))
    api_client = load_api_client()
    assert api_client.impersonation.user == "alice"
    kube = KubeApi(api_client, connections=1)
    try:
        headers = kube._open().headers
        assert headers.getall("Impersonate-Group") == ["team-a", "team-b"]
        assert headers["Impersonate-User"] == "alice"
    finally:
        await kube.close()


# ------------------------------------------------------------- the local control plane's edge


def _checkout(tmp_path: Path) -> Path:
    """A checkout's root as a user has it: the venv and the harness beside each other."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in (".venv", "harness"):
        (root / name).symlink_to(REPO_ROOT / name)
    return root


def _fresh_shell(root: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(root.parent)
    return subprocess.run(
        ["bash", "-lc", script], cwd=root, env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.skipif(not (REPO_ROOT / ".venv").is_dir(), reason="needs the checkout's .venv")
def test_readmes_shell_setup_and_the_down_hint_work_from_a_fresh_shell(tmp_path: Path) -> None:
    """README's commands typed into a new login shell at the checkout's root (no PYTHONPATH),
    against the state a started control plane leaves (a real process standing in for it)."""
    root = _checkout(tmp_path)
    state_dir = root / ".cache" / "cluster"
    (state_dir / "data").mkdir(parents=True)
    (state_dir / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = subprocess.Popen(["sleep", "300"])
    ClusterState(
        state_dir=str(state_dir),
        data_dir=str(state_dir / "data"),
        kubeconfig=str(state_dir / "kubeconfig"),
        server="https://127.0.0.1:1",
        bin_dir=str(bin_dir),
        pids={"kube-apiserver": stand_in.pid},
    ).save()
    blocks = (REPO_ROOT / "README.md").read_text().split("```sh\n")[1:]
    (setup,) = [b.split("```")[0] for b in blocks if "source .venv/bin/activate" in b]
    lines = [line for line in setup.splitlines() if not line.startswith("kubectl")]
    try:
        env = _fresh_shell(
            root, "\n".join([*lines, 'echo "KUBECONFIG=$KUBECONFIG"', 'echo "PATH=$PATH"'])
        )
        assert env.returncode == 0, env.stderr
        assert f"KUBECONFIG={(state_dir / 'kubeconfig').resolve()}" in env.stdout
        assert f"PATH={bin_dir}:" in env.stdout
        down = _fresh_shell(root, "source .venv/bin/activate\npython -m harness cluster down")
        assert down.returncode == 0, down.stderr
        assert stand_in.wait(timeout=10) is not None
    finally:
        stand_in.kill()
    assert not (state_dir / "state.json").exists()
    gone = _fresh_shell(root, "source .venv/bin/activate\npython -m harness cluster env")
    assert gone.returncode == Exit.FAILURE
    assert gone.stdout == ""
    assert "no local control plane is recorded in .cache/cluster" in gone.stderr


def test_bindery_has_no_cluster_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["cluster", "env"])
    assert "invalid choice: 'cluster'" in capsys.readouterr().err
