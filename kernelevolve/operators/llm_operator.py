"""The universal operator backed by a language model.

draft: spec + knowledge -> first kernel. improve with one parent: a debug prompt when it failed
(failure class, message, trimmed log), an optimise prompt when it passed (per-shape timings
against the baseline); with two parents: crossover. Every call is recorded with its tokens and
cost; a resumed run first replays its own recorded calls (`replay`), and the opt-in reply cache
(`use_cache`) is consulted next. The reply's kernel is extracted here, and a reply without
`class ModelNew` becomes a `no_code` proposal that the debug path can work on.

Two output contracts, each with its own system prompt: kernel prompts ask for a `Change:` line
and one code block; insight prompts ask for one or two plain sentences, and a reply that breaks
that (code, a code block, a long text) is dropped, never stored as an insight.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import defaultdict

from kernelevolve.records.result import Failure
from kernelevolve.llm.base import LLMError, LLMReply, Provider
from kernelevolve.llm.cache import ReplyCache, cache_key
from kernelevolve.llm.extract import extract_kernel
from kernelevolve.operators.base import BaseOperator, OperatorContext, ParentView, Proposal
from kernelevolve.records.calls import LLMCallRecord
from kernelevolve.operators.context_builder import (
    PromptBuilder,
    evaluation_summary,
    insight_system_prompt,
    render,
    system_prompt,
)
from kernelevolve.operators.errors import OperatorError
from kernelevolve.operators.insights import rule_insight, step_label
from kernelevolve.spec import Spec
from kernelevolve.steps import step_kind

_CHANGE = re.compile(r"^\W*change\W*:\s*(.+)$", re.I | re.M)
INSIGHT_MAX_TOKENS = 300
INSIGHT_MAX_CHARS = 400
_CODE_MARKERS = re.compile(
    r"```|~~~|^\s*(import |from \S+ import |def |class |@triton|return )|\bModelNew\b|tl\.\w+\(", re.M
)


def insight_problem(reply: str) -> str | None:
    """Why a reply breaks the insight contract (one or two plain sentences), or None."""
    text = (reply or "").strip()
    if not text:
        return "empty reply"
    if _CODE_MARKERS.search(text):
        return "it holds code"
    if len(" ".join(text.split())) > INSIGHT_MAX_CHARS:
        return f"longer than {INSIGHT_MAX_CHARS} characters"
    if len([ln for ln in text.splitlines() if ln.strip()]) > 3:
        return "more than a few lines"
    return None


def _tool_failure(view: ParentView) -> bool:
    """The node failed because the operator itself raised (building the prompt, calling the model)."""
    return view.evaluation is not None and view.evaluation.failure == str(Failure.OPERATOR)


def reply_note(reply: str, kind: str) -> str:
    """The model's own one-line summary (`Change: ...`), else the kind of step."""
    m = _CHANGE.search(reply or "")
    return m.group(1).strip().strip("`*")[:200] if m else kind


