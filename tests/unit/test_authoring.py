"""``bindery render``, ``export`` and ``import-tool``: output, every error with its position, the
round trip, and the examples (up to date, and resolving without errors)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ckdl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.authoring import examples
from controller.authoring.convert import export, render
from controller.authoring.errors import AuthoringError
from controller.authoring.kdl import quote
from controller.authoring.kdlscan import Lines, PNode, scan
from controller.authoring.manifests import dump_yaml
from controller.cli.main import main as bindery_main
from controller.domain.models import (
    AgentObject,
    AgentSpecSpec,
    ResourceObject,
    ResourceSpec,
    ResourceTypeObject,
    ResourceTypeSpec,
    ToolObject,
    ToolSpec,
    meta_from_body,
)
from controller.domain.registry import Registry

REPO = Path(__file__).resolve().parents[2]

SEED_AGENT = """\
agent "dev" {
  resource "work" _tag="github-issue" uri="github-issue://example/project/123"
  resource "source" _tag="worktree" uri="worktree://example/project/change"
  resource "worklog" _tag="axe-worklog" uri="axe-worklog://example/project/123"
  resource "delivery" _tag="ding" uri="ding://example/dev"
}
"""

SEED_MANIFEST = """\
---
apiVersion: bindery.dev/v1alpha1
kind: AgentSpec
metadata:
  name: dev
spec:
  resources:
    - name: work
      tag: github-issue
      uri: github-issue://example/project/123
    - name: source
      tag: worktree
      uri: worktree://example/project/change
    - name: worklog
      tag: axe-worklog
      uri: axe-worklog://example/project/123
    - name: delivery
      tag: ding
      uri: ding://example/dev
"""

EXTENDED = """\
agent "reviewer" {
  namespace "team-a"
  label "app.kubernetes.io/part-of" "examples"
  annotation "example.com/note" "line one\\nline \\"two\\""
  resource "work" _tag="github-pull-request" uri="github-pull-request://example/project/45"
  tool "apply-config" {
    param "output" "review-notes"
    param "config" "team-a/shared-config"
  }
  tool "comment-on-issue"
  selector {
    match-label "bindery.dev/team" "platform"
    match-expression "tier" "In" "gold" "silver"
    match-expression "archived" "DoesNotExist"
  }
  runtime image="busybox:1.36" model="example-model" {
    command "sh" "-c"
    args "echo hi; sleep 1"
    env "A" "1"
    env "B" ""
    instructions "Review.\\nBe brief.\\ttab \\u{1F600}"
  }
  relaunch-generation 3
}

agent "idle"

agent "everything-selected" {
  selector
  runtime image="busybox:1.36"
}
"""

EXTENDED_SPEC: dict[str, Any] = {
    "resources": [
        {
            "name": "work",
            "tag": "github-pull-request",
            "uri": "github-pull-request://example/project/45",
        }
    ],
    "tools": [
        {
            "name": "apply-config",
            "params": {"output": "review-notes", "config": "team-a/shared-config"},
        },
        {"name": "comment-on-issue"},
    ],
    "resourceSelector": {
        "matchLabels": {"bindery.dev/team": "platform"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
            {"key": "archived", "operator": "DoesNotExist"},
        ],
    },
    "runtime": {
        "image": "busybox:1.36",
        "command": ["sh", "-c"],
        "args": ["echo hi; sleep 1"],
        "env": [{"name": "A", "value": "1"}, {"name": "B"}],
        "model": "example-model",
        "instructions": "Review.\nBe brief.\ttab \U0001f600",
    },
    "relaunchGeneration": 3,
}

SEED_TOOL = """\
resource_slots:
  - name: repo
    resource_type: git-checkout
    access: read_write
    binding: contextual
  - name: config
    resource_type: fs-directory
    access: read_only
    binding: static
    static_resource: local/shared-config
  - name: output
    resource_type: fs-directory
    access: write_only
    binding: parameter
"""


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run ``bindery ARGS...`` in a temporary directory; return (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def _run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = bindery_main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return _run


def write(name: str, text: str) -> str:
    Path(name).write_text(text, encoding="utf-8")
    return name


def fails(run: Run, *argv: str) -> str:
    """Run a command that must fail: exit 1, nothing on stdout; return stderr."""
    code, out, err = run(*argv)
    assert (code, out) == (1, ""), err
    return err


# --------------------------------------------------------------------------------------------
# render


def test_render_seed_agent(run: Run) -> None:
    assert run("render", write("dev.kdl", SEED_AGENT)) == (0, SEED_MANIFEST, "")


def test_render_warns_when_a_uri_is_only_its_scheme(run: Run) -> None:
    """Unquoted, ``uri=github-issue://x/1`` is KDL for "github-issue:" and a // comment."""
    kdl = 'agent "dev" {\n  resource "work" _tag="github-issue" uri=github-issue://x/1\n}\n'
    code, out, err = run("render", write("dev.kdl", kdl))
    assert code == 0
    assert "uri: 'github-issue:'" in out  # still rendered: the API server accepts it
    assert err.splitlines() == [
        'dev.kdl:2:43: warning: uri "github-issue:" of resource "work" has nothing after its '
        'scheme; an unquoted uri=scheme://... is read as "github-issue:" followed by a // '
        'comment: quote it, e.g. uri="github-issue://..."'
    ]
    quoted = kdl.replace("uri=github-issue://x/1", 'uri="github-issue://x/1"')
    assert run("render", write("ok.kdl", quoted))[2] == ""


def test_render_seed_agent_as_json(run: Run) -> None:
    code, out, _ = run("render", "-o", "json", write("dev.kdl", SEED_AGENT))
    assert code == 0
    assert json.loads(out) == yaml.safe_load(SEED_MANIFEST)


def test_render_several_agents_as_json_is_a_list(run: Run) -> None:
    code, out, _ = run("render", "-o", "json", write("a.kdl", EXTENDED))
    assert code == 0
    doc = json.loads(out)
    assert (doc["apiVersion"], doc["kind"]) == ("v1", "List")
    assert [i["metadata"]["name"] for i in doc["items"]] == [
        "reviewer",
        "idle",
        "everything-selected",
    ]


