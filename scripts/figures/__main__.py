"""`python3 -m figures` in scripts/: the same as scripts/figures.py."""
from .cli import main

main()
