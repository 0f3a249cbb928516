"""A hostile-input suite that finds the next bad inputs (issue 31, part 5): Hypothesis generates values for
every subcommand's flags, read from the parsers of ``crdscale.cli.main.build_parser`` (NaN, ±inf, huge,
negative, empty, unicode, NUL, over-long paths, device files), and each command line must hold:

* the exit code is one of the documented ones (crdscale.errors, argparse's 2, 130, 141);
* stderr has at most one error line (argparse's usage lines and an error's details aside), no traceback;
* nothing is written outside the outputs the command line declares, and no run directory is started.

Every subcommand's flags go through argparse (``test_every_subcommand_parses_or_refuses``); the commands
that run without a cluster, a build or minutes of work (top, generate, run --check, footprint, analyze,
status, install and clean with no cluster to find, down, recover) are run whole, in-process, in a temporary
cwd with HOME, CRDSCALE_CACHE and CRDSCALE_RUNS inside it. Damaged copies of data/reference-run are analysed
too: for now only "no traceback" is asserted (their numbers are issue 31 part 2).

Every flag of every subcommand and of every probe (``test_every_flag_parses_or_refuses``, 256 flags) and every
declared scenario key plus a name in each free-form table (``test_every_scenario_key_holds_the_property``, 78
keys: in a file, as a [matrix] axis or through --set, checked by ``run --check``) is drawn on every run, each
with its own few examples, instead of only the ones a random walk reaches.

Budget: CRDSCALE_HYPOTHESIS_EXAMPLES (default 60) examples per property (the probe subcommands' a third; per
flag and per scenario key a twentieth, at least 3): at the default about 1,150 command lines per run, the same
each run; a larger budget explores new ones, e.g. ``CRDSCALE_HYPOTHESIS_EXAMPLES=2000 pytest
tests/unit/test_hostile_inputs.py`` for a longer hunt.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from crdscale.cli.main import SUBCOMMANDS, build_parser, main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference-run"
PROFILE = REFERENCE / "profiles" / "heap-step01-crds0040.pb.gz"
SMALL_CRDS = ROOT / "tests" / "data" / "crds" / "tree"
# The feature gates of v1.37.1 and v1.28.15 as recorded from their module sources: a sandbox's cache holds
# them, so validating a gate reads no module (cold, that is a download of k8s.io/kubernetes). That the real
# reader parses the module sources is tests/integration/test_changes_check.py's.
RECORDED_GATES = ROOT / "tests" / "data" / "gates"

EXAMPLES = int(os.environ.get("CRDSCALE_HYPOTHESIS_EXAMPLES", "60"))
BUDGET = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a command may take seconds; the budget is the number of examples
    derandomize=EXAMPLES <= 60,  # the unit suite's examples are the same each run; a long hunt explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,  # nothing remembered outside the test
)

# crdscale.errors' codes, argparse's 2, Ctrl-C's 130 and SIGPIPE's 141.
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5, 6, 130, 141}

HOSTILE = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "-1e999",
    "1e308",
    "-1",
    "0",
    "-0",
    "0.0",
    "1",
    "2",
    "1e-300",
    "99999999999999999999999",
    "-99999999999999999999999",
    "0x10",
    "1_000",
    "١٢",
    "",
    " ",
    "\t",
    "é",
    "💥",
    "a=b",
    "=",
    ",",
    "string=inf",
    "string=1e308,object=1e308",
    "[",
    "(?P<",
    "-",
    "--",
    ".",
    "..",
    "/",
    "../../etc",
    "/etc/passwd",
    "/dev/zero",
    "/dev/full",
    "/dev/null",
    "/proc/nope",
    "x" * 300,
    "a\x00b",
    "/tmp/" + "d/" * 2100,
    "{tmp}/out",
    "{tmp}",
    "{profile}",
    "{reference}",
    "{crds}",
]
VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
)

# Flags that would start real work (a calibration sweep on a local cluster), left to integration tests.
NEVER = {"footprint": {"--calibrate"}, "run": {"--report"}}
# Flags that name an output file or directory: the only places a command may write.
OUTPUT_FLAGS = {
    "top": {"--table", "--callgrind", "--folded"},
    "generate": {"-o", "--output"},
    "footprint": {"--out"},
    "install": {"--out"},
    "run": {"--out"},
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


PARSERS = _subparsers()


def _options(command: str) -> list[argparse.Action]:
    return [
        a
        for a in PARSERS[command]._actions
        if a.option_strings and a.dest != "help" and not set(a.option_strings) & NEVER.get(command, set())
    ]


def _flag_values(action: argparse.Action) -> st.SearchStrategy[list[str]]:
    flag = st.sampled_from(action.option_strings)
    if action.nargs == 0:
        return flag.map(lambda f: [f])
    # Half plausible (a choice, the default, a small number), half hostile: a command line whose every value
    # is hostile stops at argparse's first refusal and never reaches the command's own checks.
    plausible = [str(c) for c in action.choices or ()]
    if action.default not in (None, False, True, argparse.SUPPRESS) and not isinstance(action.default, list):
        plausible.append(str(action.default))
    plausible += ["1", "2", "0.5", "{tmp}/out"]
    values = st.one_of(st.sampled_from(plausible), VALUES)
    return st.tuples(flag, values).map(list)


def _command_line(command: str, prefix: list[str], positionals: st.SearchStrategy) -> st.SearchStrategy:
    options = _options(command)
    flags = st.lists(st.sampled_from(options).flatmap(_flag_values), max_size=4) if options else st.just([])
    return st.tuples(positionals, flags).map(lambda pf: [command, *prefix, *pf[0], *sum(pf[1], [])])


def _paths(*good: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(good) | VALUES, min_size=1, max_size=2)


# The commands run whole, each with what keeps it off the network and off a build: `run` only checks,
# install/clean/probe find no cluster (no kubeconfig, no local instance), analyze works on a copy.
RUNNABLE = {
    "top": ([], _paths("{profile}").map(lambda p: p[:1])),
    "generate": (["-g", "1", "-c", "3"], st.just([])),
    "run": (["--check"], st.lists(st.sampled_from(["{scenario}"]) | VALUES, max_size=1)),
    "footprint": ([], _paths("{crds}")),
    "analyze": ([], _paths("{run}").map(lambda p: p[:1])),
    "status": ([], st.lists(VALUES, max_size=1)),
    "install": ([], _paths("{crds}")),
    "clean": (["--dry-run"], st.just([])),
    "down": ([], st.lists(VALUES, max_size=1)),
    "recover": ([], _paths("{run}").map(lambda p: p[:1])),
}


def _tree(root: Path, skip: set[Path]) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (outside ``skip``) with its size and mtime."""
    found = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in files:
            path = here / name
            if path in skip:
                continue
            try:
                stat = path.lstat()
            except OSError:
                continue
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