def test_render_extension(run: Run) -> None:
    code, out, err = run("render", write("a.kdl", EXTENDED))
    assert (code, err) == (0, "")
    reviewer, idle, everything = yaml.safe_load_all(out)
    assert reviewer["metadata"] == {
        "name": "reviewer",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/part-of": "examples"},
        "annotations": {"example.com/note": 'line one\nline "two"'},
    }
    assert reviewer["spec"] == EXTENDED_SPEC
    AgentSpecSpec.model_validate(reviewer["spec"])
    assert idle == {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": "idle"},
        "spec": {},
    }
    assert everything["spec"] == {"resourceSelector": {}, "runtime": {"image": "busybox:1.36"}}


def test_render_several_files_and_stdin(run: Run) -> None:
    write("dev.kdl", SEED_AGENT)
    code, out, _ = run("render", "dev.kdl", "-", stdin='agent "other"\n')
    assert code == 0
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(out)] == ["dev", "other"]


def test_render_accepts_kdl_v2_and_v1_syntax(run: Run) -> None:
    v2 = (
        "agent dev {\n"
        '  resource work _tag=github-issue uri=#"github-issue://example/project/123"#\n'
        '  runtime image="busybox" { instructions """\n    one\n    two\n    """ }\n'
        "}\n"
    )
    v1 = (
        'agent "dev" {\n'
        '  resource "work" _tag="github-issue" uri=r"github-issue://example/project/123"\n'
        '  runtime image="busybox" { instructions "one\ntwo"; }\n'
        "}\n"
    )
    outs = [run("render", write(f"{n}.kdl", text)) for n, text in (("v2", v2), ("v1", v1))]
    assert outs[0] == outs[1]
    assert outs[0][0] == 0


def test_render_ignores_comments_and_slashdash(run: Run) -> None:
    text = (
        "// a comment\n"
        '/* block /* nested */ */ agent "dev" /- "dropped" {\n'
        '  resource "work" _tag="github-issue" /- uri="x:dropped" \\\n'
        '      uri="github-issue://example/project/123"  // trailing\n'
        '  /- resource "gone" _tag="x"\n'
        '  /- runtime {\n    command "x"\n  }\n'
        '  resource "source" _tag="worktree" uri="worktree://example/project/change"; '
        'resource "worklog" _tag="axe-worklog" uri="axe-worklog://example/project/123"\n'
        '  resource "delivery" _tag="ding" uri="ding://example/dev"\n'
        "}\n"
    )
    assert run("render", write("dev.kdl", text)) == (0, SEED_MANIFEST, "")


def test_render_of_input_without_an_agent_is_an_error_naming_it(run: Run) -> None:
    expected = "expected Agent Spec KDL (an agent node, docs/kdl.md)"
    assert run("render", write("empty.kdl", "// nothing yet\n")) == (
        1,
        "",
        f"empty.kdl: error: nothing to print: {expected}\n",
    )
    assert run("render", "-", stdin="") == (1, "", f"<stdin>: error: it is empty: {expected}\n")
    assert run("import-tool", write("blank.yaml", " \n")) == (
        1,
        "",
        "blank.yaml: error: it is empty: expected tool definitions (YAML with resource_slots)\n",
    )


def test_render_of_input_nested_too_deeply_is_an_error_not_a_traceback(run: Run) -> None:
    deep = "agent a " + "{ x " * 5000 + "}" * 5000 + "\n"
    code, out, err = run("render", write("deep.kdl", deep))
    assert (code, out) == (1, "")
    assert err == "deep.kdl: error: nested too deeply to read: flatten the input\n"


# --------------------------------------------------------------------------------------------
# render: every error, at its file, line and column

AGENT_NODES = "annotation, label, namespace, relaunch-generation, resource, runtime, selector, tool"

