import sys

from .train import main

if __name__ == "__main__":  # run as `python -m ocrbatch.training`; imported (a docs build), nothing runs
    sys.exit(main())
