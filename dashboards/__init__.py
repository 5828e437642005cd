"""Grafana dashboards and Prometheus rules for podresources-exporter, generated from code.

Run ``python -m dashboards.generate`` after changing anything here; a test fails when the committed
JSON (and the Helm chart's copies) differ from what the code generates.
"""