ERRORS: list[tuple[str, str, str]] = [
    (
        "unknown node at the top level",
        'agent "dev"\nagnet "x"\n',
        'a.kdl:2:1: error: unknown node "agnet" at the top level: expected agent',
    ),
    (
        "unknown node in an agent",
        'agent "dev" {\n  resources "work"\n}\n',
        f'a.kdl:2:3: error: unknown node "resources" in agent "dev": expected one of {AGENT_NODES}',
    ),
    (
        "unknown node in a tool",
        'agent "dev" {\n  tool "t" {\n    parm "a" "b"\n  }\n}\n',
        'a.kdl:3:5: error: unknown node "parm" in tool "t": expected param',
    ),
    (
        "unknown node in a runtime",
        'agent "dev" {\n  runtime image="i" {\n    entrypoint "x"\n  }\n}\n',
        'a.kdl:3:5: error: unknown node "entrypoint" in runtime: expected one of args, '
        "command, env, instructions, run-as-user",
    ),
    (
        "unknown node in a selector",
        'agent "dev" {\n  selector { matchLabel "a" "b"; }\n}\n',
        'a.kdl:2:14: error: unknown node "matchLabel" in selector: expected one of '
        "match-expression, match-label, namespaces",
    ),
    (
        "missing uri",
        'agent "dev" {\n  resource "source" _tag="worktree"\n}\n',
        'a.kdl:2:3: error: resource "source" has no uri property: expected uri=... '
        '(the resource\'s identity), as in resource "ROLE" _tag="TYPE" uri="URI"',
    ),
    (
        "missing _tag",
        'agent "dev" {\n  resource "source" uri="worktree://x"\n}\n',
        'a.kdl:2:3: error: resource "source" has no _tag property: expected _tag=... '
        '(the ResourceType of the resource), as in resource "ROLE" _tag="TYPE" uri="URI"',
    ),
    (
        "missing role",
        'agent "dev" {\n  resource _tag="t" uri="t://x"\n}\n',
        "a.kdl:2:3: error: resource is missing its role (the binding name): "
        'expected resource "ROLE" _tag="TYPE" uri="URI"',
    ),
    (
        "two work bindings",
        'agent "dev" {\n'
        '  resource "work" _tag="github-issue" uri="github-issue://example/project/1"\n'
        '  resource "work" _tag="github-issue" uri="github-issue://example/project/2"\n'
        "}\n",
        'a.kdl:3:3: error: agent "dev" has a second "work" resource (the first is at 2:3): '
        "expected zero or one work binding per agent",
    ),
    (
        "two bindings with one role",
        'agent "dev" {\n  resource "log" _tag="a" uri="a:1"\n'
        '  resource "log" _tag="a" uri="a:2"\n}\n',
        'a.kdl:3:3: error: agent "dev" has two resources with the role "log" (the first is at '
        "2:3): expected each role once",
    ),
    (
        "an integer uri",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri=123\n}\n',
        'a.kdl:2:43: error: uri of resource "work" must be a string, found integer 123: '
        'expected uri="..." (the resource\'s identity)',
    ),
    (
        "a boolean uri",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri=true\n}\n',
        'a.kdl:2:43: error: uri of resource "work" must be a string, found boolean true: '
        'expected uri="..." (the resource\'s identity)',
    ),
    (
        "a null uri",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri=#null\n}\n',
        'a.kdl:2:43: error: uri of resource "work" must be a string, found null: '
        'expected uri="..." (the resource\'s identity)',
    ),
    (
        "a uri without a scheme",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri="example/project/1"\n}\n',
        'a.kdl:2:43: error: uri "example/project/1" has no scheme: expected SCHEME:..., '
        "such as github-issue://example/project/123",
    ),
    (
        "a uri with whitespace",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri="github-issue://a b"\n}\n',
        'a.kdl:2:43: error: uri "github-issue://a b" contains a space at character 17: '
        "expected printable ASCII without spaces or control characters (RFC 3986), with every "
        'other character percent-encoded as its UTF-8 bytes, here "github-issue://a%20b" '
        "(bindery uri-encode prints the encoded form)",
    ),
    (
        "a uri with a Cyrillic lookalike letter",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri="github-issue://t\u0430sk"\n}\n',
        'a.kdl:2:43: error: uri "github-issue://t\\u0430sk" contains U+0430 (CYRILLIC SMALL '
        "LETTER A) at character 17: expected printable ASCII without spaces or control "
        "characters (RFC 3986), with every other character percent-encoded as its UTF-8 bytes, "
        'here "github-issue://t%D0%B0sk" (bindery uri-encode prints the encoded form)',
    ),
    (
        "a uri with an invisible letter",
        'agent "dev" {\n  resource "work" _tag="github-issue" uri="github-issue://\u3164"\n}\n',
        'a.kdl:2:43: error: uri "github-issue://\\u3164" contains U+3164 (HANGUL FILLER) at '
        "character 16: expected printable ASCII without spaces or control characters (RFC "
        "3986), with every other character percent-encoded as its UTF-8 bytes, here "
        '"github-issue://%E3%85%A4" (bindery uri-encode prints the encoded form)',
    ),
    (
        "a param with a non-ASCII letter",
        'agent "dev" {\n  tool "t" {\n    param "dir" "d\u00efr"\n  }\n}\n',
        'a.kdl:3:17: error: param "d\\u00efr" contains U+00EF (LATIN SMALL LETTER I WITH '
        "DIAERESIS) at character 2: expected printable ASCII without spaces or control "
        "characters (RFC 3986), with every other character percent-encoded as its UTF-8 bytes, "
        'here "d%C3%AFr" (bindery uri-encode prints the encoded form)',
    ),
    (
        "a role that is not an identifier",
        'agent "dev" {\n  resource "Work" _tag="t" uri="t:1"\n}\n',
        'a.kdl:2:12: error: resource role "Work" is not valid: expected an identifier: a '
        "lowercase letter, then lowercase letters, digits, '_' or '-', at most 63 characters",
    ),
    (
        "a tag that is not a type name",
        'agent "dev" {\n  resource "work" _tag="GitHub Issue" uri="t:1"\n}\n',
        'a.kdl:2:24: error: _tag "GitHub Issue": expected a ResourceType name, a DNS-1123 '
        "label: lowercase letters, digits and '-', starting and ending with a letter or digit, "
        "at most 63 characters",
    ),
    (
        "an agent name that is not an object name",
        'agent "Dev_1"\n',
        'a.kdl:1:7: error: agent name "Dev_1" is not a valid Kubernetes object name: expected a '
        "DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a "
        "letter or digit, at most 253 characters",
    ),
    (
        "an agent without a name",
        "agent {\n}\n",
        'a.kdl:1:1: error: agent is missing its name: expected agent "NAME" { ... }',
    ),
    (
        "an unknown property",
        'agent "dev" {\n  resource "work" tag="t" _tag="t" uri="t:1"\n}\n',
        'a.kdl:2:19: error: unknown property "tag" on resource "work": expected only _tag= '
        'and uri= (resource "ROLE" _tag="TYPE" uri="URI")',
    ),
    (
        "a children block on a resource",
        'agent "dev" {\n  resource "work" _tag="t" uri="t:1" {\n  }\n}\n',
        'a.kdl:2:38: error: resource "work" takes no children block: expected resource "ROLE" '
        '_tag="TYPE" uri="URI"',
    ),
    (
        "a type annotation",
        'agent "dev" {\n  (x)resource "work" _tag="t" uri="t:1"\n}\n',
        'a.kdl:2:6: error: type annotation "(x)" on resource: expected none',
    ),
    (
        "an extra argument",
        'agent "dev" {\n  namespace "a" "b"\n}\n',
        'a.kdl:2:17: error: unexpected argument to namespace: expected namespace "NAMESPACE"',
    ),
    (
        "a negative relaunch generation",
        'agent "dev" {\n  relaunch-generation -1\n}\n',
        "a.kdl:2:23: error: relaunch-generation is integer -1: expected a whole number >= 0 "
        "(relaunch-generation N)",
    ),
    (
        "a relaunch generation beyond int64",
        'agent "dev" {\n  relaunch-generation 9223372036854775808\n}\n',
        "a.kdl:2:23: error: relaunchGeneration 9223372036854775808: expected at most "
        "9223372036854775807",
    ),
    (
        "a string relaunch generation",
        'agent "dev" {\n  relaunch-generation "2"\n}\n',
        'a.kdl:2:23: error: relaunch-generation is string "2": expected a whole number >= 0 '
        "(relaunch-generation N)",
    ),
    (
        "two runtimes",
        'agent "dev" {\n  runtime image="a"\n  runtime image="b"\n}\n',
        'a.kdl:3:3: error: agent "dev" has a second runtime node (the first is at 2:3): '
        "expected at most one",
    ),
    (
        "a runtime without an image",
        'agent "dev" {\n  runtime model="m"\n}\n',
        "a.kdl:2:3: error: runtime has no image property: expected image=... (the container "
        'image the session runs), as in runtime image="IMAGE" model="MODEL" { command ...; '
        "args ...; env ...; instructions ... }",
    ),
    (
        "two commands",
        'agent "dev" {\n  runtime image="a" {\n    command "a"\n    command "b"\n  }\n}\n',
        "a.kdl:4:5: error: runtime has a second command node (the first is at 3:5): "
        "expected at most one",
    ),
    (
        "a bad environment variable name",
        'agent "dev" {\n  runtime image="a" {\n    env "1X" "v"\n  }\n}\n',
        'a.kdl:3:9: error: environment variable "1X": expected a name of letters, digits, '
        "'_', '-' and '.', not starting with a digit",
    ),
    (
        "two tools with one name",
        'agent "dev" {\n  tool "t"\n  tool "t"\n}\n',
        'a.kdl:3:3: error: agent "dev" uses tool "t" twice (the first is at 2:3): expected each '
        "tool once, with all its params",
    ),
    (
        "a param twice",
        'agent "dev" {\n  tool "t" {\n    param "a" "x"\n    param "a" "y"\n  }\n}\n',
        'a.kdl:4:11: error: tool "t" has a second param "a" (the first is at 3:11): expected '
        "one value per slot",
    ),
    (
        "a bad operator",
        'agent "dev" {\n  selector {\n    match-expression "k" "in" "v"\n  }\n}\n',
        'a.kdl:3:26: error: operator "in": expected one of In, NotIn, Exists, DoesNotExist',
    ),
    (
        "In without values",
        'agent "dev" {\n  selector {\n    match-expression "k" "In"\n  }\n}\n',
        "a.kdl:3:5: error: operator In needs values: expected at least one",
    ),
    (
        "a label twice",
        'agent "dev" {\n  label "a" "1"\n  label "a" "2"\n}\n',
        'a.kdl:3:9: error: label "a" is set twice (the first is at 2:9): expected each key once',
    ),
    (
        "a bad label value",
        'agent "dev" {\n  label "a" "not ok"\n}\n',
        'a.kdl:2:13: error: label "a" has value "not ok": a label value must be empty or 1 to 63 '
        "letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    ),
    # KDL syntax errors
    (
        "a property without a value",
        'agent "dev" {\n  resource "work" _tag=\n}\n',
        'a.kdl:2:24: error: KDL syntax error: expected a value after "_tag=", found the end of '
        "the line",
    ),
    (
        "an unterminated string",
        'agent "dev" {\n  resource "work _tag="t"\n}\n',
        "a.kdl:2:24: error: KDL syntax error: expected whitespace before this argument or "
        'property, found "t"',
    ),
    (
        "an unterminated string at the end",
        'agent "dev" {\n  resource "work\n}\n',
        "a.kdl:2:12: error: KDL syntax error: unterminated string: expected a closing '\"' for "
        "this string",
    ),
    (
        "an unclosed block",
        'agent "dev" {\n  resource "work" _tag="t" uri="t:1"\n',
        'a.kdl:1:13: error: KDL syntax error: this "{" is never closed: expected a matching "}"',
    ),
    (
        "a stray closing brace",
        'agent "dev" {\n}\n}\n',
        'a.kdl:3:1: error: KDL syntax error: unexpected "}": there is no children block to close',
    ),
    (
        "no space between entries",
        'agent "dev" {\n  resource "work" _tag="t"uri="t:1"\n}\n',
        "a.kdl:2:27: error: KDL syntax error: expected whitespace before this argument or "
        'property, found "u"',
    ),
    (
        "an unterminated comment",
        'agent "dev" /* {\n}\n',
        'a.kdl:1:13: error: KDL syntax error: unterminated comment: expected "*/" to close this '
        '"/*"',
    ),
    (
        "a bad number (found by ckdl)",
        'agent "dev" {\n  relaunch-generation 1abc\n}\n',
        "a.kdl:2:23: error: KDL syntax error: Error parsing property or argument",
    ),
    (
        "KDL v1 and v2 mixed",
        'agent "dev" {\n  resource "work" _tag=github-issue uri="a:b"\n  resource "x" _tag="t" '
        'uri=r"a:c"\n}\n',
        "a.kdl:3:25: error: KDL syntax error: Bare identifier not allowed here (a file is read as "
        "KDL v1 or v2, whichever its first version-specific construct is: v2 has bare-word "
        'strings and #true/#false/#null, v1 has r#"..."# raw strings and true/false/null; use '
        "one version throughout)",
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_render_error(run: Run, source: str, expected: str) -> None:
    assert fails(run, "render", write("a.kdl", source)) == expected + "\n"


def test_render_reports_every_problem_in_source_order(run: Run) -> None:
    source = (
        'agent "dev" {\n'
        '  resource "work" _tag="t" uri=1\n'
        "  bogus\n"
        '  resource "work" _tag="t" uri="t:1"\n'
        '  resource "work" _tag="t" uri="t:2"\n'
        "}\n"
    )
    assert fails(run, "render", write("a.kdl", source)).splitlines() == [
        'a.kdl:2:32: error: uri of resource "work" must be a string, found integer 1: '
        'expected uri="..." (the resource\'s identity)',
        f'a.kdl:3:3: error: unknown node "bogus" in agent "dev": expected one of {AGENT_NODES}',
        'a.kdl:5:3: error: agent "dev" has a second "work" resource (the first is at 4:3): '
        "expected zero or one work binding per agent",
    ]


def test_render_errors_across_files_print_nothing(run: Run) -> None:
    write("good.kdl", SEED_AGENT)
    write("bad.kdl", 'agent "x" {\n  oops\n}\n')
    write("again.kdl", SEED_AGENT)
    assert fails(run, "render", "good.kdl", "bad.kdl", "again.kdl").splitlines() == [
        'bad.kdl:2:3: error: unknown node "oops" in agent "x": expected one of ' + AGENT_NODES,
        'again.kdl:1:7: error: agent "dev" is defined twice (the first is at good.kdl:1:7): '
        "expected one definition per agent and namespace",
    ]


def test_same_agent_name_in_two_namespaces_is_fine(run: Run) -> None:
    source = 'agent "a" { namespace "x"; }\nagent "a" { namespace "y"; }\n'
    assert run("render", write("a.kdl", source))[0] == 0


def test_positions_count_characters_after_tricky_text(run: Run) -> None:
    source = (
        '/* ünïcödé {"} */ agent "dev" {\r\n'
        '  label "k" r#"a "quoted" }"#  /- "ignored"\r\n'
        '  /- label "x" "y"\r\n'
        '  resource "é" _tag="t" uri="t:1"\r\n'
        "}\r\n"
    )
    err = fails(run, "render", write("a.kdl", source))
    assert err.startswith('a.kdl:2:13: error: label "k" has value "a \\"quoted\\" }"')
    assert err.splitlines()[1].startswith('a.kdl:4:12: error: resource role "é" is not valid')


def test_unreadable_and_undecodable_input(run: Run) -> None:
    assert fails(run, "render", "missing.kdl") == (
        "missing.kdl: error: cannot read it: No such file or directory\n"
    )
    Path("latin1.kdl").write_bytes(b'agent "dev" {\n  label "k" "caf\xe9"\n}\n')
    assert fails(run, "render", "latin1.kdl") == (
        "latin1.kdl:2:17: error: invalid UTF-8 (byte 0xe9): expected UTF-8 text\n"
    )


# --------------------------------------------------------------------------------------------
# export, and the round trip


def test_export_seed_manifest(run: Run) -> None:
    assert run("export", write("dev.yaml", SEED_MANIFEST)) == (0, SEED_AGENT, "")


def test_render_reverse_is_export(run: Run) -> None:
    write("dev.yaml", SEED_MANIFEST)
    assert run("render", "--reverse", "dev.yaml") == run("export", "dev.yaml")
    code, out, err = run("render", "--reverse", "-o", "json", "dev.yaml")
    assert (code, out) == (2, "")
    assert "--reverse prints KDL" in err


@pytest.mark.parametrize("source", [SEED_AGENT, EXTENDED], ids=["seed", "extension"])
@pytest.mark.parametrize("output", ["yaml", "json"])
def test_render_export_render_is_a_fixed_point(run: Run, source: str, output: str) -> None:
    code, rendered, _ = run("render", "-o", output, write("a.kdl", source))
    assert code == 0
    code, kdl, err = run("export", write("a.manifest", rendered))
    assert (code, err) == (0, "")
    assert run("render", "-o", output, write("b.kdl", kdl)) == (0, rendered, "")
    code, kdl_again, _ = run("export", write("b.manifest", rendered))
    assert kdl_again == kdl


def test_export_writes_canonical_kdl(run: Run) -> None:
    code, rendered, _ = run("render", write("a.kdl", EXTENDED))
    code, kdl, _ = run("export", write("a.yaml", rendered))
    assert code == 0
    assert kdl.endswith(
        '}\n\nagent "idle"\n\n'
        'agent "everything-selected" {\n  selector\n  runtime image="busybox:1.36"\n}\n'
    )
    assert '    instructions "Review.\\nBe brief.\\ttab \U0001f600"\n' in kdl
    assert '  annotation "example.com/note" "line one\\nline \\"two\\""\n' in kdl


def test_export_of_server_objects_ignores_what_the_server_adds(run: Run) -> None:
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "bindery.dev/v1alpha1",
                "kind": "AgentSpec",
                "metadata": {
                    "name": "dev",
                    "namespace": "team-a",
                    "uid": "0b0c",
                    "resourceVersion": "42",
                    "generation": 3,
                    "creationTimestamp": "2025-01-01T00:00:00Z",
                    "managedFields": [{"manager": "kubectl"}],
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                },
                "spec": {
                    "resources": [{"name": "work", "tag": "t", "uri": "t:1"}],
                    "relaunchGeneration": 0,
                },
                "status": {"observedGeneration": 3, "conditions": []},
            }
        ],
    }
    assert run("export", "-", stdin=json.dumps(listing)) == (
        0,
        'agent "dev" {\n  namespace "team-a"\n  resource "work" _tag="t" uri="t:1"\n}\n',
        "",
    )


