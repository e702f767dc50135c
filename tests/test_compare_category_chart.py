"""The Compare page's per-category chart is drawn in the unit of the table beside it (app/views/compare.py picks one
unit for the table's times and passes it on). SYNTHETIC category rows, built here."""

from __future__ import annotations

import pandas as pd
import pytest

from stepscope.analysis.number_format import shared_unit
from stepscope.exporters.figures.compare_charts import category_bars


@pytest.mark.parametrize(
    ("a_us", "b_us", "unit"), [([1890.0, 181.0], [1640.0, 310.0], "ms"), ([12.1, 27.2], [16.4, 31.0], "us")]
)
def test_the_category_chart_is_in_the_tables_unit(a_us, b_us, unit):
    categories = pd.DataFrame({"category": ["gemm", "attention"], "a_us": a_us, "b_us": b_us})
    categories["delta_us"] = categories["b_us"] - categories["a_us"]
    shown = shared_unit(categories[["a_us", "b_us", "delta_us"]].to_numpy().ravel().tolist(), "us")
    fig = category_bars(categories, "A", "B", shown)
    scale = {"us": 1.0, "ms": 1e-3}[unit]
    assert shown == unit
    assert fig.layout.yaxis.title.text == unit
    assert list(fig.data[0].y) == pytest.approx([v * scale for v in a_us])
    assert list(fig.data[1].y) == pytest.approx([v * scale for v in b_us])
    assert fig.data[0].hovertemplate.split("<extra>")[0].endswith(f" {unit}")
