"""The docs site: generated pages cover the code, committed results pages are current, the README stays short.

``mkdocs build --strict`` itself runs in CI (`make docs`, called by .ci/run); these tests are the fast checks
that need no mkdocs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150


@pytest.fixture(scope="module")
def gen():
    from crdscale import docs_reference

    return docs_reference


@pytest.fixture(scope="module")
def code_pages(gen):
    return gen.code_pages()


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_resolve():
    """Relative links of the README point at files that are committed (generated reference pages are not)."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(((?!https?://)[^)#\s]+)", text)
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_committed_results_pages_are_current(gen):
    stale = gen.stale_pages()
    assert not stale, f"regenerate with `make docs` (or python scripts/gen_docs_reference.py): {stale}"


def test_cli_reference_covers_every_command_and_flag(gen, code_pages):
    page = code_pages["reference/cli.md"]
    commands = gen.cli_commands()
    from crdscale.cli.main import SUBCOMMANDS

    paths = {" ".join(path) for path, _, _ in commands}
    assert set(SUBCOMMANDS) <= paths
    for path, parser, _ in commands:
        assert f"`{' '.join(('crdscale', *path))}`" in page
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in page, f"{flag} of crdscale {' '.join(path)} missing from the CLI reference"


def test_a_new_flag_appears_without_editing_the_docs(gen, monkeypatch):
    """The reference is read from the parsers: a flag added to a command shows up by itself."""
    import crdscale.cli.main as cli_main

    real = cli_main.build_parser

    def with_extra_flag():
        parser = real()
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        sub.choices["top"].add_argument("--brand-new-flag", metavar="N", help="a flag the docs never heard of")
        return parser

    monkeypatch.setattr(cli_main, "build_parser", with_extra_flag)
    assert "--brand-new-flag N" in gen.render_cli()


def test_scenario_reference_covers_every_key(gen, code_pages):
    from crdscale.scenario.config import SCHEMA

    page = code_pages["reference/scenario.md"]
    keys = gen.scenario_keys()
    assert {(k.section, k.key) for k in keys} == {(s, k) for s, fields in SCHEMA.items() for k in fields}
    for section, fields in SCHEMA.items():
        for key in fields:
            assert f"`{section + '.' if section else ''}{key}`" in page


def test_scenario_reference_is_the_declared_keys(gen):
    from crdscale.scenario.config import KEYS

    by_key = {(k.section, k.key): k for k in gen.scenario_keys()}
    assert len(by_key) == len(KEYS)
    guard = by_key[("steps", "memory_guard_mib")]
    assert (guard.type, guard.default) == ("an integer", "1024")
    assert "less memory is available" in guard.help
    assert "kubeconfig" in by_key[("target", "kind")].help
    assert all(k.help for k in by_key.values()), [k for k in by_key.values() if not k.help]


def test_run_directory_reference_lists_layout_and_every_event_kind(code_pages):
    from crdscale.rundir import layout
    from crdscale.rundir.events import EVENT_KINDS

    page = code_pages["reference/run-directory.md"]
    for name in (layout.MANIFEST, layout.EVENTS, layout.SERIES, layout.CRD_SUMMARY):
        assert name in page
    for kind in EVENT_KINDS:
        assert f"`{kind}`" in page


def test_attribution_reference_lists_every_rule(code_pages):
    from crdscale.analysis.attribution import RULES

    page = code_pages["reference/attribution-rules.md"]
    for rule in RULES:
        assert f"`{rule.name}`" in page


def test_every_results_row_has_a_command_and_a_known_source(gen):
    sources = gen.load_sources()
    for path in gen.results_files():
        data = gen.tomllib.loads(path.read_text())
        for row in data["row"]:
            assert row.get("command", "").strip(), f"{path.name}: {row['quantity']!r} has no command"
            # A value written, or one rendered from a committed A/B or history summary, or said not to be measured yet.
            assert row.get("value") or row.get("ab") or row.get("history") or row.get("measured") is False, (
                f"{path.name}: {row['quantity']!r} has no value"
            )
            for kind in ("ab", "history"):
                if row.get(kind):
                    assert (ROOT / row[kind] / "summary.json").is_file(), f"{path.name}: no summary in {row[kind]}"
            if "source" in row:
                assert row["source"] in sources, f"{path.name}: unknown source {row['source']!r}"


