"""`toolkit ship RUN`: for each target (android, ios, web, server) the fastest exported file
within a top-1 budget, in a bundle with its model card, README, report and web app.

The stage on top of export, verify and bench: it brings them up to date (stages.py), picks from
what they recorded (measurements.py, picks.py) and writes the bundle (bundle.py) from one
`Shipment` (shipment.py) handed to each writer: card.py, readme.py, report_html.py (which
renders the predictions.py computes) and webapp.py; names.py names the bundle's files.
`targets.py` and `command.py` import nothing heavy, so `toolkit --help` stays light.
"""
