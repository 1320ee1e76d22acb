"""A model-free adapter for tests and dry runs (lm-eval's dummy-model idea): characters are tokens;
`generate` answers with the prompt's last line reversed word by word (in chat, "[assistant]"), so
"answer </think> thinking <think>" exercises the reasoning path; `score` gives each answer
character log-probability -1.
"""
from __future__ import annotations

from Eval.models import register_model
from Eval.models.base import BaseLLM, Generation, Prompt, TokenScores, cut_at_stop
from Eval.thinking import prompt_opens_thinking


@register_model("echo")
class EchoModel(BaseLLM):
    name = "echo"
    holds_weights = False  # the dry run renders with the adapter itself

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, ids: list[int]) -> str:
        return "".join(map(chr, ids))

    def apply_chat(self, text: str) -> str:
        system = f"[system]{self.options.system_prompt}\n" if self.options.system_prompt else ""
        return f"{system}[user]{text}\n[assistant]"

    def context_window(self) -> int | None:
        return 4096

    def generate(self, prompts: list[Prompt], max_new_tokens: int,
                 stop: tuple[str, ...] = ()) -> list[Generation]:
        self.check_thinking_budget(self.options.thinking_budget)
        outputs, tags = [], self.options.think_tags
        for p in prompts:
            last = p.text.rstrip().rsplit("\n", 1)[-1]
            text = " ".join(reversed(last.split()))[:max_new_tokens]
            opened = prompt_opens_thinking(p.text, tags)
            text, stopped = cut_at_stop(text, tuple(stop) + self.options.stop, tags, opened)
            reason = "stop" if stopped or len(text) < max_new_tokens else "length"
            saved, thinking = self.finish_output(text, opened)
            outputs.append(Generation(saved, len(text), reason, batch_size=len(prompts),
                                      thinking=thinking))
        return outputs

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        return [TokenScores([-1.0] * len(a), [False] * len(a)) for _, a in pairs]
