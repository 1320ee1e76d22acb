"""The generation side of reasoning models: stop strings act only after the thinking block's closing tag
(Eval/models/base.py cut_at_stop, shared by the hf, echo and api adapters), custom tag pairs, blocks the prompt
opens, unclosed blocks, and --thinking-budget forcing the closing tag (hf, on the shipped demo model, CPU)."""
import argparse

import pytest

from conftest import ROOT
from Eval.models.base import BaseLLM, Prompt, cut_at_stop
from Eval.thinking import prompt_opens_thinking, thinking_record
from Eval.models.options import AdapterOptions
from Eval.extract import strip_think
from Eval.models.echo import EchoModel
from Eval.models.factory import add_model_arguments, from_args
from Eval.models.greedy import greedy_decode
from Eval.models.hf import HFModel
from Eval.models.stop_watch import StopWatch
from api_fakes import answer
from api_fakes import api, fake  # noqa: F401  (pytest fixtures)

DEMO = ROOT / "demo" / "tiny-qwen2"
THINK = ("<think>", "</think>")
REASONING = ("<reasoning>", "</reasoning>")
# A completion prompt that leaves a <think> block open; the demo model's greedy answer to it (13 tokens, the
# last one <|im_end|>) contains "在", a stop string that must not end its thinking.
OPENED = "问题：小镇的名字是什么？\n回答：<think>"
OPENED_ANSWER = "\ufffd\ufffd\ufffd Numeric在 Numeric在\ufffd被 Numeric在 Abbreviation"


# --- the shared pure helpers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, stop, tags, opened, expected", [
    ("a\nb", ("\n",), None, False, ("a", True)),  # no tags: the plain cut, as before
    ("a\nb", ("\n",), THINK, False, ("a", True)),  # no block: the plain cut
    ("<think>x\ny</think>\n\nans\nmore", ("\n",), THINK, False, ("<think>x\ny</think>\n\nans", True)),
    ("x\ny</think> ans\nz", ("\n",), THINK, True, ("x\ny</think> ans", True)),  # the prompt opened the block
    ("x\ny</think> ans\nz", ("\n",), THINK, False, ("x", True)),  # ... and the same text when it did not
    ("<think>x\ny", ("\n",), THINK, False, ("<think>x\ny", False)),  # unclosed: no stop inside
    ("  <think>x\n</think>y", ("\n",), THINK, False, ("  <think>x\n</think>y", False)),  # whitespace before
    ("answer\n<think>", ("\n",), THINK, False, ("answer", True)),  # a tag later on is answer text
    ("\n<think>a</think>b", ("\n",), THINK, False, ("", True)),  # a stop before the block opens still cuts
    ("</think>\n\n", ("\n",), THINK, True, ("</think>\n\n", False)),  # the whitespace after the tag: no stop
    ("</think>\n\nQuestion: x", ("\nQuestion:",), THINK, True, ("</think>\n", True)),  # reaching past it: cut
    ("<reasoning>a\nb</reasoning>c\nd", ("\n",), REASONING, False, ("<reasoning>a\nb</reasoning>c", True)),
    ("<reasoning>a\nb</reasoning>c\nd", ("\n",), THINK, False, ("<reasoning>a", True)),
])
def test_cut_at_stop_only_outside_the_thinking_block(text, stop, tags, opened, expected):
    assert cut_at_stop(text, stop, tags, opened) == expected


def test_prompt_opening_and_thinking_records():
    assert prompt_opens_thinking("<|im_start|>assistant\n<think>\n", THINK)
    assert not prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n", THINK)  # closed: no thinking
    assert not prompt_opens_thinking("<|im_start|>assistant\n<think>\n", REASONING)
    assert prompt_opens_thinking("Answer: <reasoning>  ", REASONING)
    assert thinking_record("plain answer", THINK, False) is None  # non-reasoning records stay as they were
    assert thinking_record("still thinking", THINK, True) == {"tags": ["<think>", "</think>"],
                                                              "opened_in_prompt": True, "closed": False,
                                                              "budget_hit": False}
    assert thinking_record("<reasoning>r</reasoning>A", REASONING, False, budget_hit=True) == {
        "tags": ["<reasoning>", "</reasoning>"], "opened_in_prompt": False, "closed": True, "budget_hit": True}
    opened, not_opened = ({"thinking": {"tags": list(REASONING), "opened_in_prompt": o}} for o in (True, False))
    assert strip_think("r</reasoning>A", opened) == "A"  # --strip-think runs scoring's own step
    assert strip_think("r", opened) is None and strip_think("r", not_opened) == "r"


