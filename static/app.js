// The playground's few behaviours that htmx attributes do not cover. No inline scripts: the page's
// Content-Security-Policy allows scripts from /static only.
(function () {
  "use strict";

  function streamOf(elt) {
    return elt && elt.closest ? elt.closest("[sse-connect]") : null;
  }

  // Skip an event this page already has (ids only grow); a replay after a reconnect can overlap.
  document.addEventListener("htmx:sseBeforeMessage", function (evt) {
    var source = streamOf(evt.target);
    var id = parseInt(evt.detail && evt.detail.lastEventId, 10);
    var seen = parseInt(source ? source.dataset.lastEventId : "", 10);
    if (!isNaN(id) && !isNaN(seen) && id <= seen) {
      evt.preventDefault();
    }
  });

  // Remember the last event and put it in the stream's URL: htmx's SSE extension reconnects with a
  // new EventSource, which sends no Last-Event-ID header, so the server reads `after` instead.
  document.addEventListener("htmx:sseMessage", function (evt) {
    var source = streamOf(evt.target);
    var id = parseInt(evt.detail && evt.detail.lastEventId, 10);
    if (!source || isNaN(id)) {
      return;
    }
    source.dataset.lastEventId = String(id);
    var url = new URL(source.getAttribute("sse-connect"), window.location.href);
    url.searchParams.set("after", String(id));
    source.setAttribute("sse-connect", url.pathname + url.search);
    followIfAtBottom();
  });

  var pinned = true;
  window.addEventListener("scroll", function () {
    pinned = window.innerHeight + window.scrollY >= document.body.scrollHeight - 160;
  });

  function followIfAtBottom() {
    if (pinned) {
      window.scrollTo(0, document.body.scrollHeight);
    }
  }

  // Ctrl+Enter (or Cmd+Enter) sends the message.
  document.addEventListener("keydown", function (evt) {
    if (evt.key === "Enter" && (evt.ctrlKey || evt.metaKey) && evt.target.matches("#composer textarea")) {
      evt.preventDefault();
      evt.target.form.requestSubmit();
    }
  });

  // Keep the cursor in the composer after it is replaced by the server's fresh one.
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "composer") {
      var box = document.querySelector("#composer textarea");
      if (box) {
        box.focus();
      }
    }
  });
})();
