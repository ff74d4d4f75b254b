"""`python -m kernelevolve` is the `kernelevolve` command."""

from kernelevolve.cli import main

main()
