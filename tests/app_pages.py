"""One Streamlit page run on its own under streamlit.testing's AppTest (the pages are render() functions of
app/views/, shown by st.navigation in the app; here each runs as the whole script)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def page_test(page: str, timeout: float) -> AppTest:
    """`page`: "analyze", "compare", "ranks", "fleet" or "run" (a file name such as "analyze.py" also works)."""
    name = page.removesuffix(".py")
    return AppTest.from_string(f"from app.views.{name} import render\n\nrender()\n", default_timeout=timeout)