@contextlib.contextmanager
def _sandbox(copy_run: bool = True):
    """A temporary cwd with HOME, CRDSCALE_CACHE and CRDSCALE_RUNS inside it and no $KUBECONFIG;
    a copy of the reference run without its derived folders (unless not ``copy_run``)."""
    saved_cwd, saved_env = os.getcwd(), dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="crdscale-hostile-") as tmp:
        tmp = Path(tmp)
        for sub in ("home", "cache", "runs"):
            (tmp / sub).mkdir()
        shutil.copytree(RECORDED_GATES, tmp / "cache" / "feature-gates")
        run = tmp / "run"
        if copy_run:
            shutil.copytree(REFERENCE, run, ignore=shutil.ignore_patterns("analysis", "report", "notebooks"))
        os.environ.update(HOME=str(tmp / "home"), CRDSCALE_CACHE=str(tmp / "cache"), CRDSCALE_RUNS=str(tmp / "runs"))
        os.environ.pop("KUBECONFIG", None)
        os.chdir(tmp)
        try:
            yield tmp, run
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


def _fill(argv: list[str], tmp: Path, run: Path) -> list[str]:
    names = {
        "{tmp}": str(tmp),
        "{profile}": str(PROFILE),
        "{reference}": str(REFERENCE),
        "{crds}": str(SMALL_CRDS),
        "{run}": str(run),
        "{scenario}": str(ROOT / "data" / "reference.toml"),
    }
    out = []
    for arg in argv:
        for key, value in names.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


