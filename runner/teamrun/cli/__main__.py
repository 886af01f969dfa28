"""``python -m teamrun.cli``: the same as the ``teamrun`` console script."""

from teamrun.cli import main

main()