def test_export_errors_have_positions(run: Run) -> None:
    wrong_kind = "---\napiVersion: bindery.dev/v1alpha1\nkind: Tool\nmetadata:\n  name: t\n"
    assert fails(run, "export", write("t.yaml", wrong_kind)) == (
        "t.yaml:3:7: error: expected apiVersion bindery.dev/v1alpha1 and kind AgentSpec, "
        "found bindery.dev/v1alpha1/Tool\n"
    )
    bad_spec = (
        "apiVersion: bindery.dev/v1alpha1\nkind: AgentSpec\nmetadata:\n  name: dev\nspec:\n"
        "  resources:\n    - name: work\n      tag: t\n      uri: 7\n"
        "    - name: work\n      tag: t\n      urls: t:1\n"
    )
    assert fails(run, "export", write("s.yaml", bad_spec)).splitlines() == [
        "s.yaml:9:12: error: spec.resources[0].uri: Input should be a valid string",
        "s.yaml:10:7: error: spec.resources[1].uri: Field required",
        "s.yaml:12:7: error: spec.resources[1].urls: Extra inputs are not permitted",
    ]
    two_work = SEED_MANIFEST.replace("name: source", "name: work")
    assert fails(run, "export", write("w.yaml", two_work)) == (
        'w.yaml:11:7: error: agent "dev" has a second "work" resource (the first is at 8:7): '
        "expected zero or one work binding per agent\n"
    )
    assert fails(run, "export", write("y.yaml", "spec: [1,\n")) == (
        "y.yaml:2:1: error: YAML syntax error: while parsing a flow node expected the node "
        "content, but found '<stream end>'\n"
    )


