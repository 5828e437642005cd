"""What each command builds, runs and stops (``cli.py`` parses the flags and picks one).

- ``serve``: the refresh loop and the HTTP server until SIGTERM/SIGINT; the ``build_*``
  functions the other commands share, and :class:`UsageError` (exit status 2, one line);
- ``snapshot``: read the kubelet once; the per-NUMA report, or a ``--shape``/``--why`` answer
  (the pod read from the Kubernetes API);
- ``report``: the snapshot report's table and JSON;
- ``demo``: ``serve`` from the built-in simulator, and the ``simulate`` command (the simulator
  alone).
"""