def test_sources_are_links(gen):
    for key, source in gen.load_sources().items():
        assert source["url"].startswith("https://"), key
        assert source.get("kind") in ("seed", "upstream"), key


def test_nav_pages_exist_or_are_generated(gen):
    """Every page mkdocs.yml names is committed or written by the generator."""
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.MULTILINE)
    assert "explanation/error-model.md" in nav
    generated = set(gen.FROM_CODE)
    missing = [p for p in nav if p not in generated and not (ROOT / "docs" / p).is_file()]
    assert not missing, missing


def test_access_page_has_a_row_for_every_command(gen, code_pages):
    """Every command --help lists (subcommands too) says what it reads, writes and needs; those that
    ask before writing to a foreign cluster are the ones with --yes."""
    from crdscale.cli.access import ACCESS

    rows = {row.command: row for row in ACCESS}
    assert len(rows) == len(ACCESS), "a command has two rows"
    commands = {" ".join(path): parser for path, parser, _ in gen.cli_commands() if path}
    assert set(rows) == set(commands)
    page = code_pages["reference/access.md"]
    for name, parser in commands.items():
        assert f"| `crdscale {name}` |" in page
        assert all((rows[name].reads, rows[name].writes, rows[name].rbac)), name
        flags = {f for a in parser._actions for f in a.option_strings}
        if not parser._subparsers:
            assert ("--yes" in flags) == rows[name].asks, f"crdscale {name}: --yes and the table disagree"


# --- quoted numbers ----------------------------------------------------------------------------------------
# Every number the README and docs/ quote from the committed runs in data/, beside the command that prints it
# today: command -> page -> the quoted phrases. A phrase must be on its page (whitespace, a Unicode minus and
# Markdown emphasis aside), and its numbers must all be on one line of what the command prints (signs aside;
# a number quoted with fewer decimals matches one printed with more, rounded). A changed number fails here:
# fix the page, or the phrase if the page was rewritten. Results pages are rendered from docs/results/*.toml,
# so their numbers are checked there.
ANALYZE = "crdscale analyze data/reference-run --no-write"
COMPARE = "crdscale compare data/reference-run-v1.24.0 data/reference-run"
FOOTPRINT_VALIDATE = "crdscale footprint fit validate data/reference-run data/reference-run-v1.24.0"
QUOTED = {
    ANALYZE: {
        "README.md": [
            "937.0 KiB per CRD [731.32 KiB, 1.12 MiB]",
            "OpenAPI 260.3",
            "watch cache 240.5",
            "CRD structural schemas 150.5 KiB",
            "1.4 % unattributed",
        ],
        "docs/tutorials/first-look.md": [
            "openapi 260.27 KiB [165.83 KiB, 354.70 KiB] 27.8% 37.42 MiB 0.987",
            "watch-cache 240.49 KiB [85.32 KiB, 395.66 KiB] 25.7% 3.51 MiB 0.937",
            "crd-schema 150.46 KiB [84.50 KiB, 216.42 KiB] 16.1% 0 B 0.937",
            "total 937.04 KiB [731.32 KiB, 1.12 MiB] 100.0% 84.17 MiB 0.987",
            "RSS 2.19 MiB per served CRD [-10.58 KiB, 4.40 MiB]",
            "1.4 % of the growth",
        ],
        "docs/explanation/attribution.md": ["937 KiB per CRD", "OpenAPI 260", "cache 240", "CRD schemas 150 KiB"],
        "docs/explanation/error-model.md": ["total 937.04 KiB [731.32 KiB, 1.12 MiB]"],
    },
    COMPARE: {
        "README.md": ["461.0 KiB [368.4, 553.1]", "46 % less heap per CRD"],
        "docs/tutorials/compare.md": [
            "v1.37.1 holds 797.8 KiB less heap per served CRD than v1.24.0 (95% CI [-1.0 MiB, -556.6 KiB], -46%; "
            "937.0 KiB vs 1.7 MiB per CRD); mostly zap-counters 461.0 KiB less per CRD [-553.1 KiB, -368.4 KiB]; "
            "peak RSS 725.0 MiB vs 1.1 GiB (/proc).",
        ],
        "docs/explanation/error-model.md": ["-461.0 KiB [-553.1, -368.4]"],
        "docs/results/seeds.toml": [
            '"461.0 KiB [368.4, 553.1]"',
            "797.8 KiB more per CRD on v1.24.0 ([556.6 KiB, 1.0 MiB]; 1.7 MiB vs 937.0 KiB per CRD, -46 %",
            "OpenAPI 337.2 KiB more ([190.2, 484.2])",
            "RSS 3.6",
            "2.2 MiB per CRD",
            "peak RSS 1.1 GiB vs 725.0 MiB",
        ],
    },
    # The footprint page's reference-runs row: rendered from this .toml, whose detail quotes each prediction.
    FOOTPRINT_VALIDATE: {
        "docs/results/footprint.toml": [
            "148.3 MiB [110.4, 196.0] vs 146.4",
            "417.6 [307.0, 557.5] vs 351.2",
            "547.9 [307.9, 926.9] vs 456.2",
            "279.6 [218.1, 354.4] vs 271.1",
            "838.5 [551.3, 1,236.8] vs 581.6",
            "1,063.6 [589.2, 1,820.6] vs 789.6",
            "+1.3 %",
            "+18.9 %",
            "+20.1 %",
            "+3.1 %",
            "+44.2 %",
            "+34.7 %",
        ],
    },
}
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _normalized(text: str) -> str:
    return " ".join(text.replace("\u2212", "-").replace("**", "").split())


