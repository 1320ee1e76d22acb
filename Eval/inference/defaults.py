"""The task and template of a dataset nothing names its own, by record form and language.

Usage: task, note = default_task("my_qa", "longbench", "en")
"""

from pathlib import Path

from Eval.inference.templates import KINDS, ChosenTemplate
from Eval.tasks import Task

# The task of a dataset that has no row in TASKS, by (form, language); "*": either language.
DEFAULT_TASKS = {("longbench", "en"): {"metrics": ("qa_f1",), "max_new_tokens": 128},
                 ("longbench", "zh"): {"metrics": ("qa_f1_zh",), "max_new_tokens": 128},
                 ("instruction", "en"): {"metrics": ("rouge", "bleu"), "max_new_tokens": 512},
                 ("instruction", "zh"): {"metrics": ("rouge_zh", "bleu_zh"), "max_new_tokens": 512},
                 ("choice", "*"): {"metrics": ("gaokao_choice",), "max_new_tokens": 512,
                                   "extract": ("strip_think", "choice_letters")},
                 ("longbench_v2", "*"): {"metrics": ("choice_match",), "max_new_tokens": 128,
                                         "extract": ("longbench_v2_answer",),
                                         "group_by": ("difficulty", "length", "domain",
                                                      "sub_domain"),
                                         "breakdown": "longbench_v2", "cot_max_new_tokens": 1024,
                                         "leave_out_empty": True}}
_V2_DOC = "\n\n<document>\n{context}\n</document>"
_V2_ANSWER = ("\n\nQuestion: {question}\nA) {choice_A}\nB) {choice_B}\nC) {choice_C}\n"
              "D) {choice_D}\n\n")
_V2_FORMAT = 'one line of the form "The correct answer is (X)", X being A, B, C or D.'
_V2_READ = "Read the document, then answer the multiple-choice question about it."
DEFAULT_TEMPLATES = {
    ("longbench", "en", "answer"):
        "Read the text below and answer the question.\n\n{context}\n\nQuestion: {input}\nAnswer:",
    ("longbench", "zh", "answer"):
        "阅读下面的材料并回答问题。\n\n{context}\n\n问题：{input}\n回答：",
    ("longbench", "en", "no_input"):
        "Read the text below and respond to it.\n\n{context}\n\nResponse:",
    ("longbench", "zh", "no_input"): "阅读下面的材料并作出回应。\n\n{context}\n\n回应：",
    ("instruction", "*", "answer"): "{instruction}\n{input}",
    ("instruction", "*", "no_input"): "{instruction}",
    ("choice", "en", "answer"):
        "Multiple-choice question ({question_type}). Give the letter(s) of the right option(s)."
        "\n\n{question}\nOptions: {options}\nAnswer:",
    ("choice", "zh", "answer"):
        "选择题（{question_type}），请给出正确选项的字母。\n\n{question}\n选项：{options}\n答案：",
    ("longbench_v2", "*", "answer"): _V2_READ + _V2_DOC + _V2_ANSWER + "Reply with " + _V2_FORMAT,
    ("longbench_v2", "*", "cot"):
        "Read the document, then work out the answer to the multiple-choice question about it."
        + _V2_DOC + _V2_ANSWER + "Reason step by step before you decide.",
    ("longbench_v2", "*", "cot_answer"):
        _V2_READ + _V2_DOC + _V2_ANSWER
        + "Your reasoning so far:\n{cot}\n\nBased on it, reply with " + _V2_FORMAT,
}


def default_task(name: str, form: str, language: str) -> tuple[Task, str]:
    fields = DEFAULT_TASKS.get((form, language)) or DEFAULT_TASKS[(form, "*")]
    fields = {"language": language, **fields}
    task = Task(name, description=f"user dataset ({form} form, {language})", **fields)
    return task, (f"{name}: not in Eval/tasks.py; scoring with {', '.join(task.metrics)} "
                  f"(default for {form}-form {language} data), max_new_tokens "
                  f"{task.max_new_tokens}")


def default_template(name: str, kind: str, prompt_dir: Path, form: str,
                     language: str) -> ChosenTemplate | None:
    """The form's template of `kind` (None: it has none), with its no-input variant."""
    lang = "*" if (form, "*", kind) in DEFAULT_TEMPLATES else language
    template = DEFAULT_TEMPLATES.get((form, lang, kind))
    if template is None:
        return None
    note = f"{name}: no {prompt_dir / (name + KINDS[kind])}; using the default {form}-form template"
    note += f" ({kind})" if kind != "answer" else ""
    return ChosenTemplate(template, f"default ({form}, {language})",
                          DEFAULT_TEMPLATES.get((form, lang, "no_input")), note)
