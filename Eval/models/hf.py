"""Hugging Face transformers adapter: any causal LM from a local path (or hub name where a hub is reachable).

Usage:
    from Eval.models.hf import HFModel
    model = HFModel("/path/to/Qwen2.5-7B-Instruct", dtype="auto", device="auto")
    model.generate(model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None), 16)

Safe by default: weights load from safetensors only (no pickle) and trust_remote_code is off unless asked.
Stops on the tokenizer's EOS, the generation config's EOS ids, and the end-of-turn token(s) the chat template
writes after an assistant message (found by rendering the template, not by knowing the model family).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from Eval.models.base import AdapterOptions, BaseLLM, Generation, Prompt, TokenScores, cut_at_stop
from Eval.models.greedy import greedy_decode

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


class HFModel(BaseLLM):
    name = "hf"

    def __init__(self, path: str, options: AdapterOptions | None = None, *, dtype: str = "auto",
                 device: str = "auto", peft: str | None = None, trust_remote_code: bool = False,
                 allow_pickle: bool = False, threads: int | None = None):
        super().__init__(options)
        if threads:
            torch.set_num_threads(threads)
        self.path, self.peft, self.device = path, peft, resolve_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code,
                                                       padding_side="left")
        self.tokenizer.model_max_length = int(1e30)  # we cut long prompts ourselves; silence the length warning
        if self.tokenizer.pad_token_id is None:  # left padding needs a pad id; it is masked out anyway
            self.tokenizer.pad_token = self.tokenizer.eos_token
        torch_dtype = DTYPES[dtype] if dtype in DTYPES else (torch.float32 if self.device == "cpu" else "auto")
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code,
                                                          use_safetensors=not allow_pickle)
        if peft:
            from peft import PeftModel  # optional dependency, needed only for adapters

            self.model = PeftModel.from_pretrained(self.model, peft)
        self.model.to(self.device).eval()
        self.stop_ids = self._stop_token_ids()

    # --- tokenizer hooks -------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def adds_bos(self) -> bool:
        return len(self.tokenizer("a", add_special_tokens=True)["input_ids"]) > len(self.tokenize("a"))

    def apply_chat(self, text: str) -> str:
        if not self.tokenizer.chat_template:
            raise ValueError(f"{self.path}: the tokenizer has no chat template; run the task in completion mode "
                             "or use a chat model")
        messages = [{"role": "user", "content": text}]
        if self.options.system_prompt:
            messages.insert(0, {"role": "system", "content": self.options.system_prompt})
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def context_window(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _stop_token_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos])
        if self.tokenizer.chat_template:  # special tokens the template writes right after an assistant turn
            marker = "\x00END-OF-ANSWER\x00"
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": marker}], tokenize=False)
            after = self.tokenizer(rendered.split(marker, 1)[-1], add_special_tokens=False)["input_ids"]
            special = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
            for token in after:
                if token not in special:
                    break
                ids.add(token)
        return sorted(i for i in ids if i is not None)

    def identity(self) -> dict:
        weights = sorted(Path(self.path).glob("*.safetensors")) if Path(self.path).is_dir() else []
        digest = hashlib.sha256()
        for w in weights[:1]:  # the first shard's size and head identify a checkpoint cheaply
            digest.update(str(w.stat().st_size).encode())
            with open(w, "rb") as f:
                digest.update(f.read(1 << 20))
        template = self.tokenizer.chat_template or ""
        return {"adapter": self.name, "path": os.path.abspath(self.path) if os.path.exists(self.path) else self.path,
                "peft": self.peft, "dtype": str(self.model.dtype), "device": self.device,
                "model_type": getattr(self.model.config, "model_type", None),
                "num_parameters": sum(p.numel() for p in self.model.parameters()),
                "weights_fingerprint": digest.hexdigest()[:16] if weights else None,
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16] if template else None,
                "stop_token_ids": self.stop_ids}

    # --- generation ----------------------------------------------------------------------------------
    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy generation for one batch; on out-of-memory the batch is halved and retried."""
        stop = tuple(stop) + self.options.stop
        try:
            return self._generate_batch(prompts, max_new_tokens, stop)
        except (torch.OutOfMemoryError, RuntimeError) as err:
            if not _is_oom(err):
                raise
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            if len(prompts) == 1:
                return [Generation("", 0, "error", error="out of memory at batch size 1", batch_size=1)]
            half = len(prompts) // 2
            return self.generate(prompts[:half], max_new_tokens, stop) + \
                self.generate(prompts[half:], max_new_tokens, stop)

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...]) -> list[Generation]:
        batch = self.tokenizer([p.text for p in prompts], return_tensors="pt", padding=True,
                               add_special_tokens=prompts[0].add_special_tokens).to(self.device)
        tail = max((len(self.tokenize(s)) for s in stop), default=0) + 2  # tokens that can hold a stop string

        def stops_here(ids: list[int]) -> bool:
            return bool(stop) and cut_at_stop(self.tokenizer.decode(ids[-tail:], skip_special_tokens=True), stop)[1]

        decoded = greedy_decode(self.model, batch["input_ids"], batch["attention_mask"], max_new_tokens,
                                set(self.stop_ids), stops_here, decode_threads=1 if self.device == "cpu" else None)
        return [self._finish(ids, reason, stop, len(prompts)) for ids, reason in decoded]

    def _finish(self, ids: list[int], reason: str, stop: tuple[str, ...], batch_size: int) -> Generation:
        text_ids = ids[:-1] if ids and ids[-1] in self.stop_ids else ids
        text, _ = cut_at_stop(self.tokenizer.decode(text_ids, skip_special_tokens=True), stop)
        return Generation(self.post_process(text), len(ids), reason, batch_size=batch_size)

    # --- scoring -------------------------------------------------------------------------------------
    @torch.inference_mode()
    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """Per-token log-probabilities of each answer after its prompt, in one forward pass per batch.

        Rows are right-padded and run WITHOUT an attention mask: under causal attention a real token never
        sees the padding after it, so every row is computed exactly as alone and the fast causal kernel is
        kept (a padding mask would force the slower masked path and make batches slower than batch 1). The
        output projection runs only on the positions that predict answer tokens.
        """
        prompts = [self.tokenize(p) for p, _ in pairs]
        answers = [self.tokenize(a) for _, a in pairs]
        rows = [p + a for p, a in zip(prompts, answers)]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
        first = min(len(p) for p in prompts) - 1  # position t predicts token t + 1
        last = max(len(r) for r in rows) - 1
        keep = torch.arange(first, last, device=self.device)
        logits = self.model(input_ids=input_ids, logits_to_keep=keep).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1)
        results = []
        for k, (prompt, answer) in enumerate(zip(prompts, answers)):
            start = len(prompt) - 1 - first
            steps = logprobs[k, start: start + len(answer)]
            target = torch.tensor(answer, device=self.device)
            picked = steps.gather(-1, target[:, None])[:, 0]
            results.append(TokenScores(picked.tolist(), (steps.argmax(-1) == target).tolist()))
        return results