def test_strip_think_uses_the_adapters_tags_and_marks_the_record():
    model = BaseLLM(AdapterOptions(strip_think=True, think_tags=REASONING))
    assert model.post_process("<reasoning>r</reasoning>\nA") == "\nA"
    assert model.post_process("<think>r</think>A") == "<think>r</think>A"  # not this model's tags
    assert model.post_process("r\n</reasoning>A", opened_in_prompt=True) == "A"
    assert model.finish_output("<reasoning>r", opened_in_prompt=False) == (
        "<reasoning>r", {"tags": ["<reasoning>", "</reasoning>"], "opened_in_prompt": False, "closed": False,
                         "budget_hit": False})  # unclosed: kept raw, so scoring sees there is no answer
    assert model.finish_output("r</reasoning>A", opened_in_prompt=True) == (
        "A", {"tags": ["<reasoning>", "</reasoning>"], "opened_in_prompt": True, "closed": True,
              "budget_hit": False, "stripped": True})


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="two non-empty strings"):
        AdapterOptions(think_tags=("", "</think>"))
    with pytest.raises(ValueError, match="at least 0"):
        AdapterOptions(thinking_budget=-1)


# --- the echo adapter ---------------------------------------------------------------------------------------
def test_echo_keeps_stops_inside_thinking_and_cuts_after_it():
    # echo answers with the prompt's last line reversed word by word, so a prompt ending with the opening tag
    # gives an output starting with it: the block counts as opened by the prompt, and the output's own tag is
    # thinking text
    prompt = Prompt("d . c </think> b . a <think>", 28, 0, True)
    [out] = EchoModel().generate([prompt], 100, stop=(" .",))
    assert (out.text, out.finish_reason, out.n_tokens) == ("<think> a . b </think> c", "stop", 24)
    assert out.thinking == {"tags": ["<think>", "</think>"], "opened_in_prompt": True, "closed": True,
                            "budget_hit": False}
    [plain] = EchoModel().generate([Prompt("d . c b . a", 11, 0, True)], 100, stop=(" .",))
    assert (plain.text, plain.thinking) == ("a", None)
    [unclosed] = EchoModel().generate([Prompt("b . a <think>", 13, 0, True)], 100, stop=(" .",))
    assert unclosed.text == "<think> a . b" and unclosed.thinking["closed"] is False
    [custom] = EchoModel(AdapterOptions(think_tags=REASONING, strip_think=True)).generate(
        [Prompt("d . c </reasoning> b . a <reasoning>", 36, 0, True)], 100, stop=(" .",))
    assert (custom.text, custom.thinking["tags"], custom.thinking["stripped"]) == (
        " c", ["<reasoning>", "</reasoning>"], True)


def test_a_thinking_budget_is_refused_where_it_cannot_be_enforced():
    with pytest.raises(ValueError, match="-M thinking_budget: the echo backend"):
        EchoModel(AdapterOptions(thinking_budget=4)).generate([Prompt("a", 1, 0, True)], 8)
    parser = argparse.ArgumentParser()
    add_model_arguments(parser, str(DEMO))
    with pytest.raises(ValueError, match="-M thinking_budget: the echo backend"):
        from_args(parser.parse_args(["--backend", "echo", "-M", "thinking_budget=4"]))
    echo = from_args(parser.parse_args(["--backend", "echo", "-M", "think_tags=<r>", "-M", "think_tags=</r>", "-M",
                                        "reasoning=true"]))
    assert (echo.options.think_tags, echo.options.thinking_budget, echo.options.reasoning) == (("<r>", "</r>"),
                                                                                               None, True)
    from Eval.args import backend_help
    assert "-M think_tags=<think> </think>  the thinking block's opening and closing tag" in backend_help("echo")


# --- the hf adapter on the demo model -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return HFModel(str(DEMO), threads=1)


def run(model, text, stop=(), chat=False, max_new_tokens=40, **options):
    model.options = AdapterOptions(**options)
    try:
        return model.generate([model.build_prompt(text, chat, max_new_tokens, None)], max_new_tokens, stop)[0]
    finally:
        model.options = AdapterOptions()