class LLMOperator(BaseOperator):
    def __init__(
        self,
        provider: Provider,
        *,
        token_budget: int = 24000,
        cache: ReplyCache | None = None,
        use_cache: bool = False,
        llm_insights: bool = True,
        knowledge=None,
    ):
        self.provider = provider
        self.name = provider.label
        self.builder = PromptBuilder(token_budget=token_budget, knowledge=knowledge)
        self.cache = cache if cache is not None else (ReplyCache() if use_cache else None)
        self.llm_insights = llm_insights
        self._occurrences: dict[str, int] = {}
        self._replay: dict[str, list[LLMReply]] = defaultdict(list)
        self._lock = threading.Lock()
        self.dropped_insights: list[str] = []  # why each model insight was refused (for tests, logs)
        # Drafts asked for per run: each draft takes another approach (a resumed run counts its earlier drafts).
        self._draft_base: dict[str, int] = {}
        self._draft_calls: dict[str, int] = {}

    def check_endpoint(self) -> None:
        """One cheap request before a run starts: OperatorError with the provider's message."""
        try:
            self.provider.check()
        except LLMError as e:
            raise OperatorError(str(e)) from None

    def replay(self, calls) -> int:
        """Replies this run already paid for and recorded (the database's llm_calls rows not
        attached to a node: a proposal or insight in flight when the run stopped); an identical
        request takes them, in order, before any cache or paid call. Returns how many."""
        n = 0
        for c in calls:
            if (
                c.error is None
                and c.node_id is None
                and c.provider == self.provider.name
                and c.model == self.provider.model
            ):
                self._replay[hashlib.sha256(c.prompt.encode()).hexdigest()].append(
                    LLMReply(text=c.reply, input_tokens=c.input_tokens, output_tokens=c.output_tokens, cached=True)
                )
                n += 1
        return n

    def attach(self, repo) -> None:
        """With the reply cache on, keep it in the run's experiment database."""
        if self.cache is not None:
            from kernelevolve.llm.cache import DatabaseReplyCache

            self.cache = DatabaseReplyCache(repo)

    # -- one model call, cached and recorded --------------------------------------------------
    def ask(
        self,
        prompt: str,
        context: OperatorContext | None,
        *,
        max_tokens: int | None = None,
        record_llm_call=None,
        system: str | None = None,
    ) -> LLMReply:
        system = system_prompt() if system is None else system
        p = self.provider
        key = cache_key(dict(p.settings(), max_tokens=max_tokens or p.max_tokens), prompt, system)
        with self._lock:
            index = self._occurrences.get(key, 0)
            self._occurrences[key] = index + 1
            queued = self._replay.get(hashlib.sha256(prompt.encode()).hexdigest())
            reply = queued.pop(0) if queued else None
        if reply is None and self.cache:
            reply = self.cache.get(key, index)
        record = (context.record_llm_call if context is not None else record_llm_call) or (lambda r: None)
        if reply is None:
            try:
                reply = p.complete(prompt, system, max_tokens=max_tokens)
            except LLMError as e:
                record(
                    LLMCallRecord(
                        provider=p.name, model=p.model, prompt=prompt, reply="", error=str(e), attempts=e.attempts
                    )
                )
                raise OperatorError(str(e)) from None
            if self.cache:
                self.cache.put(key, reply, index)
        record(
            LLMCallRecord(
                provider=p.name,
                model=p.model,
                prompt=prompt,
                reply=reply.text,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cost_usd=0.0 if reply.cached else reply.cost_usd,
                latency_s=reply.latency_s,
                cached=reply.cached,
                attempts=reply.attempts,
            )
        )
        return reply

    def _proposal(self, prompt: str, kind: str, context: OperatorContext) -> Proposal:
        reply = self.ask(prompt, context)
        tokens = 0 if reply.cached else reply.input_tokens + reply.output_tokens
        cost = 0.0 if reply.cached else reply.cost_usd
        found = extract_kernel(reply.text)
        note = reply_note(reply.text, kind)
        if found.source is None:
            return Proposal(
                source=None,
                note=note,
                failure="no_code",
                message=f"{self.name}: {found.message}",
                tokens=tokens,
                cost_usd=cost,
            )
        return Proposal(source=found.source, note=note, tokens=tokens, cost_usd=cost)

    # -- the operator interface ---------------------------------------------------------------
    def draft_index(self, context: OperatorContext) -> int:
        """How many drafts this run asked for before this one (its earlier evaluated drafts, then the
        ones this operator was asked for since): the draft prompt's approach follows from it."""
        with self._lock:
            base = self._draft_base.setdefault(context.run_id, sum(1 for v in context.evaluated if v.kind == "draft"))
            n = self._draft_calls.get(context.run_id, 0)
            self._draft_calls[context.run_id] = n + 1
        return base + n

    def draft(self, spec: Spec, context: OperatorContext) -> Proposal:
        prompt = self.builder.draft(spec, context, index=self.draft_index(context)).prompt
        return self._proposal(prompt, "draft", context)

    def improve(self, parents: list[ParentView], context: OperatorContext) -> Proposal:
        # A parent that failed because the tool failed (Failure.OPERATOR) holds nothing to debug: draft anew.
        parents = [p for p in parents if not _tool_failure(p)]
        kind = step_kind([not p.failed for p in parents])
        if kind == "draft":
            return self.draft(context.spec, context)
        if kind == "crossover":
            return self._proposal(self.builder.crossover(parents[0], parents[1], context).prompt, "crossover", context)
        if kind == "debug":
            return self._proposal(self.builder.debug(parents[0], context).prompt, "debug", context)
        return self._proposal(self.builder.optimise(parents[0], context).prompt, "optimise", context)

    # -- context memory -----------------------------------------------------------------------
    def write_insight(
        self, spec: Spec, child: ParentView, parents: list[ParentView], record_llm_call=None
    ) -> str | None:
        """A model-written insight when enabled, else (or when the call fails) the rule-based one."""
        if _tool_failure(child):  # the tool's error teaches nothing about kernels, here or in another problem
            return None
        fallback = rule_insight(spec, child, parents)
        if not self.llm_insights or child.evaluation is None:
            return fallback
        prompt = render(
            "insight.j2",
            spec_name=spec.name,
            family=spec.family,
            hardware=spec.hardware,
            change=step_label(child, parents),
            timed=bool(child.evaluation.timed),  # no question about speed where the result holds no timing
            result=evaluation_summary(child),
            parent_result=evaluation_summary(parents[0]) if len(parents) == 1 else "",
        )
        try:
            text = self.ask(
                prompt,
                None,
                max_tokens=INSIGHT_MAX_TOKENS,
                record_llm_call=record_llm_call,
                system=insight_system_prompt(),
            ).text
        except OperatorError:
            return fallback
        problem = insight_problem(text)
        if problem:  # broke the contract: dropped, never stored or shown to a later prompt
            self.dropped_insights.append(problem)
            return fallback
        return f"{step_label(child, parents)}: {' '.join(text.split())}"