def _matches(quoted: str, printed: str) -> bool:
    q, p = quoted.replace(",", ""), printed.replace(",", "")
    decimals = len(q.partition(".")[2])
    return len(p.partition(".")[2]) >= decimals and round(float(p), decimals) == float(q)


@pytest.fixture(scope="module")
def printed():
    """What each command of QUOTED prints today, run from the checkout as the docs show it."""
    import contextlib
    import io
    import os
    import shlex

    from crdscale.cli.main import main

    out = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for command in QUOTED:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert main(shlex.split(command)[1:]) == 0, command
            out[command] = buf.getvalue()
    finally:
        os.chdir(cwd)
    return out


@pytest.mark.parametrize("command", list(QUOTED))
def test_every_quoted_number_is_what_its_command_prints(printed, command):
    lines = printed[command].splitlines()
    wrong = []
    for page, phrases in QUOTED[command].items():
        text = _normalized((ROOT / page).read_text())
        assert command.split(" --")[0] in text or page.startswith("docs/explanation/attribution"), (
            f"{page} no longer shows `{command}` beside its numbers"
        )
        for phrase in phrases:
            if _normalized(phrase) not in text:
                wrong.append(f"{page}: {phrase!r} is no longer on the page")
                continue
            numbers = _NUMBER.findall(phrase)
            if not any(all(any(_matches(n, t) for t in _NUMBER.findall(line)) for n in numbers) for line in lines):
                wrong.append(f"{page}: {phrase!r} is not what `{command}` prints")
    assert not wrong, "\n".join(wrong)