def test_hf_stop_strings_wait_for_the_closing_tag(model):
    out = run(model, OPENED, stop=("在",))
    assert (out.text, out.n_tokens, out.finish_reason) == (OPENED_ANSWER, 13, "stop")  # as without the stop
    assert out.thinking == {"tags": ["<think>", "</think>"], "opened_in_prompt": True, "closed": False,
                            "budget_hit": False}
    other = run(model, OPENED, stop=("在",), think_tags=REASONING)  # these tags: the prompt opened no block
    assert (other.text, other.n_tokens, other.thinking) == ("\ufffd\ufffd\ufffd Numeric", 5, None)


def test_hf_custom_tags_opened_by_the_chat_template(model):
    template = model.tokenizer.chat_template
    model.tokenizer.chat_template = template + "{%- if add_generation_prompt %}{{- '<reasoning>\\n' }}{%- endif %}"
    try:
        free = run(model, "问题：小镇的名字是什么？", chat=True, think_tags=REASONING)
        stopped = run(model, "问题：小镇的名字是什么？", chat=True, stop=("。", "的"), think_tags=REASONING)
        default_tags = run(model, "问题：小镇的名字是什么？", chat=True, stop=("。", "的"))
    finally:
        model.tokenizer.chat_template = template
    # the block is open from the first token, so "。" does not end the output: it runs to <|im_end|>
    assert (stopped.text, stopped.n_tokens) == (free.text, free.n_tokens) == ("Theish光es。", 6)
    assert stopped.thinking == {"tags": ["<reasoning>", "</reasoning>"], "opened_in_prompt": True, "closed": False,
                                "budget_hit": False}
    assert (default_tags.text, default_tags.n_tokens, default_tags.thinking) == ("Theish光es", 5, None)


def test_hf_budget_forces_the_closing_tag_after_exactly_n_thinking_tokens(model):
    close_ids = model.tokenize("</think>")
    batch = model.tokenizer([OPENED], return_tensors="pt")
    [(reference, _)] = greedy_decode(model.model, batch["input_ids"], batch["attention_mask"], 40,
                                     set(model.stop_ids), lambda row, ids: False)
    assert len(reference) == 13 and model.detokenize(reference) == OPENED_ANSWER
    for budget, end in ((0, "stop"), (4, "length")):  # the answer after a forced tag: <|im_end|> / 40 tokens
        watch = StopWatch((), THINK, True, model.detokenize, model.tokenize, budget)
        [(ids, reason)] = greedy_decode(model.model, batch["input_ids"], batch["attention_mask"], 40,
                                        set(model.stop_ids), lambda row, ids: watch(ids),
                                        forced_next=lambda row: watch.take_forced())
        assert ids[:budget] == reference[:budget] and ids[budget:budget + len(close_ids)] == close_ids
        assert watch.budget_hit and watch.mode == "answer" and reason == end
    out = run(model, OPENED, thinking_budget=4)
    assert out.text.startswith(model.detokenize(reference[:4]) + "</think>") and out.text.count("</think>") == 1
    assert (out.n_tokens, out.finish_reason) == (40, "length")  # then the answer runs to max_new_tokens
    assert out.thinking == {"tags": ["<think>", "</think>"], "opened_in_prompt": True, "closed": True,
                            "budget_hit": True}
    assert run(model, OPENED, thinking_budget=13).thinking["budget_hit"] is False  # it stops before the budget
    # After the forced tag, stop strings act again: "在" stays inside the thinking, "N" ends the answer " Numeric"
    late = run(model, OPENED, stop=("在", "N"), thinking_budget=12)
    assert (late.text, late.n_tokens, late.finish_reason) == (OPENED_ANSWER + "</think> ", 12 + 5 + 1, "stop")


