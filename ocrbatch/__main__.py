"""`python -m ocrbatch` and the `ocrbatch` command. `convert` handles SIGINT and SIGTERM before the command line
module is even imported (a second or so on a slow machine), so that a signal that early still ends the run with
its summary (pipeline/signals.py)."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["convert"]:
        from .pipeline.signals import install

        install()
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