def test_export_refuses_runtime_fields_kdl_cannot_say(run: Run) -> None:
    """Pod settings have no KDL form yet: export says so rather than silently dropping them."""
    manifest = (
        "apiVersion: bindery.dev/v1alpha1\nkind: AgentSpec\nmetadata:\n  name: dev\nspec:\n"
        "  runtime:\n    image: img\n    securityContext:\n      runAsUser: 1000\n"
        "      fsGroup: 1000\n    serviceAccountName: runner\n"
    )
    assert fails(run, "export", write("r.yaml", manifest)).splitlines() == [
        "r.yaml:8:5: error: spec.runtime.securityContext has no KDL form: exporting would drop "
        "it; keep this agent in YAML, or remove the field before exporting",
        "r.yaml:11:5: error: spec.runtime.serviceAccountName has no KDL form: exporting would "
        "drop it; keep this agent in YAML, or remove the field before exporting",
    ]


def test_run_as_user_round_trips_between_kdl_and_yaml(run: Run) -> None:
    """The one pod setting KDL says (`run-as-user UID`), so an image whose user is root can
    still run under the default runAsNonRoot."""
    kdl = 'agent "dev" {\n  runtime image="img" {\n    run-as-user 65534\n  }\n}\n'
    code, rendered, err = run("render", write("a.kdl", kdl))
    assert (code, err) == (0, "")
    assert "runAsUser: 65534" in rendered
    code, exported, err = run("export", write("a.yaml", rendered))
    assert (code, err) == (0, "")
    assert "run-as-user 65534" in exported


