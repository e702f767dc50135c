"""One Streamlit page run on its own under streamlit.testing's AppTest (the pages are render() functions of
app/views/, shown by st.navigation in the app; here each runs as the whole script)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def page_test(page: str, timeout: float) -> AppTest:
    """`page`: "analyze", "compare", "ranks", "fleet" or "run" (a file name such as "analyze.py" also works)."""
    name = page.removesuffix(".py")
    return AppTest.from_string(f"from stepscope.app.views.{name} import render\n\nrender()\n", default_timeout=timeout)


def too_precise(at) -> list[tuple[str, float]]:
    """Float cells of the page's tables with more than 4 significant digits (issue 30: the browser test reads the
    page's text, and a table's cells are drawn on a canvas). Places on the clock (ms from the trace's start) keep
    the microsecond on purpose; counts are integers."""
    import numpy as np
    import pandas as pd

    from stepscope.app.tables import POSITION_SUFFIXES

    found = []
    for frame in (d.value for d in at.dataframe):
        for column in frame.columns:
            values = frame[column]
            if not pd.api.types.is_float_dtype(values.dtype) or str(column).endswith(POSITION_SUFFIXES):
                continue
            finite = values[np.isfinite(values.to_numpy(dtype=float))]
            found += [(str(column), v) for v in finite.head(2000) if float(f"{v:.4g}") != v][:3]
    return found
