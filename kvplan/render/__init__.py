"""Presentation: `text` renders plans, compares, sweeps, catalogues and check reports for the
terminal (rich tables, or plain text and TSV in pipes); `svg` draws the HTML report's charts
(no dependencies). The Markdown and HTML report documents are kvplan/render/report.py. Renderers
render finished results and never plan; this package imports nothing on its own, so loading
`svg` does not load rich."""
