"""Tasks: what each dataset is scored with and how it is prompted, one row per dataset (a new one:
`dataset/NAME.jsonl`, `prompts/NAME.txt` and a row in TASKS below).

Usage:
    task = TASKS["trec"]   # Task(name='trec', metrics=('classification',), ...); an unknown
                           # name: a KeyError suggesting the closest known ones
"""
from __future__ import annotations

import dataclasses

from Eval.registry import Registry


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    metrics: tuple[str, ...]  # the first one is the headline score written to result.json
    max_new_tokens: int  # generation length (LongBench's dataset2maxlen)
    extract: tuple[str, ...] = ("strip_think",)  # answer extraction steps, see Eval/extract.py
    chat: bool = True  # False: completion mode, the prompt is sent without the chat template
    language: str = "en"  # "zh" datasets count `length` in characters, others in words
    stop: tuple[str, ...] = ()  # extra stop strings at generation time
    description: str = ""
    group_by: tuple[str, ...] = ()  # record fields copied to each prediction's "groups"
    breakdown: str = ""  # a named breakdown of the scores by those groups, e.g. "longbench_v2"
    # The benchmark whose published prompt the dataset needs: with no prompts/NAME.txt and no
    # --prompt-config entry, inference stops (a generic template would change the task).
    published_prompt: str = ""
    cot_max_new_tokens: int = 0  # --cot: the reasoning pass's length (0: no chain-of-thought mode)
    # the metrics' keyword arguments (eval.py -S key=value); each metric takes those it declares
    metric_args: tuple[tuple[str, str], ...] = ()
    # LongBench v2's pred.py writes no record for an empty or failed output, so its figures
    # leave those out: out of n, counted apart (eval.py --v2-variant count-failures counts them).
    leave_out_empty: bool = False
    longbench_e: bool = False  # LongBench-E has it: NAME_e.jsonl runs as this row (pred.py --e)


_THINK = "strip_think"  # no-op on outputs without <think> tags, so parity with LongBench is kept
_FIRST = (_THINK, "first_line")


TASKS = Registry("dataset", hint="To add one: dataset/NAME.jsonl, prompts/NAME.txt and a row in "
                                 "TASKS in Eval/tasks.py.")


def _rows(*tasks: Task, published_prompt: str = "") -> None:
    for task in tasks:
        TASKS.register(task.name, dataclasses.replace(task, published_prompt=published_prompt))


_V2 = {"extract": ("longbench_v2_answer",), "breakdown": "longbench_v2", "leave_out_empty": True,
       "group_by": ("difficulty", "length", "domain", "sub_domain")}


_rows(
    # LongBench v1: metric and generation length as in LongBench's dataset2metric / dataset2maxlen.
    Task("narrativeqa", ("qa_f1",), 128, description="story QA"),
    Task("qasper", ("qa_f1",), 128, description="paper QA", longbench_e=True),
    Task("multifieldqa_en", ("qa_f1",), 64, description="single-document QA", longbench_e=True),
    Task("multifieldqa_zh", ("qa_f1_zh",), 64, language="zh",
         description="single-document QA (zh)"),
    Task("hotpotqa", ("qa_f1",), 32, description="multi-document QA", longbench_e=True),
    Task("2wikimqa", ("qa_f1",), 32, description="multi-document QA", longbench_e=True),
    Task("musique", ("qa_f1",), 32, description="multi-document QA"),
    Task("dureader", ("rouge_zh",), 128, language="zh", description="multi-document QA (zh)"),
    Task("gov_report", ("rouge",), 512, description="summarisation", longbench_e=True),
    Task("qmsum", ("rouge",), 512, description="query-based summarisation"),
    Task("multi_news", ("rouge",), 512, description="multi-document summarisation",
         longbench_e=True),
    Task("vcsum", ("rouge_zh",), 512, language="zh", description="meeting summarisation (zh)"),
    Task("trec", ("classification",), 64, _FIRST, chat=False,
         description="question classification", longbench_e=True),
    Task("triviaqa", ("qa_f1",), 32, _FIRST, chat=False, description="few-shot QA",
         longbench_e=True),
    Task("samsum", ("rouge",), 128, _FIRST, chat=False, stop=("\n",),
         description="dialogue summarisation", longbench_e=True),
    Task("lsht", ("classification",), 64, _FIRST, chat=False, language="zh",
         description="news classification (zh)"),
    Task("passage_count", ("count",), 32, description="count distinct passages", longbench_e=True),
    Task("passage_retrieval_en", ("retrieval",), 32, description="find the paragraph",
         longbench_e=True),
    Task("passage_retrieval_zh", ("retrieval_zh",), 32, language="zh",
         description="find the paragraph (zh)"),
    Task("lcc", ("code_sim",), 64, chat=False, description="code completion", longbench_e=True),
    Task("repobench-p", ("code_sim",), 64, chat=False, description="repository code completion",
         longbench_e=True),
    # LongBench v2: its pred.py lengths (answer 128, CoT 1024); its answer pick reads the whole
    # output, thinking block included (eval.py --v2-variant strip-thinking).
    Task("longbench_v2", ("choice_match",), 128, **_V2, cot_max_new_tokens=1024,
         description="long-context multiple choice"),
    published_prompt="LongBench",  # scores compare with published figures only under its prompts
)
_rows(
    # TinyEval's own datasets.
    Task("GAOKAO_math", ("gaokao_choice",), 512, (_THINK, "choice_letters"), language="zh",
         description="gaokao math single / multiple choice"),
    Task("custom_zh", ("rouge_zh", "bleu_zh"), 512, language="zh",
         description="your own SFT-style data (zh)"),
    Task("custom_en", ("rouge", "bleu"), 512, description="your own SFT-style data (en)"),
    # The project's demo datasets (dataset/demo_*.jsonl), written for the shipped demo model.
    Task("demo_qa_zh", ("qa_f1_zh",), 64, language="zh",
         description="demo reading QA (zh, LongBench form)"),
    Task("demo_qa_en", ("qa_f1",), 64, description="demo reading QA (en, LongBench form)"),
    Task("demo_summ_en", ("rouge",), 256, description="demo multi-passage summarisation (en)"),
    Task("demo_trec", ("classification",), 64, _FIRST, chat=False,
         description="demo question classification"),
    Task("demo_gaokao", ("gaokao_choice",), 64, (_THINK, "choice_letters"), language="zh",
         description="demo math single / multiple choice (zh)"),
    Task("demo_longbench_v2", ("choice_match",), 128, **_V2, cot_max_new_tokens=256,
         description="demo long-context multiple choice (v2 form)"),
)


def row_name(name: str) -> str:
    """A file's row: its name's, else NAME's for LongBench-E's NAME_e of a dataset LongBench-E
    has and a --cot run's NAME_cot of a task with a CoT mode (a user's mydata_e: its own)."""
    base, _, suffix = name.rpartition("_")
    task = None if name in TASKS else TASKS.get(base)
    shared = task and (task.longbench_e if suffix == "e"
                       else suffix == "cot" and task.cot_max_new_tokens > 0)
    return base if shared else name
