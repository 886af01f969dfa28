"""``teamrun schema``: print the team-file JSON Schema."""

from __future__ import annotations

import click

HELP = """Print the team-file JSON Schema (draft 2020-12).

\b
Point your editor at it for completion and hover help, e.g. with the YAML
language server put this first line in a team file:
  # yaml-language-server: $schema=path/to/team.schema.json

\b
Examples:
  teamrun schema > team.schema.json
  teamrun schema --path            # where the installed copy lives
"""


@click.command(help=HELP, short_help="Print the team-file JSON Schema.")
@click.option("--path", "show_path", is_flag=True, help="Print the schema file's location instead.")
def schema(show_path: bool) -> int:
    from teamrun.config.schema import schema_path

    location = schema_path()
    click.echo(str(location) if show_path else location.read_text(encoding="utf-8"), nl=show_path)
    return 0
