"""The package installs as one import namespace and declares what it imports."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"confluent_kafka": "confluent-kafka", "prompt_toolkit": "prompt-toolkit", "yaml": "pyyaml",
                 "prometheus_client": "prometheus-client", "google": "protobuf"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirement_names(requirements: list[str]) -> set[str]:
    names = set()
    for r in requirements:
        name = r.split(";")[0]
        for sep in "<>=!~[ ":
            name = name.split(sep)[0]
        names.add(name.strip().lower())
    return names


def _third_party_imports(module_level: bool) -> dict[str, set[str]]:
    """Top-level names of non-stdlib imports in the package -> files importing them
    (``module_level``: only imports that run when the module is imported)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "sqlstream").rglob("*.py"):
        tree = ast.parse(path.read_text())
        nodes = tree.body if module_level else list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("sqlstream", "__future__"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_only_the_sqlstream_namespace_is_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["sqlstream*"]
    top_level = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert top_level == {"sqlstream"}


def test_every_module_level_import_is_a_declared_dependency() -> None:
    declared = _requirement_names(_project()["dependencies"])
    for name, files in _third_party_imports(module_level=True).items():
        assert DISTRIBUTIONS.get(name, name).lower() in declared, f"{name} imported by {sorted(files)}"


def test_optional_imports_belong_to_an_extra() -> None:
    project = _project()
    available = _requirement_names(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        available |= _requirement_names(extra)
    for name, files in _third_party_imports(module_level=False).items():
        assert DISTRIBUTIONS.get(name, name).lower() in available, f"{name} imported by {sorted(files)}"


# Libraries only some jobs use: importing them costs start-up time (pandas alone ~0.15-0.25 s),
# so the command line and a plain job must not import them until a job needs one.
OPTIONAL_HEAVY = ("pandas", "ray", "duckdb", "confluent_kafka", "psycopg")
JOB_OPTIONAL = ("pandas", "ray", "duckdb", "confluent_kafka", "psycopg", "pyiceberg", "deltalake", "fastavro",
                "prometheus_client", "rocksdict")


def _modules_after(code: str) -> set[str]:
    """Top-level names of the modules a fresh interpreter holds after running ``code``."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    ).stdout.splitlines()[-1]
    return {m.split(".")[0] for m in out.split()}


def test_importing_the_command_line_imports_no_optional_library() -> None:
    loaded = _modules_after("import sqlstream.frontend.cli")
    assert "sqlstream" in loaded
    assert loaded.isdisjoint(OPTIONAL_HEAVY), sorted(loaded & set(OPTIONAL_HEAVY))


def test_a_values_to_print_job_imports_no_connector_library_it_does_not_use(tmp_path: Path) -> None:
    script = tmp_path / "job.sql"
    script.write_text("CREATE TABLE out_t (a INT) WITH ('connector' = 'print');\n"
                      "INSERT INTO out_t SELECT a FROM (VALUES (1), (2)) AS t(a);\n")
    # pandas too: pyarrow would import it on its first list conversion (core.pandas_deferral)
    loaded = _modules_after(f"from sqlstream.frontend.cli import main\nmain(['run', {str(script)!r}])")
    assert "pyarrow" in loaded  # the job did run
    assert loaded.isdisjoint(JOB_OPTIONAL), sorted(loaded & set(JOB_OPTIONAL))


def test_pandas_objects_convert_as_pyarrow_converts_them_once_pandas_is_restored() -> None:
    code = ("import sys, pyarrow as pa, sqlstream.core\n"
            "from sqlstream.core.pandas_deferral import restore_pandas\n"
            "print('pandas' in sys.modules)\n"
            "import pandas as pd\n"
            "df = pd.DataFrame({'c': pd.Categorical(['x', 'y', 'x'])})\n"
            "restore_pandas()\n"
            "print(pa.Table.from_pandas(df).schema.field('c').type)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         timeout=120).stdout.splitlines()
    # without restore_pandas the first column of the first conversion, categorical, reads as plain strings
    assert out == ["False", "dictionary<values=large_string, indices=int8, ordered=0>"]


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """No import cycle hides behind the usual import order: each module is imported first, on its
    own (a Ray actor or a library user may start anywhere); one whose optional library is missing
    is skipped."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    modules = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                     for p in (ROOT / "sqlstream").rglob("*.py") if p.name != "__main__.py")

    def failure(module: str) -> str | None:
        out = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=ROOT)
        missing = "ModuleNotFoundError: No module named" in out.stderr and "'sqlstream" not in out.stderr
        return None if out.returncode == 0 or missing else f"{module}: {out.stderr.strip().splitlines()[-1]}"

    with ThreadPoolExecutor(2) as pool:
        failures = [f for f in pool.map(failure, modules) if f]
    assert len(modules) > 150 and not failures, failures
