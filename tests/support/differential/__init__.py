"""The differential fit test: seeded random cases judged by the real kubelet and by the
exporter's fit engine (``cases`` draws them, ``runner`` runs one, ``exceptions`` names the few
differences no source the exporter reads can remove, ``classify`` names the kubelet behaviour
behind a disagreement, ``__main__`` runs many and replays one)::

    python -m tests.support.differential --seed 1 --cases 200 --version 1.37
    python -m tests.support.differential --seed 1 --case 17 --version 1.37 -v

and the sequences: a running exporter judged by the real kubelet after every step of random
sequences with kubelet restarts (``steps`` draws and applies the steps, ``serving`` runs
``serve`` in this process, ``judging`` compares after a step, ``sequences`` runs many and
replays one)::

    python -m tests.support.differential.sequences --seed 1 --sequences 20 --version 1.37
"""

from .cases import Case, draw_case
from .classify import CLASSES, classify
from .exceptions import EXCEPTIONS
from .runner import Outcome, run_case
from .summary import Summary, run_many

__all__ = ["CLASSES", "EXCEPTIONS", "Case", "Outcome", "Summary", "classify", "draw_case",
           "run_case", "run_many"]