def test_hf_budget_rows_of_one_batch_are_independent(model):
    texts = [OPENED, "Question: What is frozen water called?\nAnswer:", "Summary:<think>\n"]
    model.options = AdapterOptions(thinking_budget=2, stop=("在",))
    try:
        prompts = [model.build_prompt(t, False, 24, None) for t in texts]
        together = model.generate(prompts, 24)
        alone = [model.generate([p], 24)[0] for p in prompts]
    finally:
        model.options = AdapterOptions()
    assert [(g.text, g.n_tokens, g.thinking) for g in together] == [(g.text, g.n_tokens, g.thinking) for g in alone]
    # two thinking tokens each, the forced tag, then the answer: "在" stops the first, the second (no block) runs
    # to 24 tokens, the third ends on <|im_end|>
    assert [(g.text, g.n_tokens) for g in together] == [
        ("\ufffd\ufffd</think>\ufffd Human", 2 + 5 + 3), (" to" + " the" * 18 + " 40 and ", 24),
        ("一，</think> Human", 2 + 5 + 2)]
    assert [bool(g.thinking and g.thinking["budget_hit"]) for g in together] == [True, False, True]


# --- the api adapter ------------------------------------------------------------------------------------------
def test_api_holds_stops_back_from_a_thinking_model_and_cuts_after_the_tag(fake, api):
    replies = {"opened": "a\nb</think>\n\nB\nC", "reasoning": "<think>x\n</think>A\nB", "plain": "P\nQ"}

    def reply(path, body, n):
        return answer(path, replies[body["prompt"].split("|")[0]])

    server = fake(reply)
    model = api(server.base_url)
    prompts = [Prompt("opened|<think>", 3, 0, True), Prompt("plain|", 2, 0, True)]
    opened, plain = model.generate(prompts, 16, stop=("\n",))
    sent = {c["body"]["prompt"].split("|")[0]: c["body"].get("stop") for c in server.calls}  # requests run at once
    assert sent == {"opened": None, "plain": ["\n"]}  # stop strings go to the server only where nothing thinks
    assert (opened.text, opened.finish_reason, opened.thinking["opened_in_prompt"]) == ("a\nb</think>\n\nB", "stop",
                                                                                        True)
    assert (plain.text, plain.thinking) == ("P", None)
    reasoner = api(server.base_url, options=AdapterOptions(reasoning=True))
    [out] = reasoner.generate([Prompt("reasoning|", 2, 0, True)], 16, stop=("\n",))
    assert "stop" not in server.calls[-1]["body"] and out.text == "<think>x\n</think>A"
    with pytest.raises(ValueError, match="-M thinking_budget: the api backend"):
        api(server.base_url, options=AdapterOptions(thinking_budget=8)).generate(prompts, 16)


def test_api_reasoning_content_goes_back_inside_the_adapters_tags(fake, api):
    def reply(path, body, n):
        status, payload, headers, delay = answer(path, "B")
        payload["choices"][0]["message"]["reasoning_content"] = "think\nfirst"
        return status, payload, headers, delay

    server = fake(reply)
    model = api(server.base_url, options=AdapterOptions(think_tags=REASONING))
    [prompt] = model.build_prompts(["Which option?"], chat=True, max_new_tokens=8, max_length=None)
    [out] = model.generate([prompt], 8)
    assert (out.text, out.thinking["closed"]) == ("<reasoning>think\nfirst</reasoning>B", True)


def test_hf_thinking_tags_that_are_special_tokens_stay_in_the_output():
    """Magistral's [THINK] [/THINK] are special tokens. Decoded with skip_special_tokens, the closing tag vanished
    from the output: the block read as unclosed, the stop watch never saw it, --strip-think scored nothing."""
    import torch
    tagged = HFModel(str(DEMO), threads=1)
    tagged.tokenizer.add_special_tokens({"additional_special_tokens": ["[THINK]", "[/THINK]"]})
    torch.manual_seed(0)
    tagged.model.resize_token_embeddings(len(tagged.tokenizer))
    tags, close_id = ("[THINK]", "[/THINK]"), tagged.tokenize("[/THINK]")
    assert len(close_id) == 1 and close_id[0] in tagged.tokenizer.all_special_ids
    out = run(tagged, "问题：小镇的名字是什么？\n回答：[THINK]", think_tags=tags, thinking_budget=4)
    thought = tagged.detokenize(tagged.tokenize(out.text.split("[/THINK]")[0]))
    assert out.text.count("[/THINK]") == 1 and out.text.startswith(thought + "[/THINK]")
    assert out.thinking == {"tags": list(tags), "opened_in_prompt": True, "closed": True, "budget_hit": True}
    assert strip_think(out.text, {"thinking": out.thinking}) == out.text.split("[/THINK]", 1)[1].strip()
    assert "<|im_end|>" not in out.text and "<|endoftext|>" not in out.text  # other special tokens stay out