def test_selector_namespaces_round_trip_between_kdl_and_yaml(run: Run) -> None:
    """`namespaces` in a selector: the other namespaces it selects in (by their grants)."""
    kdl = (
        'agent "dev" {\n  selector {\n    match-label "share" "all"\n'
        '    namespaces "local" "platform"\n  }\n}\n'
    )
    code, rendered, err = run("render", write("a.kdl", kdl))
    assert (code, err) == (0, "")
    assert "namespaces:\n      - local\n      - platform" in rendered
    code, exported, err = run("export", write("a.yaml", rendered))
    assert (code, err) == (0, "")
    assert 'namespaces "local" "platform"' in exported
    twice = 'agent "dev" {\n  selector {\n    namespaces "a"\n    namespaces "b"\n  }\n}\n'
    code, _, err = run("render", write("b.kdl", twice))
    assert code != 0
    assert "namespaces is set twice" in err


def test_export_reports_a_hostile_uri_with_its_encoded_form(run: Run) -> None:
    manifest = (
        "apiVersion: bindery.dev/v1alpha1\nkind: AgentSpec\nmetadata:\n  name: dev\nspec:\n"
        "  resources:\n    - name: work\n      tag: t\n      uri: gh://t\u0430sk\n"
    )
    err = fails(run, "export", write("u.yaml", manifest))
    assert err.startswith('u.yaml:9:12: error: uri "gh://t\\u0430sk" contains U+0430 (CYRILLIC')
    assert 'here "gh://t%D0%B0sk"' in err


# --------------------------------------------------------------------------------------------
# import-tool

SEED_TOOL_MANIFEST = """\
---
apiVersion: bindery.dev/v1alpha1
kind: Tool
metadata:
  name: mixed
spec:
  resourceSlots:
    - name: repo
      resourceType: git-checkout
      access: read_write
      binding: contextual
    - name: config
      resourceType: fs-directory
      access: read_only
      binding: static
      staticResource: local/shared-config
    - name: output
      resourceType: fs-directory
      access: write_only
      binding: parameter
"""


def test_import_seed_tool_named_after_its_file(run: Run) -> None:
    assert run("import-tool", write("mixed.yaml", SEED_TOOL)) == (0, SEED_TOOL_MANIFEST, "")
    code, out, _ = run("import-tool", "-o", "json", "mixed.yaml")
    assert code == 0
    manifest = json.loads(out)
    assert manifest == yaml.safe_load(SEED_TOOL_MANIFEST)
    ToolSpec.model_validate(manifest["spec"])


def test_import_tool_defaults_and_several_documents(run: Run) -> None:
    text = (
        "name: a\ndescription: First.\nresource_slots:\n  - name: repo\n"
        "    resource_type: git-checkout\n    required: false\n    description: Where.\n"
        "---\nname: b\n"
    )
    code, out, _ = run("import-tool", write("tools.yaml", text))
    assert code == 0
    a, b = yaml.safe_load_all(out)
    assert a["spec"] == {
        "description": "First.",
        "resourceSlots": [
            {
                "name": "repo",
                "resourceType": "git-checkout",
                "access": "read_write",
                "binding": "contextual",
                "required": False,
                "description": "Where.",
            }
        ],
    }
    assert b == {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": "b"},
        "spec": {"resourceSlots": []},
    }


def test_import_tool_errors(run: Run) -> None:
    text = (
        "name: Bad_Tool\n"
        "resource_slots:\n"
        "  - name: repo\n"
        "    resourceType: git-checkout\n"
        "    access: rw\n"
        "  - name: config\n"
        "    resource_type: fs-directory\n"
        "    binding: static\n"
        "  - name: out\n"
        "    resource_type: fs-directory\n"
        "    static_resource: a\n"
        "    required: 'yes'\n"
        "  - name: dup\n"
        "    resource_type: fs-directory\n"
        "  - name: dup\n"
        "    resource_type: fs-directory\n"
        "  - name: last\n"
        "    resource_type: fs-directory\n"
        "    binding: static\n"
        "    static_resource: Not/Valid\n"
    )
    assert fails(run, "import-tool", write("t.yaml", text)).splitlines() == [
        't.yaml:1:7: error: tool name "Bad_Tool" is not a valid Kubernetes object name: expected '
        "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with "
        "a letter or digit, at most 253 characters",
        't.yaml:3:5: error: resource slot "repo" has no resource_type: expected '
        '"resource_type: ..."',
        't.yaml:4:5: error: unknown key "resourceType" (the source format is snake_case: '
        '"resource_type"): expected one of name, resource_type, access, binding, '
        "static_resource, required, description",
        't.yaml:5:13: error: access "rw": expected one of read_only, read_write, write_only',
        't.yaml:6:5: error: resource slot "config" has binding static but no static_resource: '
        'expected "static_resource: NAME" (or NAMESPACE/NAME) of a registered Resource',
        't.yaml:11:5: error: resource slot "out" has a static_resource but binding contextual: '
        "expected static_resource only with binding: static",
        't.yaml:12:15: error: resource_slots[2].required: expected true or false, found "yes"',
        't.yaml:15:11: error: slot "dup" is declared twice (the first is at 13:11): expected '
        "unique slot names",
        't.yaml:20:22: error: static_resource "Not/Valid": expected NAME or NAMESPACE/NAME of a '
        "Resource (NAME a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting "
        "and ending with a letter or digit, at most 253 characters)",
    ]


