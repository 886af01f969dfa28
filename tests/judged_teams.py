"""Small teams graded by a judge on the fake provider's model ``openai/fake``: an agent's ``accept:`` judge, and a
workflow loop's ``until:`` judge (each names no model of its own: it uses ``defaults.model``)."""

from __future__ import annotations

__all__ = ["JUDGED", "LOOPED"]

JUDGED = """\
version: 1
name: judged
supervisor: lead
defaults: {model: openai/fake, num_retries: 0}
agents:
  lead:
    accept:
      - judge: {rubric: The answer says hello.}
"""

LOOPED = """\
version: 1
name: looped
defaults: {model: openai/fake, num_retries: 0}
workflow:
  steps:
    - id: revise
      loop:
        max_iterations: 3
        until:
          - judge: {rubric: The answer says hello.}
        steps:
          - {id: draft, agent: writer, input: "{{ input }}"}
  output: "{{ steps.revise.text }}"
agents:
  writer: {}
"""