def _run(argv: list[str]) -> tuple[int | None, str, BaseException | None]:
    """``main(argv)`` in-process: its exit code (argparse's SystemExit included), stderr, and any other exception."""
    err, out = io.StringIO(), io.StringIO()
    code, raised = None, None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - any other exception is the finding
            raised = exc
    return code, err.getvalue(), raised


def _check(argv: list[str], code, stderr: str, raised) -> None:
    shown = " ".join(repr(a) if not a or " " in a else a for a in argv)[:500]
    assert raised is None, f"crdscale {shown}: raised {type(raised).__name__}: {raised}"
    assert code in DOCUMENTED_EXITS, f"crdscale {shown}: exit {code}\n{stderr}"
    assert "Traceback (most recent call last)" not in stderr, f"crdscale {shown}:\n{stderr}"
    errors = [line for line in stderr.splitlines() if line.startswith("crdscale") and "error: " in line]
    if code == 0:
        assert not errors, f"crdscale {shown}: exit 0 with {errors}"
    elif code in (130, 141):
        pass
    else:
        assert len(errors) == 1, f"crdscale {shown}: exit {code} with {len(errors)} error lines:\n{stderr}"


def _declared_outputs(argv: list[str], command: str, tmp: Path) -> set[Path]:
    declared = {tmp / "home", tmp / "cache"}
    flags = OUTPUT_FLAGS.get(command, set())
    for flag, value in zip(argv, argv[1:]):
        if flag in flags:
            path = Path(value) if Path(value).is_absolute() else tmp / value
            declared.add(path)
            declared.add(path.parent / f".{path.name}.lock")
    return declared


def _written_outside(before: dict, after: dict, declared: set[Path], tmp: Path) -> list[str]:
    changed = [name for name in after if before.get(name) != after[name]]
    return [
        name
        for name in changed
        if not any((tmp / name) == d or d in (tmp / name).parents for d in declared)
        and not name.startswith("run/analysis/")  # analyze writes its run's analysis/: declared
    ]


@BUDGET
@given(data=st.data())
def test_every_subcommand_parses_or_refuses(data):
    """Every subcommand's flags with hostile values through argparse and main's dispatch (the command's
    ``run`` replaced by a stub): a parsed value or argparse's one error line, exit 2, never a traceback."""
    command = data.draw(st.sampled_from(sorted(SUBCOMMANDS)), label="command")
    if command == "probe":
        return  # its own subparsers, one per probe: walked by test_probe_subcommands_parse_or_refuse
    positionals = [
        a for a in PARSERS[command]._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]
    argv = data.draw(_command_line(command, [], st.lists(VALUES, min_size=len(positionals), max_size=len(positionals))))
    module = __import__(f"crdscale.cli.{SUBCOMMANDS[command]}", fromlist=["Command"])
    original = module.Command.run
    module.Command.run = staticmethod(lambda _args: 0)
    try:
        code, stderr, raised = _run(argv)
    finally:
        module.Command.run = original
    _check(argv, code, stderr, raised)