# Numbers the README and the error-model page quote from the coverage benchmark's results page
# (`python benchmarks/coverage.py --runs 2000 --seed 1 --write docs/results/coverage.md`, ~5 min: too slow for the
# unit suite, so the page is committed and every number quoted from it must be on it).
COVERAGE_PAGE = "docs/results/coverage.md"
COVERAGE_QUOTED = {
    "README.md": [
        "holds the true cost in 0.923–0.980 of runs",
        "at most 1.46 times the ideal (1.82 for OpenAPI's installs at 3 steps)",
        "0.93–0.97 at 4+ steps, 39 of 289 miss, 10 clear of",
        "totals hold (0.934–0.951), single causes do not (down to 0.896)",
        "1 of 122 is wider than 1.5 times the ideal",
    ],
    "docs/explanation/error-model.md": [
        "The totals' widest median width is 1.00–1.32 times the ideal in every case",
        "OpenAPI's widest 1.43 and 1.13 times the ideal (its installs at 4 steps), covering 0.924–0.971 and "
        "0.940–0.963. The totals there cover 0.925–0.971 and 0.944–0.962",
        "at most 1.22 times the ideal (the watch cache per run on v1.24.0, covering 0.977)",
        "at most 1.44 (OpenAPI's installs), covering 0.95–0.975",
        "39 misses of 289, 10 of them clear",
        "The totals cover 0.934–0.951 there",
        "single causes' intervals go down to 0.896",
        "rebuilt (0.9795;",
        "persisting-noise case are 0.9705–0.9775 but four short ones (0.9235–0.9275",
        "holds 0.9235 per run",
        "1 miss of 122",
        "OpenAPI's installs at 3 steps (1.82",
        "inside 0.9775 of the totals' intervals and 0.971 of OpenAPI's",
        "gave totals up to 4.70 times the ideal width (2 steps) and OpenAPI up to 3.54",
        "up to 0.185 of the intervals zero-wide (2 steps), and causes of a few samples down to 0.805",
        "covers 0.589–0.838 in the reference scenario",
    ],
}


def test_every_coverage_number_quoted_is_on_the_benchmarks_page():
    page = (ROOT / COVERAGE_PAGE).read_text()
    assert "benchmarks/coverage.py" in page.splitlines()[0], "the page names the command that wrote it"
    on_page = set(_NUMBER.findall(page))
    wrong = []
    for quoting, phrases in COVERAGE_QUOTED.items():
        text = _normalized((ROOT / quoting).read_text())
        assert "results/coverage.md" in text, f"{quoting} no longer links the coverage results page"
        for phrase in phrases:
            if _normalized(phrase) not in text:
                wrong.append(f"{quoting}: {phrase!r} is no longer on the page")
            missing = [n for n in _NUMBER.findall(phrase) if not any(_matches(n, t) for t in on_page)]
            if missing:
                wrong.append(f"{quoting}: {phrase!r}: {missing} not on {COVERAGE_PAGE}")
    assert not wrong, "\n".join(wrong)


# The error-model page's table of repeated real runs, from the page benchmarks/repeatability.py writes (the runs
# take ~20 min of a real control plane: the page is committed, and every number of the table must be on it).
REPEATABILITY_PAGE = "docs/results/repeatability.md"


def test_every_repeatability_number_quoted_is_on_its_results_page():
    page = (ROOT / REPEATABILITY_PAGE).read_text()
    assert "benchmarks/repeatability.py" in page.splitlines()[0], "the page names the command that wrote it"
    on_page = set(_NUMBER.findall(page))
    text = (ROOT / "docs/explanation/error-model.md").read_text()
    section = text[text.index("## On real runs") :]
    assert "results/repeatability.md" in section, "the section no longer links the repeatability page"
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| cause")]
    assert len(rows) >= 13, "the section's tables are gone"
    quoted = [n for row in rows for n in _NUMBER.findall(row.replace("v1.37.1", "").replace("v1.24.0", ""))]
    held = re.findall(r"in \*\*(\d+ of \d+)\*\* run", section)
    assert len(held) >= 2, "the leave-one-out counts are gone"
    quoted += [n for phrase in held for n in _NUMBER.findall(phrase)]
    missing = sorted({n for n in quoted if not any(_matches(n, t) for t in on_page)})
    assert not missing, f"error-model.md quotes {missing}, which {REPEATABILITY_PAGE} does not hold"
