"""Kubeconfig files merged as kubectl merges $KUBECONFIG, and turned into credentials."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
import yaml

from crdscale.cli.common import resolve_kubeconfig
from crdscale.cluster import kubeconfig
from crdscale.cluster.auth import ExecAuthenticator, TokenFileAuthenticator
from crdscale.cluster.clients import read_credentials
from crdscale.cluster.kubeconfig import KubeconfigFiles
from crdscale.errors import UsageError


def _write(path: Path, *, clusters=(), users=(), contexts=(), current: str | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters],
        "users": [{"name": n, "user": u} for n, u in users],
        "contexts": [{"name": n, "context": c} for n, c in contexts],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def _files(*paths: Path) -> KubeconfigFiles:
    return KubeconfigFiles.parse(os.pathsep.join(str(p) for p in paths))


# Each case: files as (dir, clusters, users, contexts, current-context), the context asked for,
# then the (context, server, token) kubectl would use.
A = (
    "a",
    [("c1", {"server": "https://a1"}), ("shared", {"server": "https://a-shared"})],
    [("u1", {"token": "ta"}), ("shared", {"token": "a-shared"})],
    [("ctx-a", {"cluster": "shared", "user": "shared"})],
    "",
)
B = (
    "b",
    [("shared", {"server": "https://b-shared"}), ("c2", {"server": "https://b2"})],
    [("shared", {"token": "b-shared"}), ("u2", {"token": "tb"})],
    [("ctx-a", {"cluster": "c2", "user": "u2"}), ("ctx-b", {"cluster": "c2", "user": "u2"})],
    "ctx-b",
)
C = ("c", [], [], [("ctx-c", {"cluster": "c1", "user": "u1"})], "ctx-c")

MERGE_CASES = [
    # first file to set a name wins: ctx-a, cluster "shared" and user "shared" all come from A
    pytest.param([A, B], "ctx-a", ("ctx-a", "https://a-shared", "a-shared"), id="first-name-wins"),
    # A sets no current-context: B's is used, and B's ctx-b points at B's entries
    pytest.param([A, B], None, ("ctx-b", "https://b2", "tb"), id="current-context-from-first-setting-it"),
    # B's current-context wins over C's, which comes later
    pytest.param([A, B, C], None, ("ctx-b", "https://b2", "tb"), id="later-current-context-ignored"),
    # a context from C may use a cluster and user defined in A
    pytest.param([C, A], None, ("ctx-c", "https://a1", "ta"), id="entries-combine-across-files"),
    # a context in a later file never replaces an earlier one of the same name
    pytest.param([B, A], "ctx-a", ("ctx-a", "https://b2", "tb"), id="order-decides"),
]


@pytest.mark.parametrize("specs,context,expected", MERGE_CASES)
def test_merge_follows_kubectl(tmp_path, specs, context, expected):
    paths = [
        _write(tmp_path / d / "config", clusters=cl, users=us, contexts=cx, current=cur or None)
        for d, cl, us, cx, cur in specs
    ]
    selection = kubeconfig.select(kubeconfig.load(_files(*paths)), context)
    server, creds = read_credentials(_files(*paths), context)
    assert (selection.context, server, creds.headers["Authorization"]) == (
        expected[0],
        expected[1],
        f"Bearer {expected[2]}",
    )


def test_relative_paths_resolve_against_the_file_that_defined_the_entry(tmp_path):
    (tmp_path / "one" / "ca.crt").parent.mkdir(parents=True)
    (tmp_path / "one" / "ca.crt").write_text("CA")
    cluster_file = _write(
        tmp_path / "one" / "clusters", clusters=[("c", {"server": "https://x", "certificate-authority": "ca.crt"})]
    )
    user_file = _write(
        tmp_path / "two" / "sub" / "users",
        users=[
            (
                "u",
                {
                    "client-certificate": "../pki/u.crt",
                    "client-key": "/abs/u.key",
                    "tokenFile": "token",
                    "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/plugin"},
                },
            ),
            ("v", {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}),
        ],
        contexts=[("ctx", {"cluster": "c", "user": "u"})],
        current="ctx",
    )
    merged = kubeconfig.load(_files(cluster_file, user_file))
    user = merged["users"]["u"]
    assert merged["clusters"]["c"]["certificate-authority"] == str(tmp_path / "one" / "ca.crt")
    assert user["client-certificate"] == str(tmp_path / "two" / "sub" / "../pki/u.crt")
    assert user["client-key"] == "/abs/u.key"
    assert user["tokenFile"] == str(tmp_path / "two" / "sub" / "token")
    assert user["exec"]["command"] == str(tmp_path / "two" / "sub" / "./bin/plugin")
    assert merged["users"]["v"]["exec"]["command"] == "aws"  # a bare name is looked up on $PATH


def test_missing_files_in_a_list_are_skipped_but_not_an_explicit_one(tmp_path):
    real = _write(
        tmp_path / "config",
        clusters=[("c", {"server": "https://x"})],
        contexts=[("ctx", {"cluster": "c"})],
        current="ctx",
    )
    assert read_credentials(_files(tmp_path / "missing", real))[0] == "https://x"
    with pytest.raises(UsageError, match="kubeconfig not found"):
        read_credentials(tmp_path / "missing")
    with pytest.raises(UsageError, match="no kubeconfig file exists"):
        read_credentials(_files(tmp_path / "missing", tmp_path / "gone"))


@pytest.mark.parametrize(
    "value,paths,explicit",
    [
        ("/k/config", ["/k/config"], True),
        ("/k/a:/k/b", ["/k/a", "/k/b"], False),
        ("/k/a::/k/b:/k/a", ["/k/a", "/k/b"], False),  # empty entries ignored, duplicates read once
        ("/k/a:", ["/k/a"], False),
    ],
)
def test_parse(value, paths, explicit):
    files = KubeconfigFiles.parse(value)
    assert [str(p) for p in files.paths] == paths and files.explicit is explicit


@pytest.mark.parametrize(
    "doc,message",
    [
        (
            {"clusters": [{"name": "c", "cluster": {"server": "s"}}, {"name": "c", "cluster": {"server": "t"}}]},
            "duplicate name 'c' in 'clusters'",
        ),
        (
            {"current-context": "nope", "contexts": [{"name": "x", "context": {"cluster": "c"}}]},
            r"context 'nope' not found in .* \(contexts: x\)",
        ),
        ({"contexts": [{"name": "x", "context": {"cluster": "c"}}]}, "has no current-context"),
        (
            {"current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "c"}}]},
            "names cluster 'c', which is not defined",
        ),
        (
            {
                "current-context": "x",
                "clusters": [{"name": "c", "cluster": {"server": "s"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            },
            "names user 'u'",
        ),
        (
            {
                "current-context": "x",
                "clusters": [{"name": "c", "cluster": {"server": "s"}}],
                "users": [{"name": "u", "user": {"auth-provider": {"name": "gcp"}}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            },
            "auth-provider 'gcp' is not supported",
        ),
        (
            {
                "current-context": "x",
                "clusters": [{"name": "c", "cluster": {"server": "s"}}],
                "users": [
                    {"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}}}
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            },
            "interactiveMode .* required",
        ),
    ],
)
def test_unusable_kubeconfigs_give_one_line_errors(tmp_path, doc, message):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(UsageError, match=message) as err:
        read_credentials(path)
    assert "\n" not in str(err.value)


def test_data_fields_become_private_files_and_exec_or_token_file_users_get_an_authenticator(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    key = base64.b64encode(b"KEY").decode()
    path = _write(
        tmp_path / "config",
        clusters=[("c", {"server": "https://x", "certificate-authority-data": base64.b64encode(b"CA").decode()})],
        users=[
            ("certs", {"client-certificate-data": base64.b64encode(b"CRT").decode(), "client-key-data": key}),
            ("exec", {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "plugin"}}),
            ("file", {"tokenFile": "token"}),
        ],
        contexts=[
            ("certs", {"cluster": "c", "user": "certs"}),
            ("exec", {"cluster": "c", "user": "exec"}),
            ("file", {"cluster": "c", "user": "file"}),
        ],
        current="certs",
    )
    _, creds = read_credentials(path)
    assert Path(creds.verify).read_bytes() == b"CA"
    assert Path(creds.cert[1]).read_bytes() == b"KEY"
    assert stat.S_IMODE(os.stat(creds.cert[1]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(creds.cert[1]).parent).st_mode) == 0o700
    assert creds.authenticator is None and "Authorization" not in creds.headers
    _, creds = read_credentials(path, "exec")
    assert isinstance(creds.authenticator, ExecAuthenticator)
    assert creds.authenticator.plugin.interactive_mode == "IfAvailable"  # v1beta1's default
    _, creds = read_credentials(path, "file")
    assert isinstance(creds.authenticator, TokenFileAuthenticator)
    assert creds.current_auth().headers["Authorization"] == "Bearer from-file"


def test_the_cli_merges_every_file_of_KUBECONFIG(tmp_path, monkeypatch):
    first = _write(tmp_path / "a", clusters=[("c", {"server": "https://a"})])
    second = _write(tmp_path / "b", contexts=[("ctx", {"cluster": "c"})], current="ctx")
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    monkeypatch.setattr("crdscale.cluster.local.default_kubeconfig", lambda: None)
    files = resolve_kubeconfig(None)
    assert files.paths == (first, second) and not files.explicit
    assert read_credentials(files)[0] == "https://a"
    assert files.child_env() == {"KUBECONFIG": f"{first}{os.pathsep}{second}"}


def _instances(monkeypatch, tmp_path, names_ready):
    from crdscale.cluster import local
    from crdscale.cluster.instances import InstanceInfo

    infos = [
        InstanceInfo(
            name=name,
            status="ready" if ready else "stopped",
            server=f"https://127.0.0.1:{6443 + i}",
            kubeconfig=str(_write(tmp_path / f"{name}.kubeconfig", clusters=[("c", {"server": f"https://{name}"})])),
            versions={},
            created_at="",
            processes_alive={},
        )
        for i, (name, ready) in enumerate(names_ready)
    ]
    monkeypatch.setattr(local, "list_instances", lambda: infos)
    return infos


def test_the_one_ready_local_instance_wins_and_a_stopped_one_is_not_counted(tmp_path, monkeypatch):
    infos = _instances(monkeypatch, tmp_path, [("old", False), ("mine", True)])
    assert resolve_kubeconfig(None).paths == (Path(infos[1].kubeconfig),)


def test_several_ready_local_instances_are_refused_not_guessed(tmp_path, monkeypatch):
    import pytest

    from crdscale.errors import UsageError

    _instances(monkeypatch, tmp_path, [("a", True), ("b", True)])
    with pytest.raises(UsageError, match=r"2 local instances are up \(a, b\): pass --kubeconfig"):
        resolve_kubeconfig(None)
    explicit = _write(tmp_path / "explicit", clusters=[("c", {"server": "https://x"})])
    assert resolve_kubeconfig(str(explicit)).paths == (explicit,)  # --kubeconfig settles it
