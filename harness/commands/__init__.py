"""The bodies of the `harness` commands, one job per module; harness/cli.py declares the app.

options: the options compare and advise share, declared once; inputs: parsing the options'
text and the one-line error; output: the consoles and printing a line once; tables: the
results tables and the long texts of their cases; epilogue: what a run prints after its last
cell; compare, advise: those commands' bodies; stored: the commands that read stored runs.
"""
