"""--help says every default once, in words a user can act on."""
import argparse
import re

import pytest

import eval as eval_cli
import inference


def parser_of(parse_args) -> argparse.ArgumentParser:
    """The parser a parse_args function builds (captured at parse_known_args)."""
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        captured["parser"] = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture
    try:
        with pytest.raises(SystemExit):
            parse_args([])
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


@pytest.mark.parametrize("parse_args", [inference.parse_args, eval_cli.parse_args], ids=["inference", "eval"])
def test_each_option_states_its_default_once(parse_args):
    parser = parser_of(parse_args)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS) or not action.option_strings:
            continue
        text = formatter._get_help_string(action) % {"default": action.default}
        assert len(re.findall(r"default", text, re.I)) <= 1, (action.option_strings, text)


@pytest.mark.parametrize("parse_args", [inference.parse_args, eval_cli.parse_args], ids=["inference", "eval"])
def test_help_says_defaults_in_words(capsys, parse_args):
    with pytest.raises(SystemExit) as done:
        parse_args(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text  # every None default is said in words
    if parse_args is inference.parse_args:
        assert "echo (no model: answers with the prompt's last line reversed;" in text
