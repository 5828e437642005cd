"""A fake kube-apiserver for the benchmarks and for what the real one (tests/controlplane, the
tests' fixture ``api``) cannot be made to do here: serve only older ResourceSlice versions or
none, answer a watch's 410 Gone as its HTTP status, list from resourceVersion 0 in pages with a
continue token that expires, answer every watch 410 (the tests' fixture ``fake_api``). A test
fake: never part of the installed package or the image (tests/deploy/test_dockerfile.py); the
demo runs without it.

- ``server``: :class:`~.server.FakeApiServer`, the HTTP side (aiohttp), and ``python -m`` for
  measurements;
- ``store``: what it holds (objects by kind, resourceVersions, the events a watch replays);
- ``auth``: who a request comes as (bearer tokens, client certificates, TLS);
- ``cluster``: a simulated node and its pods put into the store.

The objects themselves (and a profile's ResourceSlices) are tests/support/kubeobjects.py's,
shared with the tests on the real API server.
"""
