"""Every command the README shows that can run offline is run, as written, in order, in a fresh copy of the
project; the README cannot drift from the code again.

A command cannot run here only for a stated reason: it names a model, path or value of the user's own (an
UPPERCASE placeholder, /path/to/..., [optional] parts), it installs packages (the README's first command and
.ci/run do that on a fresh machine), it is the test command itself, or it is a benchmark (tests/test_bench.py
runs every bench/*.py with --quick). Key commands have their figures checked on top of their exit status.
The first command (the main job) runs in a fresh interpreter; the others' `python SCRIPT` runs in a fork of one
that has torch and transformers imported already (tests/warm_python.py), which saves 3.5 s a command.
"""
import json
import re

import pytest

from checkout import MAIN_JOB, copy_after_main_job, sh
from conftest import ROOT, SHARED

README = (ROOT / "README.md").read_text(encoding="utf-8")
PLACEHOLDER = re.compile(r"/path/to|\[--|\$[A-Z_]+|(?<![\w$/.=-])[A-Z][A-Z0-9_]*(?![\w=.])")
DEMO_FIGURES = {"custom_en": 20.38, "custom_zh": 20.01, "demo_gaokao": 70.0, "demo_qa_en": 5.11,
                "demo_qa_zh": 13.33, "demo_summ_en": 4.31, "demo_trec": 100.0}
PUBLISHED = {"multi_news": 23.66, "multifieldqa_zh": 34.97, "trec": 52.0}


def _strip_comment(line: str) -> str:
    """The command without its trailing `# comment` (a '#' after whitespace, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def readme_commands(text: str = README, chain: str | None = None) -> list[str]:
    """Each distinct command of the README's bash blocks, in order of first appearance; with `chain`, only the
    commands of that chain (see CHAINS)."""
    commands, chains = [], {}
    section = ""
    for part in re.split(r"(```bash\n.*?```)", text, flags=re.S):
        if not part.startswith("```bash"):
            headings = re.findall(r"^## (.*)$", part, re.M)
            section = headings[-1] if headings else section
            continue
        for line in re.sub(r"\\\n\s*", " ", part[len("```bash\n"):-3]).splitlines():
            command = _strip_comment(line).strip()
            if command and command not in commands:
                commands.append(command)
                chains[command] = "unlearning" if section.startswith("Unlearning") else "main"
    return [c for c in commands if chain is None or chains[c] == chain]


# Commands that depend on each other run in order in one copy; the chains are independent (run in parallel where
# tests run in parallel). Both start from a copy that has run the main job.
CHAINS = ("main", "unlearning")


def runnable(command: str) -> tuple[str | None, str]:
    """(what to run, or None, and why not / what was left out)."""
    if "-m pytest" in command:
        return None, "the test command itself"
    parts = [p.strip() for p in command.split("&&")]
    installs = [p for p in parts if p.startswith("pip install")]
    rest = " && ".join(p for p in parts if not p.startswith("pip install"))
    if not rest:
        return None, "installs packages"
    found = PLACEHOLDER.search(rest)
    if found:
        return None, f"names something of the user's own ({found.group(0)!r})"
    if rest.startswith("python bench/"):
        return None, "a benchmark: tests/test_bench.py runs it with --quick"
    if "../shared" in rest and not SHARED.is_dir():
        return None, f"needs the reference data in {SHARED}"
    return rest, "pip install left out: CI installs first" if installs else ""


def _read(repo, path):
    return json.loads((repo / path).read_text(encoding="utf-8"))


CHECKS = {  # a command -> what must hold after it ran
    MAIN_JOB: lambda repo, out: "custom_en: 25 new, 0 already done" in out
    and _read(repo, "pred/tiny-qwen2/result.json") == DEMO_FIGURES,
    "python inference.py --datasets custom_en --validate": lambda repo, out: "ok: custom_en: 25 examples" in out,
    "python inference.py --dry-run": lambda repo, out: "no model loaded" in out  # all 200 shipped examples
    and _read(repo, "pred/tiny-qwen2/dry_run.json")["total"]["examples"] == 200,
    "python eval.py --unlearning tofu --pred-dir pred/unlearn-target --retain-logs "
    "pred/unlearn-retain/TOFU_EVAL.json": lambda repo, out: (
        lambda s: s["privleak"] == pytest.approx(-100) and s["forget_quality"] == pytest.approx(5.8e-10, rel=0.05)
        and s["forget_Q_A_Prob"] == pytest.approx(0.320134, abs=1e-6)  # open-unlearning's full-turn encoding
    )(_read(repo, "pred/unlearn-target/TOFU_SUMMARY.json")),
    "python eval.py --unlearning tofu --pred-dir pred/answer-eos/unlearn-target": lambda repo, out: "answer labels: "
    "answer-eos" in out and _read(repo, "pred/answer-eos/unlearn-target/TOFU_SUMMARY.json")["forget_Q_A_Prob"]
    == pytest.approx(0.996971, abs=1e-6),
    "python eval.py --model tiny-qwen2 --datasets custom_en,demo_trec --judge Eval/models/demo/tiny-qwen2 "
    "--judge-mode logits --rubric graded": lambda repo, out: sorted(_read(repo, "pred/tiny-qwen2/judge_result.json"))
    == ["custom_en", "demo_trec"],
    "cp -r ../shared/reference/tinyeval/pred/internlm pred/internlm && python eval.py --model internlm":
        lambda repo, out: _read(repo, "pred/internlm/result.json") == PUBLISHED,
}


def _checked() -> set[str]:
    """The commands whose figures are checked (those reading ../shared only where it is present)."""
    return {c for c in CHECKS if SHARED.is_dir() or "../shared" not in c}


def test_every_skipped_command_has_a_reason_and_the_key_ones_run():
    plans = {c: runnable(c) for c in readme_commands()}
    for command, (run, why) in plans.items():
        assert run is not None or why, command
    will_run = {run for run, _ in plans.values() if run}
    assert _checked() <= will_run
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    readme_test_command = next(c for c in readme_commands() if "-m pytest" in c)
    assert ci.replace("pip install -q ", "pip install ") == readme_test_command  # CI runs exactly that


@pytest.mark.parametrize("chain", CHAINS)
def test_readme_commands_run_as_written(main_job, warm_python, tmp_path, chain):
    prepared, main_run = main_job  # the first command, run once per session in a fresh copy (tests/conftest.py)
    assert runnable(readme_commands()[0])[0] == MAIN_JOB
    repo = copy_after_main_job(prepared, tmp_path)
    ran = []
    for command in readme_commands(chain=chain):
        run, _ = runnable(command)
        if run is None:
            continue
        proc = main_run if run == MAIN_JOB else sh(run, repo, warm=warm_python)
        assert proc.returncode == 0, f"README command failed: {run}\n{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}"
        assert "Traceback" not in proc.stderr, run
        if run in CHECKS:
            assert CHECKS[run](repo, proc.stdout), f"README command gave other figures: {run}\n{proc.stdout[-1500:]}"
        ran.append(run)
    assert len(ran) >= {"main": 12, "unlearning": 4}[chain]
    assert {c for c in _checked() if c in readme_commands(chain=chain)} <= set(ran)
