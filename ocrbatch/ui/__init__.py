"""What a person sees on stderr: the live panel on a terminal, plain log lines elsewhere, the final summary.

    reporter.py  chooses the mode, runs the refresh and ticker threads, writes the metrics file
    panel.py     Snapshot → Rich renderable (the live panel)
    plain.py     Snapshot → one timestamped logfmt line
    summary.py   Summary → the final table
"""

from .reporter import Reporter
from .summary import print_summary, summary_table

__all__ = ["Reporter", "print_summary", "summary_table"]
