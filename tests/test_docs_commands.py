"""Every command the front pages (README.md, README_zh.md) and docs/ show that can run offline is run, as
written, in order, in a fresh copy of the project after the main job; the pages cannot drift from the code.

The front page's commands run as processes (a recipe there adds a module to the copy, which only a new process
sees); each docs page's commands run in this process through the scripts' main(argv) (tests/checkout.py here),
the copy as the current folder. A command is left out only for a stated reason: it names something of the
user's own (an UPPERCASE placeholder, /path/to/..., [optional] parts, $VARIABLES), it installs packages, it is the
test command itself, a benchmark (tests/test_bench.py runs every bench/*.py --quick) or a server. Key commands
have their figures checked on top of their exit status.
"""
import json
import re

import pytest

from checkout import MAIN_JOB, copy_after_main_job, here, sh
from conftest import ROOT, SHARED

pytestmark = pytest.mark.xdist_group("main-job")  # with the main job's worker (conftest.py)

FRONT = ("README.md", "README_zh.md")
DOCS = tuple(sorted(p.name for p in (ROOT / "docs").glob("*.md")))
# an UPPERCASE word, after a space, '/' or '=' too (pred/MODEL, qrels=QRELS), not in a file name (TOFU_EVAL.json)
PLACEHOLDER = re.compile(r"/path/to|\[--|\$[A-Z_]+|(?<![\w$.-])[A-Z][A-Z0-9_]*(?![\w=.])")
SERVERS = ("vllm ", "torchrun ", "python -m ")
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


