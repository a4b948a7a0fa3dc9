// crond web: live updates without inline script (the page's CSP allows only this file).
// A page with <main data-live> listens to /events and fetches itself again when the jobs
// change; a followed trigger (<main data-follow=URL>) appends its run's lines as they come.
// Lines are added as text, never as HTML.
"use strict";
(function () {
  const main = document.getElementById("live");
  if (!main) { return; }
  // Only the parts that changed are replaced: a form the user is filling in (a pause's
  // note) keeps its element, its text and the focus while the jobs around it change.
  function update(next) {
    let old = main.firstChild;
    Array.from(next.childNodes).forEach(function (node) {
      let same = old;
      // An element may be found further on; text (the blanks between) only where it is.
      while (same && !same.isEqualNode(node)) {
        same = node.nodeType === Node.ELEMENT_NODE ? same.nextSibling : null;
      }
      if (same) {  // unchanged: what lies before it in the page went away
        while (old !== same) { const gone = old; old = old.nextSibling; gone.remove(); }
        old = same.nextSibling;
      } else {
        main.insertBefore(node, old);
      }
    });
    while (old) { const gone = old; old = old.nextSibling; gone.remove(); }
  }
  if (main.dataset.live) {
    let busy = false;
    const events = new EventSource("/events?since=" + encodeURIComponent(main.dataset.version || ""));
    events.addEventListener("version", function (e) { document.body.dataset.version = e.data; });
    events.addEventListener("changed", function (e) {
      if (busy) { return; }
      busy = true;
      fetch(window.location.href, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null) { return; }
          const next = new DOMParser().parseFromString(html, "text/html").getElementById("live");
          if (next) { update(next); }
          document.body.dataset.version = e.data;
          document.body.dataset.updated = String(Date.now());
        })
        .finally(function () { busy = false; });
    });
  }
  if (main.dataset.follow) {
    const output = document.getElementById("output");
    const status = document.getElementById("status");
    output.textContent = "";
    const events = new EventSource(main.dataset.follow);
    events.addEventListener("line", function (e) {
      const data = JSON.parse(e.data);
      output.appendChild(document.createTextNode(data.line + "\n"));
    });
    events.addEventListener("end", function (e) {
      const data = JSON.parse(e.data);
      events.close();
      status.textContent = "";
      if (data.error) {
        status.textContent = "refused: " + data.error;
        return;
      }
      status.appendChild(document.createTextNode("ended: " + (data.result.outcome || "") + " "));
      const link = document.createElement("a");
      link.href = "/runs/" + encodeURIComponent(data.result.run_id);
      link.textContent = "(run " + data.result.run_id + ")";
      status.appendChild(link);
      status.dataset.outcome = data.result.outcome || "ended";
    });
  }
})();
