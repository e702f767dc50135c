"""An "Open in Perfetto UI" button as a self-contained HTML snippet.

The Perfetto UI accepts a trace from another page by postMessage once it has
answered a PING with PONG (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).
The snippet opens ui.perfetto.dev on click (pop-ups need a user gesture), pings
until the UI answers, then sends the bytes. It only works for browsers that can
reach ui.perfetto.dev; the trace itself never leaves the user's browser except
to that tab.

No trace text reaches the HTML: the trace and the title are embedded as base64
and decoded in JavaScript as data, never as markup, so names in a trace cannot
inject anything.
"""

from __future__ import annotations

import base64

PERFETTO_UI_ORIGIN = "https://ui.perfetto.dev"
DEFAULT_MAX_BYTES = 64 << 20  # beyond this the page itself gets slow; offer the download instead
DEFAULT_TITLE = "Stepscope export"

_TEMPLATE = """<div style="font-family: sans-serif; font-size: 14px">
<button id="stepscope-open-perfetto" type="button">Open in Perfetto UI</button>
<span id="stepscope-perfetto-status" style="margin-left: 0.6em"></span>
</div>
<script>
(function () {
  const ORIGIN = "__ORIGIN__";
  const DATA = "__DATA__";
  const TITLE = "__TITLE__";
  const status = document.getElementById("stepscope-perfetto-status");
  function decode(b64) {
    const text = atob(b64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }
  document.getElementById("stepscope-open-perfetto").addEventListener("click", function () {
    const win = window.open(ORIGIN);
    if (!win) {
      status.textContent = "The browser blocked the pop-up: allow pop-ups for this page and try again.";
      return;
    }
    status.textContent = "Waiting for the Perfetto UI to load...";
    let tries = 0;
    const timer = setInterval(function () {
      tries += 1;
      if (tries > 600) {
        clearInterval(timer);
        window.removeEventListener("message", onMessage);
        status.textContent = "No answer from the Perfetto UI: this browser may not reach it. " +
          "Download the .pftrace and open it there instead.";
        return;
      }
      win.postMessage("PING", ORIGIN);
    }, 50);
    function onMessage(evt) {
      if (evt.origin !== ORIGIN || evt.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      const title = new TextDecoder().decode(decode(TITLE));
      win.postMessage({perfetto: {buffer: decode(DATA).buffer, title: title}}, ORIGIN);
      status.textContent = "Sent to the Perfetto UI.";
    }
    window.addEventListener("message", onMessage);
  });
})();
</script>
"""


def open_in_perfetto_html(trace_bytes: bytes, title: str = DEFAULT_TITLE, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """HTML for st.components.v1.html: a button that opens ui.perfetto.dev and hands it the trace.

    Raises ValueError when the trace is over max_bytes (embedding it would stall the page).
    """
    if len(trace_bytes) > max_bytes:
        raise ValueError(
            f"the trace is {len(trace_bytes) / 2**20:.0f} MB, over the {max_bytes / 2**20:.0f} MB that can be sent "
            "from the page: download it and open it in the Perfetto UI"
        )
    data = base64.b64encode(trace_bytes).decode("ascii")
    title_b64 = base64.b64encode(title.encode("utf-8")).decode("ascii")
    return _TEMPLATE.replace("__ORIGIN__", PERFETTO_UI_ORIGIN).replace("__TITLE__", title_b64).replace("__DATA__", data)
