"""Benchmarks: real exporter and simulator processes, numbers printed, never asserted in tests.

Run from the repository root as modules, like ``dashboards``::

    python -m benchmarks.run --quick       the report of docs/performance.md (budgets checked)
    python -m benchmarks.serving           scrapes under refresh, probes, the fleet's cost
    python -m benchmarks.kube_api          what --kube-api adds to memory and the image
    python -m benchmarks.connections       hostile connections (docs/reliability.md)
    python -m benchmarks.soak              a long run against a churning simulator
    python -m benchmarks.hostile_replies   absurd kubelet replies, time and memory per case
    python -m benchmarks.fit               the fit answers' cost per refresh
    python -m benchmarks.naive             the naive design, the baseline of the report

``harness`` holds what they share: the simulator and exporter processes, scraping, /proc;
``budgets`` the budgets ``run`` checks, and for one not met, the run's figures that say why.
"""
