"""Stepscope's web app: `streamlit run app/streamlit_app.py`. Analyze is the default page.

Streamlit runs this file as a script, not as a module of the package, so it reaches the package by name: in a
checkout after putting the repository on the path (`streamlit run` puts app/ there, not the repository),
installed directly. Everything else the app runs lives in app/ as ordinary modules (app/main.py).
"""

import importlib
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if (_ROOT / "stepscope" / "__init__.py").exists() and str(_ROOT) not in sys.path:  # a checkout
    sys.path.insert(0, str(_ROOT))

importlib.import_module("stepscope.app.main").main()
