"""``teamrun graph``: the delegation graph as Mermaid."""

from __future__ import annotations

import click

HELP = """Print a team's delegation graph as a Mermaid flowchart.

Solid arrows are delegations, dotted arrows handoffs; tools hang off the
agents that use them; remote (a2a:) agents are hexagons labelled
`a2a: <url>`; workspace entries are cylinders, with an arrow from
each agent that writes one and a dotted arrow to each named in its `read:`
(an entry every agent reads says so in its label).
Paste the output into a Markdown ```mermaid block.

\b
Example:
  teamrun graph teams/research-report.yaml
"""


@click.command(help=HELP, short_help="Print the delegation graph as Mermaid.")
@click.argument("team_file", type=click.Path(dir_okay=False))
def graph(team_file: str) -> int:
    from teamrun.config.graph import to_mermaid
    from teamrun.config.loader import load_config

    click.echo(to_mermaid(load_config(team_file).config), nl=False)
    return 0