@settings(BUDGET, max_examples=max(EXAMPLES // 3, 10))
@given(data=st.data())
def test_probe_subcommands_parse_or_refuse(data):
    probe_parser = PARSERS["probe"]
    action = next((a for a in probe_parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if action is None:
        pytest.skip("probe has no subcommands")
    name = data.draw(st.sampled_from(sorted(action.choices)), label="probe")
    sub = action.choices[name]
    options = [a for a in sub._actions if a.option_strings and a.dest != "help"]
    flags = data.draw(st.lists(st.sampled_from(options).flatmap(_flag_values), max_size=4)) if options else []
    argv = ["probe", name, *sum(flags, [])]
    module = __import__("crdscale.cli.probe", fromlist=["Command"])
    original = module.Command.run
    module.Command.run = staticmethod(lambda _args: 0)
    try:
        code, stderr, raised = _run(argv)
    finally:
        module.Command.run = original
    _check(argv, code, stderr, raised)


@BUDGET
@given(data=st.data())
def test_commands_run_whole_hold_the_property(data):
    """The runnable commands with hostile flags, run in-process: documented exit, one error line, no
    traceback, nothing written outside the declared outputs, no run directory when validation failed."""
    command = data.draw(st.sampled_from(sorted(RUNNABLE)), label="command")
    prefix, positionals = RUNNABLE[command]
    template = data.draw(_command_line(command, prefix, positionals), label="argv")
    with _sandbox() as (tmp, run):
        argv = _fill(template, tmp, run)
        skip = {tmp / "home", tmp / "cache"}
        before = _tree(tmp, skip)
        code, stderr, raised = _run(argv)
        _check(argv, code, stderr, raised)
        after = _tree(tmp, skip)
        outside = _written_outside(before, after, _declared_outputs(argv, command, tmp), tmp)
        assert not outside, f"crdscale {argv}: wrote {outside[:5]}"
        if code != 0:
            assert not any((tmp / "runs").iterdir()), f"crdscale {argv}: exit {code} left a run directory"


def test_the_committed_data_is_untouched_by_the_suite():
    """The suite reads data/ (the reference runs) in place for top and footprint: nothing there changed."""
    assert not (REFERENCE / "analysis-hostile").exists()


# --------------------------------------------------------------------------
# Damaged run directories: mutated copies of the reference run
# --------------------------------------------------------------------------


def _profiles(run: Path) -> list[Path]:
    return sorted((run / "profiles").glob("heap-step*-crds*.pb.gz"))


def _identical_profiles(run: Path) -> None:
    first, *rest = _profiles(run)
    for path in rest:
        shutil.copyfile(first, path)


def _one_profile_twice(run: Path) -> None:
    profiles = _profiles(run)
    shutil.copyfile(profiles[1], profiles[2])


def _steps_swapped(run: Path) -> None:
    profiles = _profiles(run)
    a, b = profiles[1], profiles[3]
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)


def _series(run: Path, edit) -> None:
    import pandas as pd

    path = run / "metrics" / "series.parquet"
    frame = pd.read_parquet(path)
    edit(frame).to_parquet(path, index=False)


def _all_nan_series(run: Path) -> None:
    _series(run, lambda f: f.assign(value=float("nan")))


def _inf_series(run: Path) -> None:
    _series(run, lambda f: f.assign(value=float("inf")))


def _duplicated_rows(run: Path) -> None:
    import pandas as pd

    _series(run, lambda f: pd.concat([f, f.assign(value=f["value"] * 10)], ignore_index=True))


def _empty_series(run: Path) -> None:
    _series(run, lambda f: f.iloc[0:0])


def _falling_crd_count(run: Path) -> None:
    profiles = _profiles(run)
    profiles[-1].rename(profiles[-1].with_name("heap-step09-crds0020.pb.gz"))


def _manifest_says_failed(run: Path) -> None:
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["status"] = "banana"
    path.write_text(json.dumps(manifest))


def _manifest_not_an_object(run: Path) -> None:
    (run / "manifest.json").write_text("[1, 2]")


def _events_garbage(run: Path) -> None:
    (run / "events.jsonl").write_bytes(bytes(range(256)))


def _profile_is_a_directory(run: Path) -> None:
    path = _profiles(run)[1]
    path.unlink()
    path.mkdir()


def _profile_truncated(run: Path) -> None:
    path = _profiles(run)[1]
    path.write_bytes(path.read_bytes()[:100])


DAMAGE = {
    "profiles-byte-identical": _identical_profiles,
    "one-profile-twice": _one_profile_twice,
    "steps-swapped": _steps_swapped,
    "series-all-nan": _all_nan_series,
    "series-all-inf": _inf_series,
    "series-duplicated-rows-x10": _duplicated_rows,
    "series-no-rows": _empty_series,
    "crd-count-falls": _falling_crd_count,
    "manifest-status-unknown": _manifest_says_failed,
    "manifest-a-list": _manifest_not_an_object,
    "events-binary": _events_garbage,
    "profile-a-directory": _profile_is_a_directory,
    "profile-truncated": _profile_truncated,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_run_never_crashes(damage, tmp_path, monkeypatch):
    """analyze -o json on a damaged copy: a number or a one-line error, never a traceback. Which of these
    still give silent wrong numbers is issue 31 part 2 (the report of this suite lists them)."""
    run = tmp_path / "run"
    shutil.copytree(REFERENCE, run, ignore=shutil.ignore_patterns("analysis", "report", "notebooks"))
    DAMAGE[damage](run)
    monkeypatch.chdir(tmp_path)
    argv = ["analyze", str(run), "--no-write", "-o", "json"]
    code, stderr, raised = _run(argv)
    _check(argv, code, stderr, raised)


# --------------------------------------------------------------------------
# Every flag of every subcommand, and every declared scenario key, each covered on every run
# --------------------------------------------------------------------------

PER_ITEM = settings(BUDGET, max_examples=max(EXAMPLES // 20, 3))


def _all_flags() -> list[tuple[str, ...]]:
    """``(command, flag)`` for every option of every subcommand, ``(probe, name, flag)`` for the probes'."""
    out = [(command, action.option_strings[-1]) for command in sorted(PARSERS) for action in _options(command)]
    probe = next((a for a in PARSERS["probe"]._actions if isinstance(a, argparse._SubParsersAction)), None)
    for name, sub in sorted((probe.choices if probe else {}).items()):
        out += [("probe", name, a.option_strings[-1]) for a in sub._actions if a.option_strings and a.dest != "help"]
    return out


ALL_FLAGS = _all_flags()


def _action(item: tuple[str, ...]) -> argparse.Action:
    parser = PARSERS[item[0]]
    if len(item) == 3:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[item[1]]
    return next(a for a in parser._actions if item[-1] in a.option_strings)


@PER_ITEM
@pytest.mark.parametrize("item", ALL_FLAGS, ids=["/".join(i) for i in ALL_FLAGS])
@given(data=st.data())
def test_every_flag_parses_or_refuses(item, data):
    """Each flag of each subcommand (and of each probe) with hostile values, through argparse and main's
    dispatch (the command's ``run`` a stub): every flag is drawn on every run, not only the ones a
    random walk reaches."""
    command = item[0]
    value = data.draw(_flag_values(_action(item)), label="flag")
    positionals = [
        a for a in PARSERS[command]._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]
    args = (
        list(item[1:2])
        if len(item) == 3
        else data.draw(st.lists(VALUES, min_size=len(positionals), max_size=len(positionals)))
    )
    argv = [command, *args, *value]
    module = __import__(f"crdscale.cli.{SUBCOMMANDS[command]}", fromlist=["Command"])
    original = module.Command.run
    module.Command.run = staticmethod(lambda _args: 0)
    try:
        code, stderr, raised = _run(argv)
    finally:
        module.Command.run = original
    _check(argv, code, stderr, raised)


def _scenario_keys() -> list[str]:
    """Every declared scenario key, and a name inside each free-form table (target.env.GOGC, ...)."""
    from crdscale.scenario.config import KEYS

    free = [
        "target.env.GOGC",
        "target.env.GOMEMLIMIT",
        "target.env.X",
        "target.feature_gates.APIServerTracing",
        "target.prometheus_jobs.apiserver",
        "probes.options.discovery.sweep",
    ]
    return [k.name for k in KEYS] + free


SCENARIO_KEYS = _scenario_keys()

# TOML values: the hostile ones of HOSTILE as TOML, and of every TOML type.
TOML_VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "+inf",
            "1e308",
            "-1",
            "0",
            "-0.0",
            "1e-300",
            "9223372036854775807",
            "-9223372036854775808",
            '""',
            '" "',
            '"💥"',
            '"a\\u0000b"',
            '"' + "x" * 300 + '"',
            '"/proc/nope"',
            '"/etc/passwd"',
            '"/dev/zero"',
            '"../../etc"',
            '"{tmp}/out"',
            '"-"',
            '"--"',
            '"--etcd-servers=http://x"',
            '"a=b"',
            '"generate"',
            '"1.37.1"',
            '"kubeconfig"',
            "true",
            "false",
            "[]",
            "[1, 2]",
            '["", "💥"]',
            "[nan]",
            "{}",
            "{ a = 1 }",
            "1979-05-27T07:32:00Z",
        ]
    ),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr).map(lambda r: r.replace("inf", "inf")),
    # No "/" or "..": a path to / or to the temporary directory's parent would be walked as a CRD tree.
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), max_size=12)
    .filter(lambda t: t.strip(". ") != "")
    .map(lambda t: json.dumps(t)),
)