def test_import_tool_needs_a_name_when_a_file_has_several(run: Run) -> None:
    text = "resource_slots: []\n---\nname: b\n"
    assert fails(run, "import-tool", write("t.yaml", text)) == (
        't.yaml:1:1: error: this tool has no name: expected "name: ..." (only a file with one '
        "tool may omit it)\n"
    )


# --------------------------------------------------------------------------------------------
# Pieces


def test_quote_escapes_what_kdl_needs() -> None:
    assert quote('a"b\\c\nd\te\x01\u2028') == '"a\\"b\\\\c\\nd\\te\\u{1}\\u{2028}"'


def test_lines_count_crlf_once_and_columns_in_characters() -> None:
    lines = Lines("ab\r\nçd\ne")
    assert [str(lines.pos(i)) for i in (0, 4, 5, 7)] == ["1:1", "2:1", "2:2", "3:1"]


def test_authoring_error_carries_the_first_position() -> None:
    with pytest.raises(AuthoringError) as caught:
        render([("x.kdl", 'agent "dev" {\n  nope\n}\n')])
    exc = caught.value
    assert (exc.file, exc.line, exc.column) == ("x.kdl", 2, 3)
    assert exc.message.startswith('unknown node "nope"')


def test_bindery_command_has_the_authoring_subcommands(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command configures logging for the whole process; keep pytest's handlers.
    monkeypatch.setattr("controller.runtime.logs.configure", lambda *a, **k: None)
    path = tmp_path / "dev.kdl"
    path.write_text(SEED_AGENT)
    assert bindery_main(["render", str(path)]) == 0
    assert capsys.readouterr().out == SEED_MANIFEST


# --------------------------------------------------------------------------------------------
# Examples and docs


def test_generated_examples_are_up_to_date() -> None:
    stale = examples.stale(REPO)
    assert not stale, "regenerate with 'python -m controller.authoring.examples':\n" + "".join(
        stale.values()
    )


def test_examples_check_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert examples.main(["--check", "--root", str(REPO)]) == 0
    for sub in ("agents", "tools", "manifests"):
        (tmp_path / "examples" / sub).mkdir(parents=True)
        for path in (REPO / "examples" / sub).glob("*"):
            (tmp_path / path.relative_to(REPO)).write_bytes(path.read_bytes())
    kdl = tmp_path / "examples/agents/dev.kdl"
    kdl.write_text(kdl.read_text().replace("project/123", "project/124", 1))
    capsys.readouterr()
    assert examples.main(["--check", "--root", str(tmp_path)]) == 1
    assert "examples/manifests/30-agents.yaml is stale" in capsys.readouterr().err
    assert examples.main(["--root", str(tmp_path)]) == 0
    assert examples.main(["--check", "--root", str(tmp_path)]) == 0


def _example_objects() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in sorted((REPO / "examples/manifests").glob("*.yaml")):
        objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return objects


def test_example_manifests_are_namespace_less_and_valid() -> None:
    models: dict[str, Any] = {
        "ResourceType": ResourceTypeSpec,
        "Resource": ResourceSpec,
        "Tool": ToolSpec,
        "AgentSpec": AgentSpecSpec,
    }
    objects = _example_objects()
    assert {o["kind"] for o in objects} == set(models)
    for obj in objects:
        assert obj["apiVersion"] == "bindery.dev/v1alpha1"
        assert "namespace" not in obj["metadata"], obj["metadata"]
        models[obj["kind"]].model_validate(obj["spec"])


def test_every_example_agent_resolves_without_errors() -> None:
    """Load the examples into the controller's registry as if applied to one namespace."""
    registry = Registry()
    agents: list[str] = []
    tools: list[str] = []
    for obj in _example_objects():
        kind = obj["kind"]
        namespace = "" if kind == "ResourceType" else "demo"
        meta = meta_from_body(
            {
                "metadata": {
                    **obj["metadata"],
                    "namespace": namespace,
                    "uid": obj["metadata"]["name"],
                }
            }
        )
        if kind == "ResourceType":
            registry.upsert_type(ResourceTypeObject(meta=meta, spec=obj["spec"]))
        elif kind == "Resource":
            registry.upsert_resource(ResourceObject(meta=meta, spec=obj["spec"]))
        elif kind == "Tool":
            registry.upsert_tool(ToolObject(meta=meta, spec=obj["spec"]))
            tools.append(meta.key)
        else:
            registry.upsert_agent(AgentObject(meta=meta, spec=obj["spec"]))
            agents.append(meta.key)
    assert agents == ["demo/dev", "demo/reviewer"]
    for key in tools:
        assert registry.validate_tool(key).errors == []
    for obj in _example_objects():
        if obj["kind"] == "Resource":
            assert registry.validate_resource(f"demo/{obj['metadata']['name']}") == []
    for key in agents:
        resolution = registry.resolve(key)
        assert resolution.errors == [], resolution.errors
        states = {(s.tool, s.slot): s.state.value for s in resolution.slots}
        assert set(states.values()) <= {"Bound", "Deferred"}, states


def test_kdl_blocks_in_the_docs_render(run: Run) -> None:
    doc = (REPO / "docs/kdl.md").read_text()
    blocks = re.findall(r"```kdl\n(.*?)```", doc, re.S)
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        code, out, err = run("render", write(f"doc{i}.kdl", block))
        assert (code, err) == (0, "")
        assert out.startswith("---\napiVersion: bindery.dev/v1alpha1\nkind: AgentSpec\n")


# --------------------------------------------------------------------------------------------
# The position scanner agrees with ckdl on generated documents


@dataclass
class _Expected:
    """Where the generator put a node's parts (offsets), to compare with the scanner's tree."""

    name: int
    args: list[int] = field(default_factory=list)
    props: dict[str, tuple[int, int]] = field(default_factory=dict)
    children: list[_Expected] | None = None


class _Doc:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> int:
        at = self.size
        self.parts.append(text)
        self.size += len(text)
        return at


_KEYWORDS = ("true", "false", "null", "inf", "nan")
"""Words KDL reserves: never a bare identifier."""
_WORD = st.from_regex(r"[a-z][a-z0-9-]{0,5}", fullmatch=True).filter(lambda w: w not in _KEYWORDS)


def _bare(prefix: str) -> st.SearchStrategy[str]:
    """A bare identifier starting with ``prefix`` (``n`` + ``ull`` would be a keyword)."""
    return _WORD.map(lambda w: prefix + w).filter(lambda w: w not in _KEYWORDS)


_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp"), max_codepoint=0x1FFFF),
    max_size=8,
)


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(draw: st.DrawFn, v2: bool) -> str:
    common = [
        _TEXT.map(_quoted),
        st.integers(-(10**6), 10**6).map(str),
        st.just('"esc \\n \\t \\u{1F600}"'),
    ]
    if v2:
        extra = [
            # ``#"""`` opens a multi-line raw string in v2: not what this one is
            _TEXT.filter(lambda t: '"#' not in t and not (t + '"').startswith('""')).map(
                lambda t: f'#"{t}"#'
            ),
            st.sampled_from(["#true", "#false", "#null"]),
            _bare("v"),
            st.just('"""\n    one\n    two\n    """'),
        ]
    else:
        extra = [
            _TEXT.filter(lambda t: '"#' not in t).map(lambda t: f'r#"{t}"#'),
            st.sampled_from(["true", "false", "null"]),
            st.just('"two\nlines"'),
        ]
    value: str = draw(st.one_of(*common, *extra))
    return value


