"""``python -m headwater.cli``."""

from headwater.cli import main

main()
