"""Packaging: ``pip install`` of the package's tree writes nothing into it, installs into a fresh
venv with its declared dependencies satisfied, and the README's example runs there as written (only
the server address is the test server's); the wheel carries the typing files."""

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

PACKAGE = pathlib.Path(__file__).parents[1]


def run(*args, **kwargs):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def snapshot(tree):
    """Every file under ``tree`` with its content's hash."""
    return {p.relative_to(tree): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tree.rglob("*")) if p.is_file()}


def test_pip_install_from_the_tree_leaves_it_untouched_and_the_readme_example_runs(server, tenant, tmp_path):
    """``pip install ./client/python`` as the README says, from a copy of the tree: the build writes
    nothing into it (no build/, no *.egg-info), and the installed package works."""
    source = tmp_path / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info", ".pytest_cache", ".mypy_cache"))
    before = snapshot(source)

    # A fresh venv; its dependencies (and the build backend) come from this (test) environment,
    # offline, through a .pth.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = pathlib.Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-build-isolation", "--no-index", "--quiet", source, cwd=tmp_path)
    assert snapshot(source) == before, "the install wrote into the source tree"

    readme = (PACKAGE / "README.md").read_text()
    example = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert len(example.strip().splitlines()) <= 12
    example = example.replace('"127.0.0.1:50051", tenant="demo"', f'"{server.target}", tenant="{tenant}"')
    (tmp_path / "example.py").write_text(example + "\nprint(oncekey.__file__)\n")

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = run(python, "example.py", cwd=tmp_path, env=env).splitlines()
    assert out[0] == "sending to ada@example.com"
    assert out[1] == out[2] == "{'status': 'sent', 'to': 'ada@example.com'}"
    assert out[3].startswith(str(venv)), "imported from the venv, not the source tree"
    installed = pathlib.Path(out[3]).parent
    assert (installed / "py.typed").exists() and (installed / "v1" / "ledger_pb2.pyi").exists()


def test_the_wheel_carries_the_typing_files(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet", "-w", tmp_path / "dist", source)
    wheel = next((tmp_path / "dist").glob("oncekey-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {"oncekey/py.typed", "oncekey/v1/ledger_pb2.pyi", "oncekey/__init__.py", "oncekey/v1/ledger_pb2.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]