def commands(page: str) -> list[str]:
    """Each command of a page's bash blocks, in order: continued lines joined, a here-document kept whole."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S):
        lines = re.sub(r"\\\n\s*", " ", block).splitlines()
        while lines:
            line = lines.pop(0)
            marker = re.search(r"<<'(\w+)'", line)
            if marker:  # a here-document: the lines up to its marker belong to this command
                end = lines.index(marker.group(1))
                found.append("\n".join([line, *lines[:end + 1]]))
                del lines[:end + 1]
            elif _strip_comment(line).strip():
                found.append(_strip_comment(line).strip())
    return found


def runnable(command: str) -> tuple[str | None, str]:
    """(what to run, or None, and why not)."""
    first = command.splitlines()[0]
    checked = re.sub(r"<<'\w+'", "", first)  # a here-document's marker is no placeholder
    checked = re.sub(r"--metrics \S+", "", checked)  # nor a metric's name (trec_eval's P_1)
    if "-m pytest" in first:
        return None, "the test command itself"
    parts = [p.strip() for p in first.split("&&")]
    rest = " && ".join(p for p in parts if not p.startswith("pip install"))
    if not rest:
        return None, "installs packages"
    if rest.startswith(SERVERS):
        return None, "starts a server or several processes"
    found = PLACEHOLDER.search(checked)
    if found:
        return None, f"names something of the user's own ({found.group(0)!r})"
    if rest.startswith("python bench/"):
        return None, "a benchmark: tests/test_bench.py runs it with --quick"
    if "../shared" in rest and not SHARED.is_dir():
        return None, f"needs the reference data in {SHARED}"
    return (rest + command[len(first):]), ""


def _read(repo, path):
    return json.loads((repo / path).read_text(encoding="utf-8"))


MUSE_DEMO = "python inference.py unlearning muse && python eval.py unlearning muse --pred-dir pred/unlearn-target"
MUSE_TOP = {"forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE", "privleak", "extraction_strength",
            "exact_memorization", "mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus"}


def _muse_holds(repo, out, retain_log=None):
    """The MUSE demo's summary: its figures, and privleak from the Min-K% AUCs by MUSE's formula (retain AUC 0.5
    without the retain model's log)."""
    summary, log = _read(repo, "pred/unlearn-target/MUSE_SUMMARY.json"), _read(repo, "pred/unlearn-target/MUSE_EVAL.json")
    auc, ref = log["mia_min_k"]["auc"], 0.5 if retain_log is None else _read(repo, retain_log)["mia_min_k"]["auc"]
    return set(summary) == MUSE_TOP and "answer labels" not in out and summary["privleak"] == pytest.approx(
        100 * ((1 - auc) - (1 - ref)) / ((1 - ref) + 1e-10), rel=1e-9)


CHECKS = {  # a command -> what must hold after it ran (in the copy `repo`, with its output `out`)
    MUSE_DEMO: _muse_holds,
    "python eval.py unlearning muse --pred-dir pred/unlearn-target --retain-logs pred/unlearn-retain/MUSE_EVAL.json":
        lambda repo, out: _muse_holds(repo, out, "pred/unlearn-retain/MUSE_EVAL.json"),
    MAIN_JOB: lambda repo, out: "custom_en: 25 new, 0 already done" in out
    and _read(repo, "pred/tiny-qwen2/result.json") == DEMO_FIGURES,
    "python inference.py validate --datasets custom_en": lambda repo, out: "ok: custom_en: 25 examples" in out,
    "python eval.py unlearning tofu --pred-dir pred/unlearn-target --retain-logs pred/unlearn-retain/TOFU_EVAL.json":
        lambda repo, out: (lambda s: s["privleak"] == pytest.approx(-100)
                           and s["forget_quality"] == pytest.approx(5.8e-10, rel=0.05)
                           and s["forget_Q_A_Prob"] == pytest.approx(0.320134, abs=1e-6)
                           )(_read(repo, "pred/unlearn-target/TOFU_SUMMARY.json")),
    "python eval.py unlearning tofu --pred-dir pred/answer-eos/unlearn-target": lambda repo, out: _read(
        repo, "pred/answer-eos/unlearn-target/TOFU_SUMMARY.json")["forget_Q_A_Prob"] == pytest.approx(0.996971,
                                                                                                       abs=1e-5),
    "cp -r ../shared/reference/tinyeval/pred/internlm pred/internlm && python eval.py --model internlm":
        lambda repo, out: _read(repo, "pred/internlm/result.json") == PUBLISHED,
    "python eval.py explain demo_qa_zh:demo_qa_zh-011 --model tiny-qwen2": lambda repo, out: (
        "qa_f1_zh = 1: shared 2 words (杉坪村 ×1, 小学 ×1)" in out),
    "python eval.py --model tiny-qwen2 --datasets custom_en --metrics first_word,rouge": lambda repo, out: (
        _read(repo, "pred/tiny-qwen2/result_detail.json")["custom_en"]["headline_metric"] == "first_word"),
    "python eval.py --pred-root demo/bergen --metrics match,f1,rouge_1,P_1,recall_5,ndcg_cut_10,recip_rank":
        lambda repo, out: list(_read(repo, "demo/bergen/splade-rerank-tinyllm/result_detail.json")["dev"][
            "metrics"]) == ["match", "f1", "rouge_1", "P_1", "recall_5", "ndcg_cut_10", "recip_rank"]
        and _read(repo, "demo/bergen/splade-rerank-tinyllm/result.json") == {"dev": 80.0}
        and "89.34       94.44" in out,
    # BERGEN's tree: a row per experiment with every metric and its config.yaml columns (docs/rag.md)
    "python eval.py --pred-root demo/bergen": lambda repo, out: (
        _read(repo, "demo/bergen/splade-rerank-tinyllm/result_detail.json")["dev"]["metrics"]["P_1"]["score"]
        == 88.89 and "splade-rerank-tinyllm  dev      splade-v3  trecdl22-crossencoder-debertav3" in out),
}


def test_the_two_front_pages_hold_the_same_commands_and_ci_runs_the_test_command():
    assert commands("README.md") == commands("README_zh.md")
    assert commands("docs/walkthrough.md") == commands("docs/walkthrough_zh.md")
    assert commands("docs/rag.md") == commands("docs/rag_zh.md")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    test_command = next(c for c in commands("README.md") if "-m pytest" in c)
    assert ci.replace("pip install -q ", "pip install ") == test_command  # CI runs exactly that


def test_every_left_out_command_says_why_and_the_checked_ones_run():
    every = [c for page in (*FRONT, *(f"docs/{d}" for d in DOCS)) for c in commands(page)]
    plans = {c: runnable(c) for c in every}
    assert all(run is not None or why for run, why in plans.values())
    will_run = {run for run, _ in plans.values() if run}
    assert {c for c in CHECKS if SHARED.is_dir() or "../shared" not in c} <= will_run


def _run_page(page: str, repo, run_one) -> list[str]:
    ran = []
    for command in commands(page):
        run, _ = runnable(command)
        if run is None or run == MAIN_JOB:
            continue
        proc = run_one(run, repo)
        assert proc.returncode == 0, f"{page}: command failed: {run}\n{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}"
        assert "Traceback" not in proc.stderr, run
        if run in CHECKS:
            assert CHECKS[run](repo, proc.stdout), f"{page}: other figures: {run}\n{proc.stdout[-1500:]}"
        ran.append(run)
    return ran


def test_the_front_page_runs_as_written(main_job, tmp_path):
    prepared, main_run = main_job  # the first command, run once per session in a fresh copy (tests/conftest.py)
    assert main_run.returncode == 0 and CHECKS[MAIN_JOB](prepared, main_run.stdout), main_run.stderr[-2000:]
    repo = copy_after_main_job(prepared, tmp_path)
    ran = _run_page("README.md", repo, sh)
    assert len(ran) >= 7  # the five recipes and what they run
    assert "Examples scored per model" in (repo / "pred" / "results.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", DOCS)
def test_each_docs_page_runs_as_written(main_job, tmp_path, page):
    repo = copy_after_main_job(main_job[0], tmp_path)
    _run_page(f"docs/{page}", repo, here)


@pytest.mark.parametrize("page", [*FRONT, "docs/walkthrough.md", "docs/walkthrough_zh.md"])
def test_the_record_a_page_shows_is_the_one_the_main_job_writes(main_job, page):
    shown = next(json.loads(line) for line in (ROOT / page).read_text(encoding="utf-8").splitlines()
                 if line.startswith('{"id": "demo_qa_zh-011"'))
    path = main_job[0] / "pred" / "tiny-qwen2" / "demo_qa_zh.jsonl"
    written = next(r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
                   if r["id"] == shown["id"])
    assert {**shown, "latency_s": None} == {**written, "latency_s": None}  # the time: of the machine
