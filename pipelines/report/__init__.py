"""Report: the HTML report with plots and the recommendation exports.

Owns the report's reads (``data``), its page (``html``), plots (``plots``) and words (``text``).
"""
