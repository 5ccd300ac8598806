"""The relaunch boundary: trajectory hashes, and launch / keep / relaunch decisions."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.domain.launch import (
    LaunchAction,
    Launched,
    LaunchNotice,
    launch_record,
    plan_launch,
    plan_session,
    trajectory_hash,
)
from controller.domain.models import EnvVar, Runtime

BASE: dict[str, Any] = {
    "image": "ghcr.io/example/agent:1.0",
    "command": ["agent"],
    "args": ["--serve"],
    "env": [{"name": "LOG_LEVEL", "value": "info"}],
    "model": "model-a",
    "instructions": "be careful",
}


def runtime(**changes: Any) -> Runtime:
    return Runtime.model_validate({**BASE, **changes})


# ------------------------------------------------------------------------------- trajectory_hash


def test_hash_is_prefixed_sha256_hex() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", trajectory_hash(runtime()))


def test_hash_is_stable_across_key_order() -> None:
    reordered = Runtime.model_validate(dict(reversed(list(BASE.items()))))
    assert trajectory_hash(reordered) == trajectory_hash(runtime())


def test_hash_is_stable_across_equal_runtimes_and_defaults() -> None:
    explicit = Runtime(image="img", command=[], args=[], env=[], model="", instructions="")
    assert trajectory_hash(explicit) == trajectory_hash(Runtime(image="img"))
    assert trajectory_hash(Runtime.model_validate({"image": "img"})) == trajectory_hash(
        Runtime(image="img")
    )
    # snake_case and camelCase construction give the same runtime
    env = [EnvVar(name="A", value="1")]
    assert trajectory_hash(Runtime(image="img", env=env)) == trajectory_hash(
        Runtime.model_validate({"image": "img", "env": [{"name": "A", "value": "1"}]})
    )


def test_hash_is_a_known_value() -> None:
    """Pinned: a silent change of the hash would relaunch (or mark drifted) every session."""
    assert trajectory_hash(Runtime(image="img")) == (
        "sha256:"
        + hashlib.sha256(
            b'{"args":[],"command":[],"env":[],"image":"img","instructions":"","model":""}'
        ).hexdigest()
    )


def test_hash_of_a_runtime_without_pod_settings_is_what_it_was_before_they_existed() -> None:
    """Pinned to the values the controller computed before spec.runtime gained pod settings
    (resources, security contexts, service account, scheduling, pull secrets): a runtime that
    sets none of them must keep its hash, or every session shows drift after an upgrade."""
    assert trajectory_hash(runtime()) == (
        "sha256:97b5a06a07d32024b9d82cc490a177c7e9f94d9c3c479a1aa5a88764c67f7984"
    )
    assert trajectory_hash(Runtime(image="img")) == (
        "sha256:89be82965c9286ef1d7c2f1e6dedb1b8f045b38e976fe705bdbef508c381ef63"
    )


@pytest.mark.parametrize(
    "empty",
    [
        {"resources": {}},
        {"resources": {"requests": {}, "limits": {}}},
        {"securityContext": {}},
        {"containerSecurityContext": {"capabilities": {}}},
        {"serviceAccountName": ""},
        {"nodeSelector": {}},
        {"tolerations": []},
        {"imagePullSecrets": []},
    ],
    ids=lambda c: next(iter(c)),
)
def test_empty_pod_settings_are_no_settings(empty: dict[str, Any]) -> None:
    """They render the same pod as an absent field, so they hash the same."""
    assert trajectory_hash(runtime(**empty)) == trajectory_hash(runtime())


@pytest.mark.parametrize(
    "changes",
    [
        {"resources": {"limits": {"memory": "1Gi"}}},
        {"resources": {"limits": {"cpu": 1}}},
        {"securityContext": {"runAsUser": 1000}},
        {"securityContext": {"runAsNonRoot": False}},
        {"containerSecurityContext": {"readOnlyRootFilesystem": True}},
        {"containerSecurityContext": {"capabilities": {"drop": []}}},
        {"serviceAccountName": "sa"},
        {"automountServiceAccountToken": True},
        {"automountServiceAccountToken": False},
        {"nodeSelector": {"kubernetes.io/arch": "arm64"}},
        {"tolerations": [{"operator": "Exists"}]},
        {"imagePullSecrets": [{"name": "creds"}]},
    ],
    ids=lambda c: f"{next(iter(c))}={next(iter(c.values()))}",
)
def test_hash_changes_with_any_pod_setting(changes: dict[str, Any]) -> None:
    assert trajectory_hash(runtime(**changes)) != trajectory_hash(runtime())


def test_cpu_one_and_cpu_string_one_are_different_trajectories() -> None:
    """The hash is of what the user wrote; the API server may canonicalize, the hash does not."""
    a = runtime(resources={"limits": {"cpu": 1}})
    b = runtime(resources={"limits": {"cpu": "1"}})
    assert trajectory_hash(a) != trajectory_hash(b)


@pytest.mark.parametrize(
    "changes",
    [
        {"image": "ghcr.io/example/agent:1.1"},
        {"command": ["agent2"]},
        {"command": []},
        {"args": ["--serve", "--verbose"]},
        {"args": []},
        {"env": [{"name": "LOG_LEVEL", "value": "debug"}]},
        {"env": [{"name": "LOG_LEVELS", "value": "info"}]},
        {"env": []},
        {"model": "model-b"},
        {"instructions": "be careful!"},
        {"instructions": ""},
    ],
    ids=lambda c: next(iter(c)),
)
def test_hash_changes_with_any_field(changes: dict[str, Any]) -> None:
    assert trajectory_hash(runtime(**changes)) != trajectory_hash(runtime())


def test_hash_depends_on_list_order() -> None:
    """Argument and environment order are meaningful to a process."""
    assert trajectory_hash(runtime(args=["a", "b"])) != trajectory_hash(runtime(args=["b", "a"]))
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert trajectory_hash(runtime(env=env)) != trajectory_hash(runtime(env=env[::-1]))


def test_hash_does_not_confuse_fields() -> None:
    """Moving a value between command and args is a different trajectory."""
    a = Runtime(image="img", command=["x"], args=[])
    b = Runtime(image="img", command=[], args=["x"])
    assert trajectory_hash(a) != trajectory_hash(b)


@given(st.text(max_size=50), st.text(max_size=50))
def test_hash_equal_iff_instructions_equal(a: str, b: str) -> None:
    ha = trajectory_hash(Runtime(image="img", instructions=a))
    hb = trajectory_hash(Runtime(image="img", instructions=b))
    assert (ha == hb) == (a == b)


# ------------------------------------------------------------------------------- plan_launch


def test_launch_when_nothing_launched() -> None:
    plan = plan_launch(runtime(), 0, None)
    assert plan.action is LaunchAction.LAUNCH
    assert plan.desired_generation == 0
    assert plan.desired_hash == trajectory_hash(runtime())
    assert plan.observed_generation is None
    assert plan.launched_hash is None
    assert plan.drift is False


def test_launch_when_nothing_launched_keeps_desired_generation() -> None:
    plan = plan_launch(runtime(), 7, None)
    assert plan.action is LaunchAction.LAUNCH
    assert plan.desired_generation == 7


def test_keep_when_generation_equal_and_runtime_unchanged() -> None:
    h = trajectory_hash(runtime())
    plan = plan_launch(runtime(), 2, Launched(2, h, "2024-01-01T00:00:00Z"))
    assert plan.action is LaunchAction.KEEP
    assert plan.observed_generation == 2
    assert plan.launched_hash == h
    assert plan.drift is False


def test_keep_with_drift_when_runtime_changed_but_generation_equal() -> None:
    launched = Launched(2, trajectory_hash(runtime()))
    plan = plan_launch(runtime(image="other:2"), 2, launched)
    assert plan.action is LaunchAction.KEEP
    assert plan.drift is True
    assert plan.desired_hash == trajectory_hash(runtime(image="other:2"))
    assert plan.launched_hash == launched.trajectory_hash


@pytest.mark.parametrize("lowered_to", [0, 3, 4])
def test_relaunch_when_desired_generation_is_lowered(lowered_to: int) -> None:
    """A GitOps revert of a bump lowers relaunchGeneration: that is a change, so it relaunches."""
    launched = Launched(5, trajectory_hash(runtime()))
    plan = plan_launch(runtime(model="model-z"), lowered_to, launched)
    assert plan.action is LaunchAction.RELAUNCH
    assert plan.drift is False  # the relaunch clears it
    assert plan.observed_generation == 5
    assert plan.desired_generation == lowered_to


def test_keep_after_a_lowered_relaunch_has_happened() -> None:
    """Once the session runs the lowered generation, it is kept: exactly one relaunch."""
    h = trajectory_hash(runtime())
    assert plan_launch(runtime(), 3, Launched(3, h)).action is LaunchAction.KEEP


@pytest.mark.parametrize("raised_to", [1, 2, 100])
def test_relaunch_exactly_when_raised(raised_to: int) -> None:
    launched = Launched(0, trajectory_hash(runtime()))
    plan = plan_launch(runtime(image="new:1"), raised_to, launched)
    assert plan.action is LaunchAction.RELAUNCH
    assert plan.desired_generation == raised_to
    assert plan.observed_generation == 0
    assert plan.drift is False  # the relaunch clears it


def test_relaunch_even_when_runtime_unchanged() -> None:
    h = trajectory_hash(runtime())
    plan = plan_launch(runtime(), 1, Launched(0, h))
    assert plan.action is LaunchAction.RELAUNCH
    assert plan.drift is False


@given(st.integers(0, 50), st.integers(0, 50), st.booleans())
def test_relaunch_iff_changed(desired: int, launched_gen: int, same_runtime: bool) -> None:
    launched_rt = runtime() if same_runtime else runtime(args=["--old"])
    plan = plan_launch(runtime(), desired, Launched(launched_gen, trajectory_hash(launched_rt)))
    assert (plan.action is LaunchAction.RELAUNCH) == (desired != launched_gen)
    assert (plan.action is LaunchAction.KEEP) == (desired == launched_gen)
    assert plan.drift == (desired == launched_gen and not same_runtime)


# ------------------------------------------------------------------------------- plan_session


def test_a_session_is_planned_from_the_record_not_from_annotations() -> None:
    h = trajectory_hash(runtime())
    record = Launched(5, h, "t")
    tampered = Launched(99, h, "t")
    plan = plan_session(runtime(), 5, record=record, annotated=tampered, exists=True)
    assert plan.action is LaunchAction.KEEP
    assert plan.notice is LaunchNotice.EDITED
    bumped = plan_session(runtime(), 6, record=record, annotated=tampered, exists=True)
    assert bumped.action is LaunchAction.RELAUNCH  # the edit did not disable relaunching


def test_a_workload_without_a_launch_record_is_adopted_as_found() -> None:
    plan = plan_session(runtime(), 2, record=None, annotated=None, exists=True)
    assert plan.action is LaunchAction.KEEP
    assert plan.notice is LaunchNotice.UNKNOWN
    assert plan.drift is True
    recorded = Launched(2, "", "")  # what status records for it
    still = plan_session(runtime(), 2, record=recorded, annotated=None, exists=True)
    assert (still.action, still.notice) == (LaunchAction.KEEP, LaunchNotice.UNKNOWN)
    changed = plan_session(runtime(), 3, record=recorded, annotated=None, exists=True)
    assert changed.action is LaunchAction.RELAUNCH


def test_a_relaunch_whose_record_was_lost_is_not_repeated() -> None:
    h = trajectory_hash(runtime())
    plan = plan_session(
        runtime(), 4, record=Launched(3, h, "t"), annotated=Launched(4, h, "u"), exists=True
    )
    assert plan.action is LaunchAction.KEEP
    assert plan.notice is LaunchNotice.NONE
    assert plan.observed_generation == 4


def test_annotations_are_adopted_when_there_is_no_record() -> None:
    h = trajectory_hash(runtime())
    plan = plan_session(runtime(), 1, record=None, annotated=Launched(1, h, "t"), exists=True)
    assert (plan.action, plan.notice) == (LaunchAction.KEEP, LaunchNotice.NONE)
    assert plan_session(runtime(), 1, record=None, annotated=None, exists=False).action is (
        LaunchAction.LAUNCH
    )


def test_when_record_and_annotations_agree_the_workloads_own_details_stand() -> None:
    old = trajectory_hash(runtime(model="model-old"))
    plan = plan_session(
        runtime(),
        3,
        record=Launched(3, old, ""),
        annotated=Launched(3, old, "2024-01-01T00:00:00Z"),
        exists=True,
    )
    assert (plan.action, plan.notice) == (LaunchAction.KEEP, LaunchNotice.NONE)
    assert plan.launched_at == "2024-01-01T00:00:00Z"  # the record kept no time; the workload did
    assert plan.drift is True


def test_the_launch_record_is_read_only_from_an_integer_generation() -> None:
    assert launch_record({}) is None
    assert launch_record({"launchedGeneration": "3"}) is None
    assert launch_record({"launchedGeneration": True}) is None  # a bool is not a generation
    assert launch_record(
        {"launchedGeneration": 3, "launchedTrajectoryHash": "sha256:x", "lastLaunchTime": "t"}
    ) == Launched(3, "sha256:x", "t")