def _scenario_text(key: str, value: str, as_axis: bool) -> str:
    if as_axis:
        return f'[matrix]\n"{key}" = [{value}]\n'
    section, _, name = key.rpartition(".")
    return f"{name} = {value}\n" if not section else f"[{section}]\n{json.dumps(name)} = {value}\n"


@PER_ITEM
@pytest.mark.parametrize("key", SCENARIO_KEYS)
@given(data=st.data())
def test_every_scenario_key_holds_the_property(key, data, monkeypatch):
    """Each declared scenario key with hostile TOML values, in a file, as a [matrix] axis or through --set,
    checked by ``run --check``: documented exit, one error line, no traceback, nothing written, no run
    directory. The Go module proxy is not asked (answers "could not ask"), nor are module sources read: the
    feature gates are the recorded lists (RECORDED_GATES)."""
    from crdscale.cluster import buildable, patches
    from crdscale.errors import UsageError

    def no_sources(module, version, **_kw):
        raise UsageError(f"{module} {version} is not in the Go module cache")

    monkeypatch.setattr(buildable, "ask_proxy", lambda *a, **k: buildable.ModuleAnswer(None, "not asked in tests"))
    monkeypatch.setattr(patches, "module_source", no_sources)
    value = data.draw(TOML_VALUES, label="value")
    how = data.draw(st.sampled_from(["file", "axis", "set"]), label="how")
    with _sandbox(copy_run=False) as (tmp, run):
        value = _fill([value], tmp, run)[0]
        if how == "set":
            argv = ["run", "--check", "--set", f"{key}={value}"]
        else:
            path = tmp / "s.toml"
            path.write_text(_scenario_text(key, value, how == "axis"))
            argv = ["run", "--check", str(path)]
        skip = {tmp / "home", tmp / "cache"}
        before = _tree(tmp, skip)
        code, stderr, raised = _run(argv)
        _check(argv, code, stderr, raised)
        after = _tree(tmp, skip)
        outside = _written_outside(before, after, {tmp / "home", tmp / "cache"}, tmp)
        assert not outside, f"crdscale {argv}: wrote {outside[:5]}"
        assert not any((tmp / "runs").iterdir()), f"crdscale {argv}: left a run directory"
        if how != "set" and code == 0:  # --set reads a bare word as a string: only a file's value has a type
            wrong = _wrong_type(key, value)
            assert not wrong, f"crdscale {argv}: exit 0 with {key} = {value} ({wrong})"


def _wrong_type(key: str, text: str) -> str | None:
    """Why a file's ``key = text`` can never be right (a value of another type than the key declares, or a
    non-finite number), or None. Such a value must be refused, not run with."""
    import math

    import tomllib

    from crdscale.scenario.config import declared_type

    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return None  # not TOML: the file's refusal is the parser's
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    declared = declared_type(key)
    if declared is None or value is None:
        return None
    types = declared if isinstance(declared, tuple) else (declared,)
    if isinstance(value, bool) and bool not in types:
        return f"a boolean for {declared}"
    if not isinstance(value, types):
        return f"{type(value).__name__} for {declared}"
    return None
