"""Team files and server scripts the observe tests share."""

from __future__ import annotations

from tests.fakeserver import FakeOpenAI, text, tool_calls

THREE_WORKERS = """\
supervisor: lead
agents:
  lead:
    model: openai/lead
    instructions: Split the question and ask your workers.
    delegates_to: [alpha, beta, gamma]
    delegation: {parallel: true, max_concurrency: 4}
  alpha: {model: openai/alpha, description: Researches alpha., instructions: Answer about alpha.}
  beta: {model: openai/beta, description: Researches beta., instructions: Answer about beta.}
  gamma: {model: openai/gamma, description: Researches gamma., instructions: Answer about gamma.}
"""


def script_fan_out(fake_openai: FakeOpenAI, *, delay: float = 0.05) -> None:
    """lead asks alpha, beta and gamma at once, then sums up."""
    fake_openai.script(
        "lead",
        [
            tool_calls(
                ("ask_alpha", {"task": "about a"}),
                ("ask_beta", {"task": "about b"}),
                ("ask_gamma", {"task": "about c"}),
            ),
            text("a, b and c compared"),
        ],
    )
    for worker in ("alpha", "beta", "gamma"):
        fake_openai.script(worker, [text(f"{worker} says hi", delay=delay)])
