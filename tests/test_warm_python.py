"""tests/warm_python.py, the warm `python` the command chains run: a script gets what a fresh `python SCRIPT ARGS`
gives it (argv, sys.path, folder, environment, streams, exit status), so a failing README command still fails."""
import json
import subprocess
import sys

import pytest

from checkout import command_env, sh

SCRIPT = """import json, os, sys
import helper
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "env": os.environ.get("MY_SETTING"),
                  "helper": helper.VALUE, "torch": "torch" in sys.modules, "main": __name__}))
print("to stderr", file=sys.stderr)
mode = sys.argv[1]
if mode == "exit3":
    sys.exit(3)
if mode == "message":
    sys.exit("stopped: a message")
if mode == "raise":
    raise ValueError("boom")
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "tool.py").write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    return tmp_path


def fresh(project, *args, **env):
    """What the real interpreter gives, for comparison."""
    return subprocess.run([sys.executable, "tool.py", *args], cwd=project, capture_output=True, text=True,
                          env=command_env(**env))


@pytest.mark.parametrize("mode, status", [("ok", 0), ("exit3", 3), ("message", 1), ("raise", 1)])
def test_a_script_gets_what_a_fresh_python_gives_it(project, warm_python, mode, status):
    warm = sh(f"python tool.py {mode} 'two words'", project, warm=warm_python, MY_SETTING="set")
    cold = fresh(project, mode, "two words", MY_SETTING="set")
    assert warm.returncode == cold.returncode == status
    seen, expected = json.loads(warm.stdout.splitlines()[0]), json.loads(cold.stdout.splitlines()[0])
    assert expected["torch"] is False and seen.pop("torch") is True  # the one difference: imports already done
    expected.pop("torch")
    assert seen == expected == {"argv": ["tool.py", mode, "two words"], "path0": str(project), "cwd": str(project),
                                "env": "set", "helper": 1, "main": "__main__"}
    assert warm.stderr.splitlines()[0] == "to stderr"
    assert warm.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1]  # "ValueError: boom", the message, ...
    if mode == "raise":
        assert "Traceback (most recent call last)" in warm.stderr


def test_each_command_imports_the_project_afresh_and_options_run_the_real_python(project, warm_python):
    assert json.loads(sh("python tool.py ok", project, warm=warm_python).stdout.splitlines()[0])["helper"] == 1
    (project / "helper.py").write_text("VALUE = 22\n", encoding="utf-8")  # a user edits a module between commands
    assert json.loads(sh("python tool.py ok", project, warm=warm_python).stdout.splitlines()[0])["helper"] == 22
    real = sh("python -c 'import sys; print(\"torch\" in sys.modules)'", project, warm=warm_python)
    assert real.stdout == "False\n"  # -c is not a script: the real interpreter, nothing imported
    # A variable of a prefix those packages read at import (HF_...) that the server lacks: the real interpreter.
    changed = sh("python tool.py ok", project, warm=warm_python, HF_WARM_PYTHON_PROBE="1")
    assert json.loads(changed.stdout.splitlines()[0])["torch"] is False
