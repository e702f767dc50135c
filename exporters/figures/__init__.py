"""Plotly figures. They draw frames that analysis computed; they compute no metric."""