def _space(draw: st.DrawFn) -> str:
    space: str = draw(st.sampled_from([" ", "  ", "\t", " /* c */ ", " \\\n    ", " \\ // c\n  "]))
    return space


def _node(draw: st.DrawFn, doc: _Doc, v2: bool, depth: int) -> _Expected:
    bare = draw(st.booleans())
    name = doc.add(draw(_bare("n")) if bare else _quoted(draw(_TEXT)))
    node = _Expected(name)
    keys = iter(range(1000))
    for _ in range(draw(st.integers(0, 4))):
        doc.add(_space(draw))
        dropped = draw(st.integers(0, 4)) == 0
        if dropped:
            doc.add("/-" + draw(st.sampled_from(["", " "])))
        if draw(st.booleans()):
            key = f"k{next(keys)}"
            at = doc.add(key)
            doc.add(draw(st.sampled_from(["=", " = "])) if v2 else "=")
            value = doc.add(_value(draw, v2))
            if not dropped:
                node.props[key] = (at, value)
        else:
            at = doc.add(_value(draw, v2))
            if not dropped:
                node.args.append(at)
    if depth < 2 and draw(st.integers(0, 2)) == 0:
        if v2 and draw(st.booleans()):
            doc.add(" /- { ndropped 1 }")
        doc.add(" {" + draw(st.sampled_from(["\n", " ", "\n\n  // c\n"])))
        node.children = _nodes(draw, doc, v2, depth + 1)
        doc.add("}")
    doc.add(draw(st.sampled_from(["\n", ";", " // c\n", "\r\n"])))
    return node


def _nodes(draw: st.DrawFn, doc: _Doc, v2: bool, depth: int) -> list[_Expected]:
    nodes: list[_Expected] = []
    for _ in range(draw(st.integers(0, 3))):
        doc.add(draw(st.sampled_from(["", "  ", "\n", "/* a\nb */ ", "// c\n"])))
        dropped = draw(st.integers(0, 5)) == 0
        if dropped:
            doc.add("/- ")
        node = _node(draw, doc, v2, depth)
        if not dropped:
            nodes.append(node)
    return nodes


@st.composite
def _documents(draw: st.DrawFn) -> tuple[str, list[_Expected]]:
    doc = _Doc()
    nodes = _nodes(draw, doc, draw(st.booleans()), 0)
    return "".join(doc.parts), nodes


@given(_documents())
@settings(
    max_examples=200, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
def test_scanner_positions_match_generated_documents(case: tuple[str, list[_Expected]]) -> None:
    text, expected = case
    cdoc = ckdl.parse(text)  # the generator writes valid KDL: ckdl must accept it
    lines = Lines(text)

    def compare(pnodes: list[PNode], want: list[_Expected], cnodes: list[Any]) -> None:
        assert len(pnodes) == len(want) == len(cnodes)
        for p, w, c in zip(pnodes, want, cnodes, strict=True):
            assert p.pos == lines.pos(w.name)
            assert p.args == [lines.pos(a) for a in w.args]
            assert len(c.args) == len(w.args)
            assert {k: (v.key, v.value) for k, v in p.props.items()} == {
                k: (lines.pos(a), lines.pos(b)) for k, (a, b) in w.props.items()
            }
            assert set(c.properties) == set(w.props)
            if w.children is None:
                assert p.children is None
                assert not c.children
            else:
                assert p.children is not None
                compare(p.children, w.children, c.children)

    compare(scan(text), expected, cdoc.nodes)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('n r#"""# k=1\n', '"'),  # v1: a raw string holding one quote, not a multi-line opener
        ('n r#""x"# k=1\n', '"x'),
        ('n #"""\n  a\n  """# k=1\n', "a"),  # v2: the multi-line raw string
    ],
)
def test_the_scanner_reads_raw_strings_as_kdl_does(text: str, value: str) -> None:
    (node,) = scan(text)
    assert node.args == [Lines(text).pos(2)]  # the argument starts after "n "
    assert set(node.props) == {"k"}
    assert ckdl.parse(text).nodes[0].args == [value]


@given(
    text=st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    key=st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,5})?/[A-Za-z0-9]{1,5}", fullmatch=True),
)
@settings(max_examples=150, database=None, deadline=None)
def test_any_text_survives_the_round_trip(text: str, key: str) -> None:
    source = (
        f'agent "dev" {{\n  annotation {quote(key)} {quote(text)}\n'
        f'  runtime image="busybox" {{\n    env "V" {quote(text)}\n'
        f"    instructions {quote(text)}\n  }}\n}}\n"
    )
    manifests = render([("a.kdl", source)])
    assert manifests[0]["metadata"]["annotations"] == {key: text}
    assert (
        manifests[0]["spec"]["runtime"]["env"] == [{"name": "V", "value": text}] if text else True
    )
    for output in (dump_yaml(manifests), json.dumps(manifests[0])):
        kdl = export([("a.yaml", output)])
        assert render([("b.kdl", kdl)]) == manifests
