"""The syntax rules the CRDs enforce at admission, as the models apply them (hostile input)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.cli.main import main
from controller.domain import rules
from controller.domain.models import AgentSpecSpec, ResourceSpec

ASCII_URI_2048 = "gh://" + "a" * 2043
EMOJI_URI = "gh://" + "\N{GRINNING FACE}" * 2043  # 2,048 characters, 8,177 bytes
HOSTILE_URIS = {
    "emoji": EMOJI_URI,
    "hangul-filler": "gh://task\u3164",
    "braille-blank": "gh://\u2800task",
    "cyrillic-a": "gh://t\u0430sk",
    "zero-width-space": "gh://ta\u200bsk",
    "bidi-override": "gh://\u202etask",
    "nul": "gh://task\x00",
    "space": "gh://a task",
    "tab": "gh://a\ttask",
    "latin-e-acute": "gh://caf\u00e9",
}


def resource(**spec: Any) -> ResourceSpec:
    return ResourceSpec.model_validate({"type": "issue", "uri": "gh://1", **spec})


def test_the_longest_ascii_uri_is_2048_bytes() -> None:
    assert len(ASCII_URI_2048.encode()) == 2048
    assert resource(uri=ASCII_URI_2048).uri == ASCII_URI_2048
    with pytest.raises(ValidationError, match="is 2049 bytes long: expected at most 2048"):
        resource(uri=ASCII_URI_2048 + "a")


@pytest.mark.parametrize("uri", HOSTILE_URIS.values(), ids=HOSTILE_URIS.keys())
def test_uris_outside_printable_ascii_are_refused_with_their_encoded_form(uri: str) -> None:
    with pytest.raises(ValidationError) as caught:
        resource(uri=uri)
    (error,) = caught.value.errors()
    assert error["type"] == "bindery_rule"
    encoded = rules.percent_encoded(uri)
    assert encoded.isascii()
    assert " " not in encoded
    assert f'here "{encoded[: rules._SHOWN]}' in error["msg"]
    assert "percent-encoded" in error["msg"]
    assert "bindery uri-encode" in error["msg"]


def test_the_message_shows_invisible_characters_escaped() -> None:
    why = rules.uri_problem(HOSTILE_URIS["hangul-filler"])
    assert why is not None
    assert '"gh://task\\u3164"' in why
    assert "U+3164 (HANGUL FILLER) at character 10" in why
    assert "\u3164" not in why


def test_percent_encoding_keeps_ascii_and_existing_escapes() -> None:
    assert rules.percent_encoded("gh://t\u0430sk%20x") == "gh://t%D0%B0sk%20x"
    assert rules.percent_encoded("gh://a b") == "gh://a%20b"
    assert rules.percent_encoded(ASCII_URI_2048) == ASCII_URI_2048


def test_a_uri_needs_a_scheme() -> None:
    with pytest.raises(ValidationError, match="has no scheme"):
        resource(uri="example/project/1")


@pytest.mark.parametrize("uri", HOSTILE_URIS.values(), ids=HOSTILE_URIS.keys())
def test_agent_bindings_and_params_follow_the_same_rule(uri: str) -> None:
    with pytest.raises(ValidationError, match="printable ASCII"):
        AgentSpecSpec.model_validate({"resources": [{"name": "work", "tag": "t", "uri": uri}]})
    with pytest.raises(ValidationError, match="printable ASCII"):
        AgentSpecSpec.model_validate({"tools": [{"name": "t", "params": {"p": uri}}]})


@pytest.mark.parametrize("value", ["cfg", "team-a/cfg", "0b1e-uid", "gh://x/1", ASCII_URI_2048])
def test_params_accept_names_uids_and_uris(value: str) -> None:
    spec = AgentSpecSpec.model_validate({"tools": [{"name": "t", "params": {"p": value}}]})
    assert spec.tools[0].params == {"p": value}


@pytest.mark.parametrize("key", ["branch", "path", "example.com/owner", "a", "A.b_c-D", "x" * 63])
def test_attribute_keys_follow_the_label_key_rule(key: str) -> None:
    assert resource(attributes={key: "v"}).attributes == {key: "v"}


@pytest.mark.parametrize(
    "key",
    [
        "",
        "nul\x00",
        "\u202eevil",  # bidi override
        "\x1b[31mred",  # ANSI escape
        "has space",
        "-leading",
        "trailing.",
        "x" * 64,
        "/name",
        "Bad_Prefix/name",
        "caf\u00e9",
    ],
    ids=repr,
)
def test_hostile_attribute_keys_are_refused(key: str) -> None:
    with pytest.raises(ValidationError, match=r"attribute key .* is not valid") as caught:
        resource(attributes={key: "v"})
    (error,) = caught.value.errors()
    assert not {"\x00", "\x1b", "\u202e"} & set(error["msg"])


def test_bindery_uri_encode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["uri-encode", "gh://t\u0430sk", "gh://caf%C3%A9"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["gh://t%D0%B0sk", "gh://caf%C3%A9"]
    assert all(rules.uri_problem(line) is None for line in out)
    assert main(["uri-encode", "no scheme"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "no%20scheme\n"
    assert "has no scheme" in captured.err


# --------------------------------------------------------------------------------------------
# spec.runtime: the model refuses what the CRD refuses (tests/integration/test_crds.py)


RUNTIME_REFUSED = {
    "quantity": ({"resources": {"limits": {"memory": "1 GB"}}}, "quantity"),
    "resource-name": ({"resources": {"requests": {"CPU!": "1"}}}, "resource name"),
    "run-as-user-negative": ({"securityContext": {"runAsUser": -1}}, "greater than or equal"),
    "seccomp-localhost-without-profile": (
        {"securityContext": {"seccompProfile": {"type": "Localhost"}}},
        "localhostProfile is required",
    ),
    "seccomp-profile-without-localhost": (
        {
            "containerSecurityContext": {
                "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}
            }
        },
        "localhostProfile is required",
    ),
    "privileged-without-escalation": (
        {"containerSecurityContext": {"privileged": True, "allowPrivilegeEscalation": False}},
        "allowPrivilegeEscalation cannot be false",
    ),
    "service-account": ({"serviceAccountName": "Agent SA"}, "ServiceAccount name"),
    "node-selector-key": ({"nodeSelector": {"-bad-": "x"}}, "not a label key"),
    "node-selector-value": ({"nodeSelector": {"pool": "a b"}}, "label value"),
    "toleration-no-key-equal": (
        {"tolerations": [{"operator": "Equal", "value": "x"}]},
        "must have operator Exists",
    ),
    "toleration-exists-with-value": (
        {"tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]},
        "value must be empty",
    ),
    "toleration-seconds-without-no-execute": (
        {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]},
        "only allowed with effect NoExecute",
    ),
    "pull-secret-name": ({"imagePullSecrets": [{"name": "A_B"}]}, "Secret name"),
    "volume-without-source": ({"volumes": [{"name": "v"}]}, "exactly one of emptyDir"),
    "volume-two-sources": (
        {"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]},
        "exactly one of emptyDir",
    ),
    "volume-named-bindings": ({"volumes": [{"name": "bindings", "emptyDir": {}}]}, "reserved"),
    "volume-name": ({"volumes": [{"name": "V_1", "emptyDir": {}}]}, "DNS-1123 label"),
    "volume-host-path": (
        {"volumes": [{"name": "v", "hostPath": {"path": "/"}}]},
        "Extra inputs are not permitted",
    ),
    "mount-of-no-volume": ({"volumeMounts": [{"name": "v", "mountPath": "/v"}]}, "does not"),
    "mount-over-bindings": (
        {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "/var/run/bindery/"}],
        },
        "where the session reads its bindings",
    ),
    "mount-relative": (
        {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "v"}],
        },
        "absolute path",
    ),
    "mount-sub-path-escapes": (
        {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "a/../../etc"}],
        },
        "without '..'",
    ),
    "mount-path-twice": (
        {
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v"}, {"name": "v", "mountPath": "/v"}],
        },
        "each name and mountPath once",
    ),
    "size-limit": (
        {"volumes": [{"name": "v", "emptyDir": {"sizeLimit": "lots"}}]},
        "quantity",
    ),
}


@pytest.mark.parametrize(("runtime", "fragment"), RUNTIME_REFUSED.values(), ids=RUNTIME_REFUSED)
def test_runtime_settings_the_crd_refuses_the_model_refuses(
    runtime: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError, match=fragment):
        AgentSpecSpec.model_validate({"runtime": {"image": "img", **runtime}})


def test_a_full_runtime_reads() -> None:
    runtime = {
        "image": "img",
        "resources": {"requests": {"cpu": "250m", "example.com/gpu": 1}, "limits": {"cpu": 2}},
        "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}},
        "containerSecurityContext": {"privileged": True},
        "serviceAccountName": "runner.v1",
        "nodeSelector": {"kubernetes.io/arch": "arm64", "empty": ""},
        "tolerations": [
            {"operator": "Exists"},
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 9},
        ],
        "imagePullSecrets": [{"name": "creds"}],
        "volumes": [
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "cfg", "configMap": {"name": "agent-config", "optional": True}},
            {"name": "key", "secret": {"secretName": "agent-key"}},
            {"name": "ws", "persistentVolumeClaim": {"claimName": "ws", "readOnly": False}},
        ],
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/scratch"},
            {"name": "cfg", "mountPath": "/etc/agent", "readOnly": True},
            {"name": "key", "mountPath": "/var/run/secrets/agent", "readOnly": True},
            {"name": "ws", "mountPath": "/work", "subPath": "coder"},
            {"name": "ws", "mountPath": "/var/run/binderyx"},
        ],
    }
    spec = AgentSpecSpec.model_validate({"runtime": runtime})
    assert spec.runtime is not None
    assert spec.runtime.model_dump(by_alias=True, exclude_defaults=True) == runtime


def test_the_fast_path_agrees_with_the_character_set() -> None:
    """Every code point below U+0100, one at a time: accepted exactly when in 0x21..0x7E."""
    for code in range(0x100):
        accepted = rules.ascii_problem("uri", f"x:{chr(code)}") is None
        assert accepted == (0x21 <= code <= 0x7E), hex(code)


def test_an_empty_uri_or_parameter_says_what_is_expected() -> None:
    assert rules.uri_problem("") == (
        "expected a uri such as github-issue://example/project/123, found ''"
    )
    assert rules.param_problem("") == (
        "expected a Resource name, namespace/name, uid or URI, found ''"
    )


def test_a_parameter_is_bounded_like_a_uri_and_held_to_ascii() -> None:
    long = "x" * (rules.URI_MAX_BYTES + 1)
    assert rules.param_problem(long) == (
        f"param is {len(long)} bytes long: expected at most {rules.URI_MAX_BYTES}"
    )
    assert rules.param_problem("x" * rules.URI_MAX_BYTES) is None
    assert "contains a space at character 2" in (rules.param_problem("a b") or "")


def test_a_mount_path_may_not_climb_out() -> None:
    assert rules.mount_path_problem("/data/../etc") == (
        """mountPath "/data/../etc" is not valid: expected no '..' element"""
    )
    assert rules.mount_path_problem("/data/..x") is None
