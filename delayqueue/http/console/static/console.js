// The console's one script, served by the console (/dashboard/console.js) rather than inline,
// so the pages work under "Content-Security-Policy: default-src 'self'". Every page works
// without it; it adds: confirmation of the forms marked data-confirm, the topics table's
// auto-refresh, and the charts' hover readout.
(function () {
  "use strict";

  // A form with data-confirm asks first (Purge topic, Purge all, a dead letter's Purge).
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });

  // The topics table refreshes itself: ?fragment=1 of the same URL (its sort, filter and
  // page) every data-refresh-ms, while the auto-refresh box is ticked.
  const box = document.getElementById("fleet");
  const toggle = document.getElementById("auto-refresh");
  if (box && toggle && box.dataset.refreshMs) {
    const refresh = async function () {
      if (!toggle.checked) return;
      const url = new URL(window.location.href);
      url.searchParams.set("fragment", "1");
      try {
        const answer = await fetch(url, {headers: {"Accept": "text/html"}});
        if (answer.ok) box.innerHTML = await answer.text();
      } catch (err) {
        box.dataset.refreshError = String(err);
      }
    };
    window.setInterval(refresh, Number(box.dataset.refreshMs));
  }

  // A chart's point under the pointer: its time and values in the chart's readout, and a
  // marker line through it (the same text as the point's <title> tooltip).
  document.addEventListener("mouseover", function (event) {
    const hit = event.target.closest ? event.target.closest("rect.hit") : null;
    if (!hit) return;
    const figure = hit.closest("figure");
    const svg = hit.closest("svg");
    const title = hit.querySelector("title");
    const readout = figure && figure.querySelector(".readout");
    if (readout && title) readout.textContent = title.textContent;
    const marker = svg && svg.querySelector("line.marker");
    if (marker) {
      marker.setAttribute("x1", hit.dataset.x);
      marker.setAttribute("x2", hit.dataset.x);
      marker.setAttribute("visibility", "visible");
    }
  });
})();
