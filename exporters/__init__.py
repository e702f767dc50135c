"""Stepscope's results for people and other tools: the HTML report, the CLI's text and Markdown, the Plotly
figures the app and the report draw, the Perfetto export. No Streamlit here.

Nothing is imported here: the command line's warm path renders a cached answer as text (text_report) without
loading the Perfetto protos, Plotly or pandas.
"""
