"""The README's layout is the tree, and the tree keeps its house rules: every module listed with its stage, no
Python file over 400 lines, a docstring at the top of each module."""
import ast
import re
import subprocess

from conftest import ROOT

LIMIT = 400


def readme_layout() -> set[str]:
    """Paths the README's Layout block names: top-level entries and the files indented under each folder."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Layout\n.*?```\n(.*?)```", text, re.S).group(1)
    paths, folders = set(), {}  # indentation -> the folder its lines are in
    for line in block.splitlines():
        depth = len(line) - len(line.lstrip())
        names = re.split(r"\s{2,}", line.strip())[0].split()  # the names before the description
        parent = next((folders[d] for d in sorted(folders, reverse=True) if d < depth), "")
        paths.update(parent + name for name in names if name.endswith((".py", "/")))
        folders = {d: f for d, f in folders.items() if d < depth}
        if len(names) == 1 and names[0].endswith("/"):
            folders[depth] = parent + names[0]
    return paths


def tracked_python() -> list[str]:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return files or [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if ".git" not in p.parts]


def test_the_readme_layout_lists_every_module_and_only_existing_ones():
    listed = readme_layout()
    modules = {f for f in tracked_python() if f.startswith("Eval/") and not f.endswith("__init__.py")
               and not f.startswith("demo/")} | {"inference.py", "eval.py"}
    assert modules - listed == set(), "modules missing from the README's layout"
    assert {p for p in listed if not (ROOT / p).exists()} == set(), "the README's layout names what does not exist"


def test_no_python_file_is_over_the_line_limit_and_each_says_what_it_is():
    for path in tracked_python():
        source = (ROOT / path).read_text(encoding="utf-8")
        assert source.count("\n") <= LIMIT, f"{path}: {source.count(chr(10))} lines (limit {LIMIT})"
        if path.startswith(("Eval/", "bench/")) and not path.endswith("__init__.py") or path in ("inference.py",
                                                                                                  "eval.py"):
            assert ast.get_docstring(ast.parse(source)), f"{path}: no module docstring"


def test_the_core_path_marked_in_the_layout_is_as_long_as_the_readme_says():
    """The README marks the core path's files with `*` and states their line count: both stay true."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Layout\n.*?```\n(.*?)```", text, re.S).group(1)
    stated = int(re.search(r"`result.json`: ([\d,]+) lines", text).group(1).replace(",", ""))
    core, folder = [], ""
    for line in block.splitlines():
        names, _, rest = line.strip().partition("  ")
        if not line.startswith(" "):
            folder = names if names.endswith("/") else ""
        if rest.strip().startswith("* "):
            core += [(folder if line.startswith(" ") else "") + name for name in names.split()]
    assert len(core) == 25 and all((ROOT / path).is_file() for path in core), core
    counted = sum((ROOT / path).read_text(encoding="utf-8").count("\n") for path in core)
    assert counted == stated, f"the core path is {counted} lines; the README says {stated}"


def test_the_chinese_front_page_lists_the_same_layout():
    """README_zh.md's layout block is the same tree, described in Chinese: the same names in order."""
    def names(page: str) -> list[str]:
        block = re.search(r"```\n(inference\.py.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S)
        return [re.split(r"\s{2,}", line.strip())[0] for line in block.group(1).splitlines()]
    assert names("README_zh.md") == names("README.md")
